package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/computerfs/computerfs/kv"
)

// daemonize starts this command again without --background, detached from
// the terminal, with its log in logFile, and returns once the child reports
// that the mount answers (or why it failed).
func daemonize(args []string, store, logFile string) error {
	if err := kv.CheckDir(store); err != nil {
		return err // before anything is written into a directory that is not ours
	}
	if logFile == "" {
		if err := os.MkdirAll(store, 0o700); err != nil {
			return fmt.Errorf("create store: %w", err)
		}
		logFile = filepath.Join(store, "daemon.log")
	}
	logf, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("daemon log: %w", err)
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	child := append([]string{"mount", "--ready-fd=3"}, stripFlag(args, "background")...)
	cmd := exec.Command(exe, child...)
	cmd.Stdin = nil
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("start daemon: %w", err)
	}
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSpace(line)
	if err != nil && line == "" {
		// The child died before it reported: its log says why.
		cmd.Wait()
		return fmt.Errorf("daemon exited before mounting (%s); see %s", cmd.ProcessState, logFile)
	}
	if line != "ok" {
		cmd.Wait()
		return errors.New(line)
	}
	fmt.Println(strconv.Itoa(cmd.Process.Pid))
	cmd.Process.Release()
	return nil
}
