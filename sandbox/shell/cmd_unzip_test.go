package shell

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
	"time"
)

type zipMember struct {
	name, data string
	method     uint16
	extra      []byte
	dosOnly    bool // no Unix time field: the DOS date and time
}

func makeZip(t *testing.T, comment string, members []zipMember) string {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	if comment != "" {
		w.SetComment(comment)
	}
	for i, m := range members {
		h := &zip.FileHeader{Name: m.name, Method: m.method, Extra: m.extra}
		when := time.Date(2023, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(i) * 37 * time.Hour)
		if m.dosOnly {
			h.ModifiedDate = uint16((when.Year()-1980)<<9 | int(when.Month())<<5 | when.Day())
			h.ModifiedTime = uint16(when.Hour()<<11 | when.Minute()<<5 | when.Second()/2)
		} else {
			h.Modified = when
		}
		fw, err := w.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		fw.Write([]byte(m.data))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// unicodePath is Info-ZIP's Unicode path field for a member named raw.
func unicodePath(raw, name string) []byte {
	d := []byte{1, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(d[1:], crc32.ChecksumIEEE([]byte(raw)))
	d = append(d, name...)
	h := []byte{0x75, 0x70, 0, 0}
	binary.LittleEndian.PutUint16(h[2:], uint16(len(d)))
	return append(h, d...)
}

func TestUnzipMatchesInfoZIP(t *testing.T) {
	plain := makeZip(t, "", []zipMember{
		{name: "a.txt", data: "hello\n"}, {name: "big.txt", data: strings.Repeat("x", 5000), method: zip.Deflate},
		{name: "dir/"}, {name: "dir/sub/"}, {name: "dir/sub/d.txt", data: "deep\n", dosOnly: true},
		{name: "B.md", data: "# b\n", method: zip.Deflate}, {name: "[x].txt", data: "brackets\n"},
	})
	hostile := makeZip(t, "a comment\nline two", []zipMember{
		{name: "../up.txt", data: "up\n"}, {name: "/abs.txt", data: "abs\n"}, {name: "new\nline.txt", data: "nl\n"},
		{name: "tab\there", data: "t\n"}, {name: "ctl\x01x\x7f", data: "c\n"}, {name: "ünï.txt", data: "u\n"},
		{name: "sp ace", data: "s\n", dosOnly: true},
	})
	badCRC := []byte(makeZip(t, "", []zipMember{{name: "ok.txt", data: "fine\n"}, {name: "bad.txt", data: "corrupted\n"}}))
	if i := bytes.Index(badCRC, []byte("corrupted")); i > 0 {
		badCRC[i] = 'C'
	}
	var big strings.Builder
	for i := 0; i < 120; i++ {
		big.WriteString(strings.Repeat("y", i))
	}
	files := map[string]string{
		"t.zip":       plain,
		"h.zip":       hostile,
		"bad.zip":     string(badCRC),
		"sfx.zip":     "JUNKJUNK" + plain,
		"empty.zip":   makeZip(t, "", nil),
		"noext":       plain,
		"notzip.txt":  "just text\n",
		"zero.zip":    "",
		"many.zip":    makeZip(t, "", []zipMember{{name: "m1", data: big.String(), method: zip.Deflate}, {name: strings.Repeat("long", 10), data: "l"}}),
		"dir.zip/":    "",
		"dironly/":    "",
		"dironly.zip": plain,
	}
	var cmds []string
	for _, z := range []string{"t.zip", "h.zip", "bad.zip", "sfx.zip", "empty.zip", "noext", "many.zip", "t", "dironly"} {
		for _, o := range []string{"-l", "-lq", "-ql", "-l -q", "-Z1", "-Z -1", "-t", "-tq", "-p"} {
			cmds = append(cmds, "unzip "+o+" "+z)
		}
	}
	cmds = append(cmds, "unzip -l t.zip a.txt", "unzip -l t.zip nosuch", "unzip -l t.zip 'dir/*'", "unzip -l t.zip '*.txt'",
		"unzip -l t.zip 'DIR/*'", "unzip -l t.zip '[ab]*'", "unzip -l t.zip 'd?r/'", "unzip -l t.zip '[!a]*'", "unzip -l t.zip a.txt a.txt",
		"unzip -l t.zip '[x].txt'", "unzip -l t.zip '\\[x\\].txt'", "unzip -Z1 t.zip 'dir/*'", "unzip -Z1 t.zip nosuch",
		"unzip -p t.zip a.txt", "unzip -p t.zip a.txt nosuch", "unzip -p t.zip nosuch", "unzip -p t.zip 'dir/*'",
		"unzip -t t.zip nosuch", "unzip -t t.zip a.txt", "unzip -p bad.zip", "unzip -p bad.zip ok.txt",
		"unzip -l nosuch", "unzip -Z1 nosuch", "unzip -l x.zip", "unzip -l notzip.txt", "unzip -Z1 notzip.txt", "unzip -t notzip.txt",
		"unzip -p notzip.txt", "unzip -l zero.zip", "unzip -l dir.zip", "unzip -l dir", "unzip -p t.zip big.txt | wc -c",
		"cat t.zip > /tmp/c.zip; unzip -l /tmp/c.zip | tail -1")
	diffTools(t, []string{"unzip"}, files, cmds)
}

func init() {
	runaways["unzip"] = []string{`unzip -l sparse`, `unzip -t /dev/zero`, `yes | unzip -l /dev/stdin`}
}

// TestUnzipHostile: a zip bomb, forged sizes and a forged central
// directory are bounded by the call's output limit, its cancellation and
// its memory budget.
func TestUnzipHostile(t *testing.T) {
	s, fs := newShell(t)
	// 300 MB of zeros in some 300 KB
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	fw, _ := w.CreateHeader(&zip.FileHeader{Name: "zeros", Method: zip.Deflate})
	chunk := make([]byte, 1<<20)
	for i := 0; i < 300; i++ {
		fw.Write(chunk)
	}
	w.Close()
	bomb := buf.Bytes()
	// the same with its sizes forged small: the data is more than it says
	forged := bytes.Clone(bomb)
	for _, sig := range []string{"PK\x01\x02"} {
		i := bytes.Index(forged, []byte(sig))
		binary.LittleEndian.PutUint32(forged[i+24:], 10) // uncompressed size
	}
	// an end record that claims 65535 entries in a 4 GB directory
	huge := makeZip(t, "", []zipMember{{name: "a", data: "a"}})
	hb := []byte(huge)
	e := bytes.LastIndex(hb, []byte("PK\x05\x06"))
	binary.LittleEndian.PutUint16(hb[e+8:], 0xffff)
	binary.LittleEndian.PutUint16(hb[e+10:], 0xfffe)
	binary.LittleEndian.PutUint32(hb[e+12:], 0xfffffff0)
	for name, data := range map[string][]byte{"bomb.zip": bomb, "forged.zip": forged, "huge.zip": hb} {
		if err := fs.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	res, err := s.Exec(context.Background(), "unzip -p bomb.zip", ExecOptions{Stdout: &out, Stderr: &out, MaxOutput: 1 << 20})
	if err != nil || res.ExitCode == 0 || out.Len() > 2<<20 {
		t.Errorf("unzip -p of a bomb: %v %+v, %d bytes out", err, res, out.Len())
	}
	// stopped while it inflates (300 MB take longer than 50 ms anywhere)
	out.Reset()
	res, err = s.Exec(context.Background(), "unzip -t bomb.zip", ExecOptions{Stdout: &out, Stderr: &out, Timeout: 50 * time.Millisecond})
	if err != nil || res.ExitCode == 0 || strings.Contains(out.String(), "No errors") {
		t.Errorf("unzip -t of a bomb under a timeout: %v %+v %q", err, res, out.String())
	}
	// no more than the sizes say comes out, and the member fails
	o, e1, code := sh(t, s, "unzip -p forged.zip > out; echo $?; wc -c < out")
	if o != "2\n0\n" && o != "2\n10\n" {
		t.Errorf("unzip -p of forged sizes: %q %q %d", o, e1, code)
	}
	o, e2, code := sh(t, s, "unzip -l huge.zip")
	if code == 0 || !strings.Contains(e2, "corrupt") {
		t.Errorf("unzip -l of a forged directory: %q %q %d", o, e2, code)
	}
	t.Logf("forged sizes: %q; forged directory: %q", e1, e2)
}
