package computerfs

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// watchUnmount calls gone once mp is no longer mounted in this process's
// mount namespace, until stop is closed. The kernel reports changes of the
// mount table as POLLPRI on /proc/self/mountinfo; the table is also read
// once a second in case an event was missed (seen on a loaded host). The
// check allocates nothing, so an idle daemon stays idle for trimMemory.
func watchUnmount(mp string, stop <-chan struct{}, log *slog.Logger, gone func()) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		log.Warn("cannot watch for an unmount from outside", "err", err)
		return
	}
	defer f.Close()
	want := []byte(mountinfoEscape(mp))
	buf := make([]byte, 64<<10)
	pfd := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
	for {
		select {
		case <-stop:
			return
		default:
		}
		var mounted bool
		mounted, buf = inMountinfo(f, buf, want)
		if !mounted {
			log.Info("the mount is gone; stopping running commands and warm sandboxes", "mountpoint", mp)
			gone()
			return
		}
		if _, err := unix.Poll(pfd, 1000); err != nil && err != unix.EINTR {
			log.Warn("cannot watch for an unmount from outside", "err", err)
			return
		}
	}
}

// inMountinfo reads the mount table from f into buf (grown as needed)
// and reports whether a mount has the mount point want (escaped as
// mountinfo escapes it). It answers true when the table cannot be read.
func inMountinfo(f *os.File, buf, want []byte) (bool, []byte) {
	n := 0
	for {
		if n == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
		m, err := f.ReadAt(buf[n:], int64(n))
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return true, buf
		}
	}
	for table := buf[:n]; len(table) > 0; {
		line := table
		if i := bytes.IndexByte(table, '\n'); i >= 0 {
			line, table = table[:i], table[i+1:]
		} else {
			table = nil
		}
		// id parent major:minor root MOUNTPOINT ...
		for field := 0; field < 4; field++ {
			i := bytes.IndexByte(line, ' ')
			if i < 0 {
				line = nil
				break
			}
			line = line[i+1:]
		}
		if i := bytes.IndexByte(line, ' '); i >= 0 && bytes.Equal(line[:i], want) {
			return true, buf
		}
	}
	return false, buf
}

// mountinfoEscape escapes a path as /proc/self/mountinfo shows it.
func mountinfoEscape(p string) string {
	return strings.NewReplacer(" ", `\040`, "\t", `\011`, "\n", `\012`, `\`, `\134`).Replace(p)
}
