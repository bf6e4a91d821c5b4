package sandbox

import (
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

var (
	filterOnce sync.Once
	filterFile *os.File
	filterErr  error
)

// filterFile returns the file pid 1 reads the seccomp filter from: the
// filter compiled once per process (or taken from the cache in the state
// directory, which saves each new process the 35 ms of compiling it), or
// /dev/null without seccomp.
func (r *run) filterFile() (*os.File, error) {
	if r.opts.NoSeccomp {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		r.closers = append(r.closers, f)
		return f, nil
	}
	filterOnce.Do(func() { filterFile, filterErr = cachedFilter(r.opts.StateDir) })
	return filterFile, filterErr
}

func cachedFilter(stateDir string) (*os.File, error) {
	profile, key, err := defaultProfile()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(stateDir, "seccomp-"+key+".bpf")
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 && len(b)%8 == 0 {
		// A sealed copy: no file of the host goes into a sandbox.
		if f, err := sealedFile(b); err == nil {
			return f, nil
		}
	}
	f, err := compileFilter(profile)
	if err != nil {
		return nil, err
	}
	// Cache it for the next process; a failure only costs time.
	if err := os.MkdirAll(stateDir, 0o755); err == nil {
		if tmp, err := os.CreateTemp(stateDir, ".seccomp-"); err == nil {
			_, err := io.Copy(tmp, io.NewSectionReader(f, 0, 1<<30))
			if cerr := tmp.Close(); err == nil && cerr == nil {
				err = os.Rename(tmp.Name(), path)
			}
			if err != nil {
				os.Remove(tmp.Name())
			}
		}
	}
	return f, nil
}

func sealedFile(b []byte) (*os.File, error) {
	f, err := memfile("computerfs-sandbox-seccomp")
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, err
	}
	if err := seal(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func seal(f *os.File) error {
	_, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS,
		unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE)
	return err
}

// memfile is an anonymous file that can be sealed.
func memfile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
