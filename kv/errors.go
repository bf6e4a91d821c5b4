package kv

import (
	"errors"
	"fmt"
	"syscall"
)

// Error is a file system error with the errno that POSIX gives it. The
// sentinels below are the only errors callers need to tell apart; compare
// with errors.Is. Anything else the store returns (I/O, corruption) is a
// plain wrapped error and means EIO to a POSIX caller.
type Error struct {
	msg   string
	errno syscall.Errno
}

func (e *Error) Error() string { return e.msg }

// Errno is the POSIX error number for e.
func (e *Error) Errno() syscall.Errno { return e.errno }

var (
	ErrNotFound     = &Error{"no such file or directory", syscall.ENOENT}
	ErrExist        = &Error{"file exists", syscall.EEXIST}
	ErrNotDir       = &Error{"not a directory", syscall.ENOTDIR}
	ErrIsDir        = &Error{"is a directory", syscall.EISDIR}
	ErrNotEmpty     = &Error{"directory not empty", syscall.ENOTEMPTY}
	ErrInvalid      = &Error{"invalid argument", syscall.EINVAL}
	ErrNameTooLong  = &Error{"file name too long", syscall.ENAMETOOLONG}
	ErrPerm         = &Error{"operation not permitted", syscall.EPERM}
	ErrNoData       = &Error{"no such attribute", syscall.ENODATA}
	ErrRange        = &Error{"result too large", syscall.ERANGE}
	ErrTooBig       = &Error{"argument list too long", syscall.E2BIG}
	ErrFileTooLarge = &Error{"file too large", syscall.EFBIG}
	ErrNotSupported = &Error{"operation not supported", syscall.EOPNOTSUPP}
	ErrTooManyLinks = &Error{"too many links", syscall.EMLINK}
	// ErrNXIO is lseek's answer for SEEK_DATA or SEEK_HOLE at or past the
	// end, and for SEEK_DATA past the last data.
	ErrNXIO = &Error{"no such device or address", syscall.ENXIO}
)

// ErrCorrupt marks a store whose records do not decode.
var ErrCorrupt = errors.New("store corrupt")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Errno maps any error from this package to a POSIX error number: the
// sentinel's own number, or EIO for everything else.
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.errno
	}
	var n syscall.Errno
	if errors.As(err, &n) {
		return n
	}
	return syscall.EIO
}
