package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A cache volume is where a workspace's sandboxes keep the build and
// package caches that outlive each sandbox (Options.Cache): an ext4 file
// system in an image file of a fixed size, mounted through a loop device.
// The bound holds by construction: the image is allocated in full when it
// is made (the host's disk gives it nothing more later), and a write past
// what the file system holds fails with ENOSPC in the sandbox. The agent
// writes only through the kernel's file system, never the image's bytes
// (root's, mode 0600, out of every sandbox), and the daemon reads nothing
// in the volume: it makes, mounts and unmounts it, nothing else.

// DefaultCacheSize is the size of a cache volume unless told otherwise.
const DefaultCacheSize = 2 << 30

// MinCacheSize is the smallest cache volume (ext4 needs room for its
// journal and tables).
const MinCacheSize = 32 << 20

// CacheOptions describe a cache volume.
type CacheOptions struct {
	// Image is the image file: made if missing or of another size (the
	// cache is then empty again). Its directory must be root's alone.
	Image string
	// Mountpoint is where the volume is mounted on the host, the
	// Options.Cache of the sandboxes: made if missing; its parent must be
	// reachable (mode o+x) by the sandbox's users.
	Mountpoint string
	// Size is the volume's size in bytes (DefaultCacheSize if 0).
	Size int64
	// Owner is the host user and group that own the volume's root (mode
	// 0700): the workspace's agent. Never root.
	Owner User
	// MinFree is what the image's file system must keep free once a new
	// image is allocated: below it, no image is made.
	MinFree int64
}

// CacheVolume is a mounted cache volume.
type CacheVolume struct {
	dir   string
	Fresh bool // the image was made (or made again) by OpenCache: the cache is empty
}

// Dir is where the volume is mounted on the host.
func (c *CacheVolume) Dir() string { return c.dir }

// OpenCache mounts the cache volume of o, making its image first if there
// is none of o.Size: a new image when the old one is of another size or
// cannot be mounted, or is more than 90% full (Go's cache, for one, never
// shrinks by itself: a full cache would make every build fail, an empty
// one only makes the next build slower).
func OpenCache(o CacheOptions) (*CacheVolume, error) {
	if o.Size == 0 {
		o.Size = DefaultCacheSize
	}
	if o.Size < MinCacheSize {
		return nil, fmt.Errorf("sandbox: cache of %d bytes: the smallest is %d", o.Size, MinCacheSize)
	}
	if o.Owner.UID == 0 || o.Owner.GID == 0 {
		return nil, errors.New("sandbox: cache: the owner must not be root")
	}
	if !filepath.IsAbs(o.Image) || !filepath.IsAbs(o.Mountpoint) {
		return nil, errors.New("sandbox: cache: image and mount point must be absolute paths")
	}
	if err := os.MkdirAll(filepath.Dir(o.Mountpoint), 0o711); err != nil {
		return nil, fmt.Errorf("sandbox: cache: %w", err)
	}
	if err := os.Mkdir(o.Mountpoint, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("sandbox: cache: %w", err)
	}
	// What a daemon killed before its unmount left mounted here.
	detach(o.Mountpoint)
	// Who mounts it, for GC once this process is gone.
	if err := os.WriteFile(o.Mountpoint+ownerSuffix, []byte(selfOwner()), 0o600); err != nil {
		return nil, fmt.Errorf("sandbox: cache: %w", err)
	}
	c := &CacheVolume{dir: o.Mountpoint}
	fi, err := os.Stat(o.Image)
	fresh := err != nil || fi.Size() != o.Size
	for attempt := 0; ; attempt++ {
		if fresh {
			if err := makeImage(o); err != nil {
				return nil, err
			}
			c.Fresh = true
		}
		err := mountImage(o.Image, o.Mountpoint)
		if err == nil && !fresh && nearlyFull(o.Mountpoint) {
			unix.Unmount(o.Mountpoint, unix.MNT_DETACH)
			err = errors.New("nearly full")
		}
		if err == nil {
			break
		}
		if fresh || attempt > 0 {
			return nil, fmt.Errorf("sandbox: cache: mount %s: %w", o.Image, err)
		}
		fresh = true
	}
	if c.Fresh {
		// ext4's own, root's; the agent's volume has nothing of root.
		os.Remove(filepath.Join(o.Mountpoint, "lost+found"))
	}
	// The root of a file system just mounted: no link to follow.
	err = os.Lchown(o.Mountpoint, int(o.Owner.UID), int(o.Owner.GID))
	if err == nil {
		err = os.Chmod(o.Mountpoint, 0o700)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("sandbox: cache: %w", err)
	}
	return c, nil
}

// Close unmounts the volume (lazily: sandboxes that still run keep their
// mount; the loop device goes with the last of them).
func (c *CacheVolume) Close() error {
	err := unix.Unmount(c.dir, unix.MNT_DETACH)
	if err == nil {
		os.Remove(c.dir)
		os.Remove(c.dir + ownerSuffix)
	}
	return err
}

// ownerSuffix names the file beside a cache volume's mount point that
// names the process that mounted it (as ownerLabel does a container's).
const ownerSuffix = ".owner"

// detach unmounts what is mounted at dir, however many mounts there are.
func detach(dir string) {
	for i := 0; i < 8 && unix.Unmount(dir, unix.MNT_DETACH) == nil; i++ {
	}
}

// gcCaches unmounts the cache volumes under stateDir/caches whose process
// has died without unmounting them (a daemon killed), and returns their
// names.
func gcCaches(stateDir string) []string {
	owners, _ := filepath.Glob(filepath.Join(stateDir, "caches", "*"+ownerSuffix))
	var removed []string
	for _, f := range owners {
		b, err := os.ReadFile(f)
		if err != nil || ownerAlive([]string{ownerLabel + "=" + string(b)}) {
			continue
		}
		mp := strings.TrimSuffix(f, ownerSuffix)
		detach(mp)
		os.Remove(mp)
		os.Remove(f)
		removed = append(removed, "cache "+filepath.Base(mp))
	}
	return removed
}

// nearlyFull says whether the file system at dir has less than a tenth of
// its blocks or inodes free.
func nearlyFull(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	return st.Bfree*10 < st.Blocks || st.Ffree*10 < st.Files
}

// makeImage makes o.Image anew: allocated in full, with an empty ext4 file
// system whose root is o.Owner's.
func makeImage(o CacheOptions) error {
	dir := filepath.Dir(o.Image)
	os.Remove(o.Image)
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("sandbox: cache: %w", err)
	}
	if avail := int64(st.Bavail) * st.Bsize; avail-o.Size < o.MinFree {
		return fmt.Errorf("sandbox: cache: no room for a cache of %d MiB in %s (%d MiB free, %d MiB to keep free)", o.Size>>20, dir, avail>>20, o.MinFree>>20)
	}
	tmp := o.Image + ".new"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("sandbox: cache: %w", err)
	}
	defer os.Remove(tmp) // after the rename, nothing
	err = unix.Fallocate(int(f.Fd()), 0, 0, o.Size)
	if errors.Is(err, unix.EOPNOTSUPP) {
		err = f.Truncate(o.Size) // the bound holds; the room is not set aside
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sandbox: cache: allocate %s: %w", tmp, err)
	}
	mkfs, err := findMkfs()
	if err != nil {
		return err
	}
	// nodiscard, and the tables zeroed now: mkfs, or the kernel's lazy
	// initialization later (through the loop device), would otherwise
	// punch holes in the allocation.
	cmd := exec.Command(mkfs, "-q", "-F", "-m", "0", "-L", "computerfs-cache",
		"-E", "nodiscard,lazy_itable_init=0,lazy_journal_init=0,root_owner="+strconv.FormatUint(uint64(o.Owner.UID), 10)+":"+strconv.FormatUint(uint64(o.Owner.GID), 10),
		tmp)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sandbox: cache: %s: %v: %s", mkfs, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, o.Image); err != nil {
		return fmt.Errorf("sandbox: cache: %w", err)
	}
	return nil
}

func findMkfs() (string, error) {
	if p, err := exec.LookPath("mkfs.ext4"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("sandbox: cache: no mkfs.ext4 on the host (apt-get install e2fsprogs)")
}

// mountImage attaches image to a free loop device (cleared automatically
// when the file system is unmounted) and mounts it at dir: nosuid, nodev.
func mountImage(image, dir string) error {
	img, err := os.OpenFile(image, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer img.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("no loop devices: %w", err)
	}
	defer ctl.Close()
	for range 16 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return fmt.Errorf("no free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		loop, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		err = unix.IoctlLoopConfigure(int(loop.Fd()), &cfg)
		if errors.Is(err, unix.EBUSY) { // taken meanwhile by someone else
			loop.Close()
			continue
		}
		if err != nil {
			loop.Close()
			return fmt.Errorf("%s: %w", dev, err)
		}
		// Direct I/O: the image's pages are not cached twice (a no-op
		// where the host's file system cannot).
		unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_SET_DIRECT_IO, 1)
		err = unix.Mount(dev, dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOATIME, "errors=remount-ro")
		// Closed, the device stays attached while mounted and is cleared
		// with the unmount (or now, if the mount failed).
		loop.Close()
		return err
	}
	return errors.New("no free loop device")
}
