package syncer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/kv"
)

// TestRedteamPushSpecialFiles: the agent plants a FIFO, a device node, a
// socket, a setuid file and links to host paths in a pushed checkout.
// The push must carry the links as links (their target as text, never
// the content of what they name), leave out what git cannot hold, and
// still push the rest.
func TestRedteamPushSpecialFiles(t *testing.T) {
	e := newGitEnv(t, map[string]string{"a": "a\n"}, gitOpts{})
	st := e.st
	r, err := e.fs.Stat("/r")
	check(t, err)
	for name, mode := range map[string]uint32{"fifo": kv.S_IFIFO | 0o644, "sock": kv.S_IFSOCK | 0o644, "dev": kv.S_IFCHR | 0o644} {
		_, err := st.Create(r.Ino, name, kv.NewInode{Mode: mode, Rdev: 0x0501})
		check(t, err)
	}
	e.write("/r/suid", "#!/bin/sh\nid\n")
	check(t, e.fs.Chmod("/r/suid", 0o4755))
	check(t, e.fs.Symlink("/etc/shadow", "/r/shadow"))
	check(t, e.fs.Symlink("../../../../etc/passwd", "/r/passwd"))
	e.write("/r/a", "changed\n")

	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan SourceReport, 1)
	go func() { done <- e.sy.Sync(c).Sources[0] }()
	var rep SourceReport
	select {
	case rep = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("the push of a checkout with special files did not return")
	}
	t.Logf("report: %+v", rep)
	if got := e.remote("show", "main:a"); got != "changed" {
		t.Errorf("the change was not pushed beside the special files: a is %q (%v)", got, rep.Errors)
	}
	if rep.Pushed == "" {
		return
	}
	for _, l := range []struct{ name, target string }{{"shadow", "/etc/shadow"}, {"passwd", "../../../../etc/passwd"}} {
		ls := e.remote("ls-tree", "main", l.name)
		if ls != "" && !strings.HasPrefix(ls, "120000 ") {
			t.Errorf("%s is pushed as %q, not as a link", l.name, ls)
		}
		if ls != "" {
			if got := e.remote("show", "main:"+l.name); got != l.target {
				t.Errorf("link %s pushed with content %.80q", l.name, got)
			}
		}
	}
	if ls := e.remote("ls-tree", "main", "suid"); ls != "" && !strings.HasPrefix(ls, "100755 ") {
		t.Errorf("suid pushed as %q", ls)
	}
	for _, n := range []string{"fifo", "sock", "dev"} {
		if ls := e.remote("ls-tree", "main", n); ls != "" {
			t.Errorf("%s pushed: %q", n, ls)
		}
	}
}

// TestRedteamWriteBackSpecialFiles: the same in an S3 write-back source:
// only regular files are uploaded, links are never followed (a link to
// another source's file would copy it out).
func TestRedteamWriteBackSpecialFiles(t *testing.T) {
	e := newEnv(t, envOpts{objects: map[string]string{"a": "a\n"}})
	e.write("/other/secret", "another source's secret\n")
	check(t, e.fs.Symlink("/other/secret", "/s/link"))
	check(t, e.fs.Symlink("/etc/shadow", "/s/shadow"))
	check(t, e.fs.Link("/other/secret", "/s/hard")) // a hard link is a regular file: it is the agent's to copy
	s, err := e.fs.Stat("/s")
	check(t, err)
	_, err = e.st.Create(s.Ino, "fifo", kv.NewInode{Mode: kv.S_IFIFO | 0o644})
	check(t, err)
	e.write("/s/a", "changed\n")
	rep := e.sync()
	t.Logf("report: %+v", rep)
	got := e.bucketFiles()
	if got["a"] != "changed\n" {
		t.Errorf("a: %q", got["a"])
	}
	for _, k := range []string{"link", "shadow", "fifo"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s uploaded: %.80q", k, v)
		}
	}
}
