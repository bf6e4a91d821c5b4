package mountinfo

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFind(t *testing.T) {
	m, ok, err := Find("/proc")
	if err != nil || !ok || m.FSType != "proc" {
		t.Fatalf("Find(/proc) = %+v, %v, %v; want proc", m, ok, err)
	}
	// Through a symlink, as the kernel resolves it.
	link := filepath.Join(t.TempDir(), "p")
	if err := os.Symlink("/proc", link); err != nil {
		t.Fatal(err)
	}
	if m, ok, err := Find(link); err != nil || !ok || m.FSType != "proc" {
		t.Errorf("Find(symlink to /proc) = %+v, %v, %v", m, ok, err)
	}
	if _, ok, err := Find(t.TempDir()); err != nil || ok {
		t.Errorf("Find(a plain directory) = %v, %v; want nothing mounted", ok, err)
	}
	if dir, ok, err := FindSource("proc"); err != nil || !ok || dir == "" {
		t.Errorf("FindSource(proc) = %q, %v, %v", dir, ok, err)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/a\040b`:   "/mnt/a b",
		`/mnt/tab\011x`: "/mnt/tab\tx",
		`/mnt/back\134`: `/mnt/back\`,
		`/mnt/plain`:    "/mnt/plain",
		`/mnt/short\04`: `/mnt/short\04`,
		`/mnt/not\089`:  `/mnt/not\089`,
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
