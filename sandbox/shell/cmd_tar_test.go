package shell

import (
	"archive/tar"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/computerfs/computerfs/wsfs"
)

type tarMember struct {
	name, link string
	typ        byte
	data       string
}

func makeTar(t *testing.T, members []tarMember) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range members {
		h := &tar.Header{Name: m.name, Linkname: m.link, Typeflag: m.typ, Mode: 0o644,
			ModTime: time.Unix(1700000000, 0), Format: tar.FormatGNU}
		if m.typ == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeDir {
			h.Mode = 0o755
		}
		h.Size = int64(len(m.data))
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(m.data))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// storeTree lists the workspace below dir: path, type and content or
// link target, one line each.
func storeTree(t *testing.T, fs *wsfs.FS, s *Shell, dir string) []string {
	out, _, _ := sh(t, s, "cd "+dir+" && find . -mindepth 1 | sort")
	var lines []string
	for _, p := range strings.Fields(out) {
		o, _, _ := sh(t, s, "cd "+dir+" && if [ -L "+p+" ]; then echo link $(readlink "+p+"); elif [ -d "+p+" ]; then echo dir; else echo file $(cat "+p+"); fi")
		lines = append(lines, p+" "+strings.TrimSpace(o))
	}
	return lines
}

// hostTree is storeTree on a host directory.
func hostTree(t *testing.T, root string) []string {
	var lines []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel := "./" + strings.TrimPrefix(p, root+"/")
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			lines = append(lines, rel+" link "+l)
		case fi.IsDir():
			lines = append(lines, rel+" dir")
		default:
			b, _ := os.ReadFile(p)
			lines = append(lines, rel+" file "+strings.TrimSpace(string(b)))
		}
		return nil
	})
	sort.Strings(lines)
	return lines
}

// TestTarEscapes extracts archives that try to write outside the
// extraction directory, on the fast path and with GNU tar in a host
// directory: both must refuse the same members, exit 2, and leave the same
// tree; nothing may land outside.
func TestTarEscapes(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Fatal("GNU tar is needed for the differential tests")
	}
	archives := map[string][]tarMember{
		"dotdot": {
			{name: "../up.txt", data: "up"},
			{name: "ok/../../up2.txt", data: "up2"},
			{name: "a/b/../../../up3.txt", data: "up3"},
			{name: "good.txt", data: "good"},
		},
		"absolute": {
			{name: "/abs.txt", data: "abs"},
			{name: "//double/abs2.txt", data: "abs2"},
		},
		"symlink-then-write": {
			{name: "esc", typ: tar.TypeSymlink, link: "/etc"},
			{name: "esc/passwd", data: "pwned"},
			{name: "rel", typ: tar.TypeSymlink, link: "../outside"},
			{name: "rel/pwn.txt", data: "pwned"},
			{name: "deep/x", typ: tar.TypeSymlink, link: "../../outside"},
			{name: "deep/x/y.txt", data: "pwned"},
			{name: "fine", typ: tar.TypeSymlink, link: "good/target"},
		},
		"hardlink-out": {
			{name: "h", typ: tar.TypeLink, link: "../outside/secret"},
			{name: "kept.txt", data: "kept"},
		},
	}
	for name, members := range archives {
		t.Run(name, func(t *testing.T) {
			data := makeTar(t, members)
			// GNU tar, in host/in with a sibling host/outside
			host := t.TempDir()
			os.MkdirAll(host+"/in", 0o755)
			os.MkdirAll(host+"/outside", 0o755)
			os.WriteFile(host+"/outside/secret", []byte("secret"), 0o644)
			os.WriteFile(host+"/a.tar", data, 0o644)
			cmd := exec.Command("tar", "-xf", "../a.tar")
			cmd.Dir = host + "/in"
			cmd.Env = []string{"LANG=C.UTF-8", "PATH=/usr/bin:/bin"}
			var gerr bytes.Buffer
			cmd.Stderr = &gerr
			gnuCode := 0
			if err := cmd.Run(); err != nil {
				gnuCode = cmd.ProcessState.ExitCode()
			}
			// the fast path, in /workspace/in with /workspace/outside
			s, fs := newShell(t)
			fs.MkdirAll("in", 0o755)
			fs.MkdirAll("outside", 0o755)
			fs.WriteFile("outside/secret", []byte("secret"), 0o644)
			fs.WriteFile("a.tar", data, 0o644)
			_, stderr, code := sh(t, s, "cd in && tar -xf ../a.tar")
			if code != gnuCode || code != 2 && name != "absolute" {
				t.Errorf("status %d, GNU tar %d\nstderr: %s\nGNU: %s", code, gnuCode, stderr, gerr.String())
			}
			if stderr != gerr.String() {
				t.Errorf("stderr differs:\n%s--- GNU tar:\n%s", stderr, gerr.String())
			}
			got, want := storeTree(t, fs, s, "/workspace/in"), hostTree(t, host+"/in")
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("extracted tree:\n%s\n--- GNU tar:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if out, _, _ := sh(t, s, "ls /workspace/outside; ls /workspace"); out != "secret\na.tar\nin\noutside\n" {
				t.Errorf("written outside the extraction directory: %q", out)
			}
			if b, _ := os.ReadFile("/etc/passwd"); strings.Contains(string(b), "pwned") {
				t.Fatal("the host's /etc/passwd was written")
			}
		})
	}
}

// TestTarPlantedSymlink: a symbolic link made before extraction that
// points outside the namespace leads nowhere; one inside the workspace is
// followed, as GNU tar follows it, and the write stays in the workspace.
func TestTarPlantedSymlink(t *testing.T) {
	hostDir := t.TempDir()
	s, fs := newShell(t)
	if err := fs.Symlink(hostDir, "planted"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Symlink("/etc", "etc-link"); err != nil {
		t.Fatal(err)
	}
	fs.MkdirAll("sub/inner", 0o755)
	if err := fs.Symlink("..", "sub/up"); err != nil {
		t.Fatal(err)
	}
	fs.WriteFile("a.tar", makeTar(t, []tarMember{
		{name: "planted/x.txt", data: "pwned"},
		{name: "etc-link/passwd", data: "pwned"},
	}), 0o644)
	_, stderr, code := sh(t, s, "tar -xf a.tar")
	if code != 2 || !strings.Contains(stderr, "planted/x.txt: Cannot open: No such file or directory") {
		t.Errorf("planted link: %d %q", code, stderr)
	}
	if ents, _ := os.ReadDir(hostDir); len(ents) != 0 {
		t.Fatalf("a host directory was written through a planted link: %v", ents)
	}
	if b, _ := os.ReadFile("/etc/passwd"); strings.Contains(string(b), "pwned") {
		t.Fatal("the host's /etc/passwd was written")
	}
	// a link inside the workspace: followed like GNU tar does
	fs.WriteFile("b.tar", makeTar(t, []tarMember{{name: "up/new.txt", data: "inside"}}), 0o644)
	if _, stderr, code := sh(t, s, "tar -xf b.tar -C sub"); code != 0 {
		t.Fatalf("%d %s", code, stderr)
	}
	if b, err := fs.ReadFile("new.txt"); err != nil || string(b) != "inside" {
		t.Fatalf("through an inside link: %q %v", b, err)
	}
	// /tmp: the same
	fs.WriteFile("c.tar", makeTar(t, []tarMember{{name: "e/passwd", data: "pwned"}}), 0o644)
	if _, stderr, code := sh(t, s, "cd /tmp && ln -s /etc e && tar -xf /workspace/c.tar"); code != 2 {
		t.Errorf("in /tmp: %d %s", code, stderr)
	}
}

// TestTarGNUInterop: archives the fast path writes are read by GNU tar
// with the same names, modes, times and links, and GNU tar's archives are
// read back by the fast path.
func TestTarGNUInterop(t *testing.T) {
	long := strings.Repeat("d", 60) + "/" + strings.Repeat("f", 70) + ".txt"
	s, fs := newShell(t)
	writeFixtureStore(t, fs)
	fs.MkdirAll(filepath.Dir(long), 0o755)
	fs.WriteFile(long, []byte("long name\n"), 0o600)
	fs.Chtimes(long, fixtureTime, fixtureTime)
	fs.Link("go.mod", "go.mod.hard")
	if _, stderr, code := sh(t, s, "tar -czf /tmp/all.tgz --exclude=all.tgz . && cp /tmp/all.tgz all.tgz"); code != 0 {
		t.Fatal(stderr)
	}
	data, err := fs.ReadFile("all.tgz")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(dir+"/all.tgz", data, 0o644)
	listCmd := exec.Command("tar", "-tzvf", "all.tgz")
	listCmd.Dir = dir
	gnuList, err := listCmd.Output()
	if err != nil {
		t.Fatalf("GNU tar cannot list our archive: %v", err)
	}
	ours, _, _ := sh(t, s, "tar -tzvf all.tgz")
	if string(gnuList) != ours {
		t.Errorf("listings differ:\n%s--- GNU tar:\n%s", ours, gnuList)
	}
	os.Mkdir(dir+"/x", 0o755)
	x := exec.Command("tar", "-xzf", "../all.tgz")
	x.Dir = dir + "/x"
	if out, err := x.CombinedOutput(); err != nil {
		t.Fatalf("GNU tar cannot extract our archive: %v %s", err, out)
	}
	fi, err := os.Stat(dir + "/x/" + long)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("long name: %v %v", fi, err)
	}
	fi, err = os.Stat(dir + "/x/main.go")
	if err != nil || !fi.ModTime().Equal(fixtureTime.Add(48*time.Hour)) {
		t.Fatalf("mtime: %v %v", fi, err)
	}
	a, _ := os.Stat(dir + "/x/go.mod")
	b, _ := os.Stat(dir + "/x/go.mod.hard")
	if !os.SameFile(a, b) {
		t.Error("hard link not kept")
	}
	if l, _ := os.Readlink(dir + "/x/link-to-readme"); l != "README.md" {
		t.Errorf("symlink: %q", l)
	}
	// GNU tar's archive of that tree, read by the fast path
	c := exec.Command("tar", "-czf", "../gnu.tgz", ".")
	c.Dir = dir + "/x"
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatal(err, string(out))
	}
	gnu, _ := os.ReadFile(dir + "/gnu.tgz")
	fs.WriteFile("gnu.tgz", gnu, 0o644)
	if _, stderr, code := sh(t, s, "mkdir back && tar -xzf gnu.tgz -C back"); code != 0 {
		t.Fatal(stderr)
	}
	out, _, _ := sh(t, s, "cd back && stat -c '%n %a %Y %h' "+long+" main.go go.mod go.mod.hard && readlink link-to-readme && cat "+long)
	want := long + " 600 " + itoa(fixtureTime.Add(0).Unix()) + " 1\n"
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "main.go 644 "+itoa(fixtureTime.Add(48*time.Hour).Unix())) ||
		!strings.Contains(out, "go.mod.hard 644") || !strings.HasSuffix(out, "README.md\nlong name\n") {
		t.Errorf("GNU archive extracted:\n%s", out)
	}
	if o, _, _ := sh(t, s, "stat -c %h back/go.mod"); o != "2\n" {
		t.Errorf("hard link from GNU archive: %q", o)
	}
}

// TestGzipGNUInterop: gzip data goes both ways between the fast path and
// GNU gzip, multi-member files included.
func TestGzipGNUInterop(t *testing.T) {
	s, fs := newShell(t)
	writeFixtureStore(t, fs)
	if _, stderr, code := sh(t, s, "gzip -k main.go && gzip -c go.mod > two.gz && gzip -c README.md >> two.gz"); code != 0 {
		t.Fatal(stderr)
	}
	dir := t.TempDir()
	for _, f := range []string{"main.go.gz", "two.gz"} {
		b, _ := fs.ReadFile(f)
		os.WriteFile(dir+"/"+f, b, 0o644)
	}
	out, err := exec.Command("gzip", "-dc", dir+"/main.go.gz").Output()
	if err != nil || string(out) != fixture["main.go"].content {
		t.Fatalf("GNU gzip reads ours: %q %v", out, err)
	}
	out, err = exec.Command("gzip", "-dc", dir+"/two.gz").Output()
	if err != nil || string(out) != fixture["go.mod"].content+fixture["README.md"].content {
		t.Fatalf("GNU gzip reads our two members: %q %v", out, err)
	}
	// GNU gzip -N keeps the name and time of the file: gzip -l agrees
	os.WriteFile(dir+"/plain.txt", bytes.Repeat([]byte("hello gzip\n"), 100), 0o640)
	if out, err := exec.Command("gzip", "-k", dir+"/plain.txt").CombinedOutput(); err != nil {
		t.Fatal(err, string(out))
	}
	gz, _ := os.ReadFile(dir + "/plain.txt.gz")
	fs.WriteFile("plain.txt.gz", gz, 0o640)
	got, stderr, code := sh(t, s, "gunzip plain.txt.gz && wc -l plain.txt && ls plain.txt*")
	if code != 0 || got != "100 plain.txt\nplain.txt\n" {
		t.Fatalf("gunzip of GNU data: %q %q %d", got, stderr, code)
	}
	l := exec.Command("gzip", "-l", "plain.txt.gz")
	l.Dir = dir
	gnuL, _ := l.Output()
	fs.WriteFile("plain.txt.gz", gz, 0o640)
	ourL, _, _ := sh(t, s, "gzip -l plain.txt.gz")
	if ourL != string(gnuL) {
		t.Errorf("gzip -l:\n%s--- GNU gzip:\n%s", ourL, gnuL)
	}
	// corrupt data: an error, and no output file left behind
	b, _ := fs.ReadFile("main.go.gz")
	b[len(b)-5] ^= 0xff
	fs.WriteFile("bad.gz", b, 0o644)
	if _, stderr, code := sh(t, s, "gunzip bad.gz"); code != 1 || !strings.Contains(stderr, "gzip: bad.gz: invalid compressed data--crc error") {
		t.Errorf("corrupt: %d %q", code, stderr)
	}
	if out, _, _ := sh(t, s, "ls bad*"); out != "bad.gz\n" {
		t.Errorf("after a failed gunzip: %q", out)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestTarBzip2Read: bzip2 archives made by GNU tar are listed and
// extracted (with -j or found by their magic number).
func TestTarBzip2Read(t *testing.T) {
	if _, err := exec.LookPath("bzip2"); err != nil {
		t.Fatal("bzip2 is needed for this test")
	}
	dir := t.TempDir()
	os.MkdirAll(dir+"/src/d", 0o755)
	os.WriteFile(dir+"/src/d/f.txt", []byte("bz\n"), 0o644)
	c := exec.Command("tar", "-cjf", "a.tar.bz2", "src")
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatal(err, string(out))
	}
	data, _ := os.ReadFile(dir + "/a.tar.bz2")
	s, fs := newShell(t)
	fs.WriteFile("a.tar.bz2", data, 0o644)
	out, stderr, code := sh(t, s, "tar -tjf a.tar.bz2 && tar xf a.tar.bz2 && cat src/d/f.txt && tar -tzf a.tar.bz2")
	if out != "src/\nsrc/d/\nsrc/d/f.txt\nbz\n" || code != 2 || !strings.Contains(stderr, "gzip: stdin: not in gzip format") {
		t.Errorf("%q %q %d", out, stderr, code)
	}
	if _, stderr, code := sh(t, s, "tar -cjf b.tar.bz2 src"); code != 2 || !strings.Contains(stderr, "not supported") {
		t.Errorf("tar -cj: %d %q", code, stderr)
	}
	if _, stderr, code := sh(t, s, "tar -tjf src/d/f.txt"); code != 2 || !strings.Contains(stderr, "is not a bzip2 file") {
		t.Errorf("tar -tj of plain data: %d %q", code, stderr)
	}
}

// TestTarTruncated: a cut archive stops tar with GNU tar's status, after
// the members before the cut are out.
func TestTarTruncated(t *testing.T) {
	data := makeTar(t, []tarMember{{name: "a.txt", data: "first"}, {name: "b.txt", data: strings.Repeat("x", 5000)}})
	cut := data[:512+512+512+1000] // a.txt whole, b.txt cut inside its data
	s, fs := newShell(t)
	fs.WriteFile("cut.tar", cut, 0o644)
	fs.MkdirAll("out", 0o755)
	_, stderr, code := sh(t, s, "tar -xf cut.tar -C out")
	dir := t.TempDir()
	os.WriteFile(dir+"/cut.tar", cut, 0o644)
	os.Mkdir(dir+"/out", 0o755)
	g := exec.Command("tar", "-xf", "cut.tar", "-C", "out")
	g.Dir = dir
	gerr, _ := g.CombinedOutput()
	if code != g.ProcessState.ExitCode() || !strings.Contains(stderr, "Unexpected EOF in archive") {
		t.Errorf("status %d %q, GNU tar %d %q", code, stderr, g.ProcessState.ExitCode(), gerr)
	}
	if b, err := fs.ReadFile("out/a.txt"); err != nil || string(b) != "first" {
		t.Errorf("member before the cut: %q %v", b, err)
	}
	// a cut gzip stream, and data that is no archive at all
	if _, stderr, code := sh(t, s, "tar -czf x.tgz out && head -c 30 x.tgz > y.tgz && tar -tzf y.tgz"); code != 2 {
		t.Errorf("cut gzip: %d %q", code, stderr)
	}
	if _, stderr, code := sh(t, s, "echo hello > h.tar && tar -tf h.tar"); code != 2 || !strings.Contains(stderr, "This does not look like a tar archive") {
		t.Errorf("not an archive: %d %q", code, stderr)
	}
}
