package fs

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/computerfs/computerfs/internal/mountinfo"
	"github.com/computerfs/computerfs/kv"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// MountOptions configure Mount.
type MountOptions struct {
	Config
	// Private limits the mount to the mounting user; by default every user
	// on the host may use it, with the kernel checking permissions.
	Private bool
	// Debug logs every FUSE request.
	Debug bool
}

// Mount serves store at mountpoint and returns once the kernel has the
// mount. The caller runs (*fuse.Server).Wait and unmounts with Unmount.
func Mount(store *kv.Store, mountpoint string, opts MountOptions) (*fuse.Server, error) {
	_, srv, err := MountFS(store, mountpoint, opts)
	return srv, err
}

// MountFS is Mount that also returns the file system it serves (for
// FS.Rollback).
func MountFS(store *kv.Store, mountpoint string, opts MountOptions) (*FS, *fuse.Server, error) {
	fsName := "computerfs:" + store.Dir()
	if err := checkMountpoint(mountpoint, fsName); err != nil {
		return nil, nil, err
	}
	fsys := New(store, opts.Config)
	mo := &fuse.MountOptions{
		AllowOther:    !opts.Private,
		Options:       []string{"default_permissions"},
		FsName:        fsName,
		Name:          "computerfs",
		MaxWrite:      1 << 20,
		MaxReadAhead:  1 << 20,
		MaxBackground: 64,
		DirectMount:   true, // mount(2) as root; fusermount otherwise
		Debug:         opts.Debug,
		// O_TRUNC arrives with OPEN; clearing setuid/setgid on write is
		// ours, which spares the kernel a GETXATTR of security.capability
		// on every write(2); READDIRPLUS only while the reader also looks
		// entries up (ls -l), so a plain listing of a huge directory does
		// not fill the kernel's and our tables with inodes.
		ExtraCapabilities: fuse.CAP_ATOMIC_O_TRUNC | fuse.CAP_HANDLE_KILLPRIV_V2 | fuse.CAP_READDIRPLUS_AUTO | fuse.CAP_CACHE_SYMLINKS,
	}
	srv, err := fuse.NewServer(fsys, mountpoint, mo)
	if err != nil {
		return nil, nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	if err := setReadAhead(mountpoint, readAheadKB); err != nil {
		fsys.log.Warn("could not raise the mount's read-ahead", "err", err)
	}
	return fsys, srv, nil
}

// readAheadKB is the kernel's read-ahead for the mount. FUSE gets 128 KiB
// by default; sequential reads of big files are much faster with more,
// since each READ is answered from the store chunk by chunk.
const readAheadKB = 4096

// setReadAhead sets read_ahead_kb of the mount's backing device (root only).
func setReadAhead(mountpoint string, kb int) error {
	var st syscall.Stat_t
	if err := syscall.Stat(mountpoint, &st); err != nil {
		return err
	}
	path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	return os.WriteFile(path, []byte(fmt.Sprint(kb)), 0)
}

// checkMountpoint gives clear errors for a mount point that is missing, not
// a directory or already a mount. fsName is the source name of the mount
// about to be made.
func checkMountpoint(mp, fsName string) error {
	// A mount of this very store can only be left over from a daemon that
	// died (a crash, SIGKILL): the caller holds the store's lock, which a
	// live daemon would hold. Nobody serves it, so detach it and mount
	// afresh. This does not depend on what stat says about the dead mount,
	// which varies (ENOTCONN, ECONNABORTED, or EIO when the kernel marked
	// the root bad while the connection went down).
	for {
		m, ok, err := FindMount(mp)
		if err != nil || !ok || m.FSType != "fuse.computerfs" || m.Source != fsName {
			break
		}
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("mount point %s: detaching the dead mount of this store failed: %w", mp, err)
		}
	}
	st, err := os.Stat(mp)
	if errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED) {
		// The dead mount of another store: the same, going by the
		// kernel's word that nobody serves it.
		if uerr := syscall.Unmount(mp, syscall.MNT_DETACH); uerr != nil {
			return fmt.Errorf("mount point %s: %w; detaching the dead mount failed: %v", mp, err, uerr)
		}
		st, err = os.Stat(mp)
	}
	if err != nil {
		return fmt.Errorf("mount point %s: %w", mp, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("mount point %s is not a directory", mp)
	}
	mounted, err := IsMounted(mp)
	if err != nil {
		return err
	}
	if mounted {
		return fmt.Errorf("mount point %s is busy: something is already mounted there", mp)
	}
	return nil
}

// MountInfo describes the file system mounted at a directory.
type MountInfo = mountinfo.Info

// FindMount returns what is mounted exactly at dir (after resolving it to
// an absolute path without symlinks), from /proc/self/mountinfo; ok is
// false if nothing is.
func FindMount(dir string) (MountInfo, bool, error) { return mountinfo.Find(dir) }

// FindSource returns the directory where a file system of source (as
// "computerfs:/var/lib/ws1") is mounted: the last mount of it if there are
// several; ok is false if there is none.
func FindSource(source string) (string, bool, error) { return mountinfo.FindSource(source) }

// IsMounted reports whether a file system is mounted exactly at dir.
func IsMounted(dir string) (bool, error) {
	_, ok, err := FindMount(dir)
	return ok, err
}
