// Package proc answers questions about other processes from /proc.
package proc

import (
	"bytes"
	"fmt"
	"os"
)

// Running reports whether any thread of process pid is still running, that
// is, has not exited. A process that is gone, or a zombie whose threads
// have all exited, is not running: its files are closed, and with them
// its locks. When a multithreaded process is killed its main thread can
// turn zombie while the others are still exiting, and the process keeps
// its files until the last of them is done, so every thread is looked at,
// not only the main one.
func Running(pid int) bool {
	if pid <= 0 {
		return false
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, t := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err == nil && !zombie(stat) {
			return true
		}
	}
	return false
}

// zombie tells from a /proc stat line ("pid (comm) state ...", where comm
// may hold spaces and parentheses) whether the task has exited.
func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	switch stat[i+2] {
	case 'Z', 'X':
		return true
	}
	return false
}
