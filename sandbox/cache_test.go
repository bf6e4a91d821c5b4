package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/computerfs/computerfs/sandbox"
)

// cacheVolume opens a cache volume of size bytes for the sandbox's
// default user, its image in a directory of root's alone.
func cacheVolume(t *testing.T, size int64) (*sandbox.CacheVolume, sandbox.CacheOptions) {
	t.Helper()
	o := sandbox.CacheOptions{
		Image:      filepath.Join(t.TempDir(), "cache.img"),
		Mountpoint: filepath.Join(stateDir, "caches", filepath.Base(t.TempDir())),
		Size:       size,
		Owner:      sandbox.User{UID: hostUser, GID: hostUser},
	}
	c, err := sandbox.OpenCache(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, o
}

// The cache volume is the agent's, at /cache with the caches' variables
// pointing there, persists from one sandbox to the next and across a
// reopen, and holds no more than its size: a write past it fails with
// ENOSPC in the sandbox, and what the host's disk gives the image does not
// grow.
func TestCacheVolume(t *testing.T) {
	ws := workspace(t)
	const size = 64 << 20
	c, o := cacheVolume(t, size)
	if !c.Fresh {
		t.Errorf("a new volume is not fresh")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(c.Dir(), &st); err != nil || st.Uid != hostUser || st.Gid != hostUser || st.Mode&0o777 != 0o700 {
		t.Fatalf("volume root: %v uid %d gid %d mode %o", err, st.Uid, st.Gid, st.Mode&0o777)
	}
	if ents, _ := os.ReadDir(c.Dir()); len(ents) != 0 {
		t.Errorf("a fresh volume holds %v", ents)
	}
	var img syscall.Stat_t
	if err := syscall.Stat(o.Image, &img); err != nil || img.Uid != 0 || img.Mode&0o777 != 0o600 || img.Blocks*512 < size {
		t.Fatalf("image: %v uid %d mode %o, %d bytes allocated", err, img.Uid, img.Mode&0o777, img.Blocks*512)
	}

	sbx := func(command string) output {
		return run(t, sandbox.Options{Workspace: ws, Cache: c.Dir(), Args: []string{"/bin/bash", "-c", command}})
	}
	o1 := sbx(`echo "$GOCACHE $GOMODCACHE $npm_config_cache $PIP_CACHE_DIR $CARGO_HOME $XDG_CACHE_HOME $XDG_CONFIG_HOME"; mkdir -p "$GOCACHE" && echo kept > "$GOCACHE/entry" && stat -c %u /cache`)
	want := "/cache/go-build /cache/go/pkg/mod /cache/npm /cache/pip /cache/cargo /cache /cache/config\n1000\n"
	if o1.err != nil || o1.res.ExitCode != 0 || o1.stdout != want {
		t.Fatalf("first sandbox: %v, want stdout %q", o1, want)
	}
	if o2 := sbx(`cat /cache/go-build/entry`); o2.stdout != "kept\n" {
		t.Fatalf("next sandbox: %v", o2)
	}
	if err := syscall.Stat(filepath.Join(c.Dir(), "go-build/entry"), &st); err != nil || st.Uid != hostUser {
		t.Fatalf("entry on the host: %v uid %d", err, st.Uid)
	}

	// Another user (another workspace's agent), even given the volume,
	// cannot enter it.
	other := run(t, sandbox.Options{Workspace: ws, Cache: c.Dir(), User: &sandbox.User{UID: 1001, GID: 1001},
		Args: []string{"/bin/sh", "-c", "ls /cache; cat /cache/go-build/entry; echo x > /cache/y"}})
	if other.err != nil || other.res.ExitCode == 0 || other.stdout != "" || strings.Count(other.stderr, "Permission denied") != 3 {
		t.Fatalf("another user in the volume: %v", other)
	}

	// Past the bound: ENOSPC, in the sandbox alone.
	o3 := sbx(`dd if=/dev/zero of=/cache/fill bs=1M count=` + "128" + ` 2>&1; echo "status $?"; for i in $(seq 1 20000); do : > /cache/f$i || break; done 2>&1 | tail -1`)
	if o3.err != nil || !strings.Contains(o3.stdout, "No space left on device") || strings.Contains(o3.stdout, "status 0") {
		t.Fatalf("write past the bound: %v", o3)
	}
	if err := syscall.Stat(o.Image, &st); err != nil || st.Size != size || st.Blocks != img.Blocks {
		t.Fatalf("the image grew: %v size %d blocks %d, was %d", err, st.Size, st.Blocks, img.Blocks)
	}
	// A sandbox without the cache gets the variables in its /tmp.
	if o4 := run(t, sandbox.Options{Workspace: ws, Args: []string{"/bin/sh", "-c", `echo $GOCACHE; ls /cache`}}); o4.stdout != "/tmp/.cache/go-build\n" {
		t.Fatalf("without a cache: %v", o4)
	}

	// Reopened (a new daemon): the same cache, unless nearly full, which
	// is made empty again.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2, err := sandbox.OpenCache(o)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if !c2.Fresh {
		t.Errorf("a full volume reopened is not made anew")
	}
	if o5 := run(t, sandbox.Options{Workspace: ws, Cache: c2.Dir(), Args: []string{"/bin/sh", "-c", `echo x > /cache/y && ls /cache`}}); o5.stdout != "y\n" {
		t.Fatalf("after the remake: %v", o5)
	}
	c2.Close()
	c3, err := sandbox.OpenCache(o)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if b, err := os.ReadFile(filepath.Join(c3.Dir(), "y")); c3.Fresh || err != nil || string(b) != "x\n" {
		t.Fatalf("reopened: fresh %v, %v %q", c3.Fresh, err, b)
	}
}

// A cache volume is never root's, and refuses sizes too small for ext4.
func TestCacheVolumeRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, o := range []sandbox.CacheOptions{
		{Image: dir + "/a", Mountpoint: dir + "/m", Size: 64 << 20},
		{Image: dir + "/a", Mountpoint: dir + "/m", Size: 1 << 20, Owner: sandbox.User{UID: 5, GID: 5}},
		{Image: "rel", Mountpoint: dir + "/m", Size: 64 << 20, Owner: sandbox.User{UID: 5, GID: 5}},
	} {
		if c, err := sandbox.OpenCache(o); err == nil {
			c.Close()
			t.Errorf("%+v: opened", o)
		}
	}
}
