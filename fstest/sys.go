package fstest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The x/sys/unix wrappers return EINTR as is. Against a FUSE filesystem a
// slow request can be interrupted by the Go runtime's preemption signal; the
// kernel then either has not sent the request yet or the server gave it up,
// so repeating the call is correct. Every system call of the suite goes
// through one of these wrappers.

func retry(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}

func retry1[T any](f func() (T, error)) (T, error) {
	for {
		v, err := f()
		if err != unix.EINTR {
			return v, err
		}
	}
}

func xOpen(p string, flags int, mode uint32) (int, error) {
	return retry1(func() (int, error) { return unix.Open(p, flags|unix.O_CLOEXEC, mode) })
}

func xOpenat(dirfd int, p string, flags int, mode uint32) (int, error) {
	return retry1(func() (int, error) { return unix.Openat(dirfd, p, flags|unix.O_CLOEXEC, mode) })
}

func xRead(fd int, b []byte) (int, error) {
	return retry1(func() (int, error) { return unix.Read(fd, b) })
}

func xWrite(fd int, b []byte) (int, error) {
	return retry1(func() (int, error) { return unix.Write(fd, b) })
}

func xPread(fd int, b []byte, off int64) (int, error) {
	return retry1(func() (int, error) { return unix.Pread(fd, b, off) })
}

func xPwrite(fd int, b []byte, off int64) (int, error) {
	return retry1(func() (int, error) { return unix.Pwrite(fd, b, off) })
}

func xSeek(fd int, off int64, whence int) (int64, error) {
	return retry1(func() (int64, error) { return unix.Seek(fd, off, whence) })
}

func xStat(p string, st *unix.Stat_t) error {
	return retry(func() error { return unix.Stat(p, st) })
}

func xLstat(p string, st *unix.Stat_t) error {
	return retry(func() error { return unix.Lstat(p, st) })
}

func xFstat(fd int, st *unix.Stat_t) error {
	return retry(func() error { return unix.Fstat(fd, st) })
}

func xMkdir(p string, mode uint32) error {
	return retry(func() error { return unix.Mkdir(p, mode) })
}

func xRmdir(p string) error { return retry(func() error { return unix.Rmdir(p) }) }

func xUnlink(p string) error { return retry(func() error { return unix.Unlink(p) }) }

func xRename(a, b string) error { return retry(func() error { return unix.Rename(a, b) }) }

func xRename2(a, b string, flags uint) error {
	return retry(func() error { return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, flags) })
}

func xLink(a, b string) error { return retry(func() error { return unix.Link(a, b) }) }

func xSymlink(target, p string) error {
	return retry(func() error { return unix.Symlink(target, p) })
}

func xReadlink(p string) (string, error) {
	buf := make([]byte, 8192)
	n, err := retry1(func() (int, error) { return unix.Readlink(p, buf) })
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func xChmod(p string, mode uint32) error { return retry(func() error { return unix.Chmod(p, mode) }) }

func xChown(p string, uid, gid int) error {
	return retry(func() error { return unix.Chown(p, uid, gid) })
}

func xLchown(p string, uid, gid int) error {
	return retry(func() error { return unix.Lchown(p, uid, gid) })
}

func xTruncate(p string, n int64) error { return retry(func() error { return unix.Truncate(p, n) }) }

func xFtruncate(fd int, n int64) error {
	return retry(func() error { return unix.Ftruncate(fd, n) })
}

func xFallocate(fd int, mode uint32, off, n int64) error {
	return retry(func() error { return unix.Fallocate(fd, mode, off, n) })
}

func xFsync(fd int) error     { return retry(func() error { return unix.Fsync(fd) }) }
func xFdatasync(fd int) error { return retry(func() error { return unix.Fdatasync(fd) }) }

// xUtimens sets times of p; ts may hold UTIME_NOW or UTIME_OMIT in Nsec.
func xUtimens(p string, ts []unix.Timespec, flags int) error {
	return retry(func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, flags) })
}

func xMknod(p string, mode uint32, dev int) error {
	return retry(func() error { return unix.Mknod(p, mode, dev) })
}

func xStatfs(p string, st *unix.Statfs_t) error {
	return retry(func() error { return unix.Statfs(p, st) })
}

func xGetdents(fd int, buf []byte) (int, error) {
	return retry1(func() (int, error) { return unix.Getdents(fd, buf) })
}

func xFaccessat(p string, mode uint32, flags int) error {
	return retry(func() error { return unix.Faccessat(unix.AT_FDCWD, p, mode, flags) })
}

func xFlock(fd, how int) error { return retry(func() error { return unix.Flock(fd, how) }) }

func xFcntlLock(fd int, cmd int, lk *unix.Flock_t) error {
	return retry(func() error { return unix.FcntlFlock(uintptr(fd), cmd, lk) })
}

func xCopyFileRange(rfd int, roff *int64, wfd int, woff *int64, n int) (int, error) {
	return retry1(func() (int, error) { return unix.CopyFileRange(rfd, roff, wfd, woff, n, 0) })
}

func xSetxattr(p, name string, v []byte, flags int) error {
	return retry(func() error { return unix.Setxattr(p, name, v, flags) })
}

func xLsetxattr(p, name string, v []byte, flags int) error {
	return retry(func() error { return unix.Lsetxattr(p, name, v, flags) })
}

func xGetxattr(p, name string, buf []byte) (int, error) {
	return retry1(func() (int, error) { return unix.Getxattr(p, name, buf) })
}

func xLgetxattr(p, name string, buf []byte) (int, error) {
	return retry1(func() (int, error) { return unix.Lgetxattr(p, name, buf) })
}

func xListxattr(p string, buf []byte) (int, error) {
	return retry1(func() (int, error) { return unix.Listxattr(p, buf) })
}

func xLlistxattr(p string, buf []byte) (int, error) {
	return retry1(func() (int, error) { return unix.Llistxattr(p, buf) })
}

func xRemovexattr(p, name string) error {
	return retry(func() error { return unix.Removexattr(p, name) })
}

// writeFull writes all of b at off with pwrite.
func writeFull(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := xPwrite(fd, b, off)
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		b = b[n:]
		off += int64(n)
	}
	return nil
}

// readFull fills b from off with pread; it returns the count read, short
// only at end of file.
func readFull(fd int, b []byte, off int64) (int, error) {
	total := 0
	for total < len(b) {
		n, err := xPread(fd, b[total:], off+int64(total))
		if err != nil {
			return total, err
		}
		if n == 0 {
			break
		}
		total += n
	}
	return total, nil
}

// readAllFd reads fd from offset 0 to end of file.
func readAllFd(fd int) ([]byte, error) {
	var st unix.Stat_t
	if err := xFstat(fd, &st); err != nil {
		return nil, err
	}
	// Sized by fstat, with room to notice a file longer than it says.
	out := make([]byte, 0, st.Size+4096)
	off := int64(0)
	for {
		if len(out) == cap(out) {
			out = append(out, 0)[:len(out)]
		}
		n, err := xPread(fd, out[len(out):cap(out)], off)
		if err != nil {
			return out, err
		}
		if n == 0 {
			return out, nil
		}
		out = out[:len(out)+n]
		off += int64(n)
	}
}

func readFile(p string) ([]byte, error) {
	fd, err := xOpen(p, unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return readAllFd(fd)
}

// dirent is one entry returned by getdents64.
type dirent struct {
	Ino  uint64
	Off  int64
	Type uint8
	Name string
}

// parseDirents decodes a getdents64 buffer (struct linux_dirent64).
func parseDirents(buf []byte) ([]dirent, error) {
	var out []dirent
	for len(buf) > 0 {
		if len(buf) < 19 {
			return out, fmt.Errorf("truncated dirent (%d bytes left)", len(buf))
		}
		reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
		if reclen < 20 || reclen > len(buf) {
			return out, fmt.Errorf("bad d_reclen %d", reclen)
		}
		name := buf[19:reclen]
		if i := strings.IndexByte(string(name), 0); i >= 0 {
			name = name[:i]
		} else {
			return out, fmt.Errorf("dirent name not NUL-terminated")
		}
		out = append(out, dirent{
			Ino:  binary.NativeEndian.Uint64(buf[0:8]),
			Off:  int64(binary.NativeEndian.Uint64(buf[8:16])),
			Type: buf[18],
			Name: string(name),
		})
		buf = buf[reclen:]
	}
	return out, nil
}

// readDirents reads the rest of the directory stream of fd with getdents64
// calls of bufSize bytes.
func readDirents(fd int, bufSize int) ([]dirent, error) {
	buf := make([]byte, bufSize)
	var out []dirent
	for {
		n, err := xGetdents(fd, buf)
		if err != nil {
			return out, err
		}
		if n == 0 {
			return out, nil
		}
		ents, err := parseDirents(buf[:n])
		out = append(out, ents...)
		if err != nil {
			return out, err
		}
	}
}

// listDir returns all entries of directory p, "." and ".." included.
func listDir(p string) ([]dirent, error) {
	fd, err := xOpen(p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return readDirents(fd, 32<<10)
}

// listNames returns the names in directory p without "." and "..".
func listNames(p string) ([]string, error) {
	ents, err := listDir(p)
	var names []string
	for _, e := range ents {
		if e.Name != "." && e.Name != ".." {
			names = append(names, e.Name)
		}
	}
	return names, err
}

// removeAll removes p and everything below it, like rm -rf, through the
// retrying wrappers.
func removeAll(p string) error {
	var st unix.Stat_t
	if err := xLstat(p, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return xUnlink(p)
	}
	// Root may lack nothing, but make sure a 0 mode does not matter even if
	// the filesystem checks permissions itself.
	_ = xChmod(p, 0o700)
	names, err := listNames(p)
	if err != nil {
		return fmt.Errorf("listing %s: %w", p, err)
	}
	for _, n := range names {
		if err := removeAll(filepath.Join(p, n)); err != nil {
			return err
		}
	}
	if err := xRmdir(p); err != nil {
		return fmt.Errorf("rmdir %s: %w", p, err)
	}
	return nil
}

// processUmask reads the umask of this process from /proc without
// changing it.
func processUmask() uint32 {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return uint32(m)
				}
			}
		}
	}
	return 0o022
}

// mmapAligned returns an anonymous page-aligned buffer (for O_DIRECT) and
// its release function.
func mmapAligned(n int) ([]byte, func(), error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { unix.Munmap(b) }, nil
}

func isAligned(b []byte, a uintptr) bool {
	return uintptr(unsafe.Pointer(&b[0]))%a == 0
}

func typeOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFCHR:
		return "chardev"
	case unix.S_IFBLK:
		return "blockdev"
	case unix.S_IFSOCK:
		return "socket"
	}
	return fmt.Sprintf("type %#o", mode&unix.S_IFMT)
}

// dtypeOf maps a stat mode to the d_type getdents reports for it.
func dtypeOf(mode uint32) uint8 {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFLNK:
		return unix.DT_LNK
	case unix.S_IFIFO:
		return unix.DT_FIFO
	case unix.S_IFCHR:
		return unix.DT_CHR
	case unix.S_IFBLK:
		return unix.DT_BLK
	case unix.S_IFSOCK:
		return unix.DT_SOCK
	}
	return unix.DT_UNKNOWN
}

func tsLess(a, b unix.Timespec) bool {
	return a.Sec < b.Sec || (a.Sec == b.Sec && a.Nsec < b.Nsec)
}

func tsString(ts unix.Timespec) string {
	return fmt.Sprintf("%d.%09d", ts.Sec, ts.Nsec)
}
