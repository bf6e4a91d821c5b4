package sandbox

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

var (
	filterOnce sync.Once
	filterFile *os.File
	filterErr  error
)

// filterFile returns the file pid 1 reads the seccomp filter from: the
// filter compiled once per process, or /dev/null without seccomp.
func (r *run) filterFile() (*os.File, error) {
	if r.opts.NoSeccomp {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		r.closers = append(r.closers, f)
		return f, nil
	}
	filterOnce.Do(func() { filterFile, filterErr = compileFilter() })
	return filterFile, filterErr
}

// memfile is an anonymous file that can be sealed.
func memfile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
