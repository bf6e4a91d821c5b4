package shell

import (
	"strings"
	"testing"
)

// odFiles are inputs for od and xxd: text, every byte value, runs of the
// same line (od's "*"), an odd length, an empty file.
func odFiles() map[string]string {
	var all strings.Builder
	for i := 0; i < 256; i++ {
		all.WriteByte(byte(i))
	}
	return map[string]string{
		"text.txt":  "hello world\nsecond line\tτέλος\r\n",
		"all.bin":   all.String(),
		"zeros.bin": strings.Repeat("\x00", 100) + "x" + strings.Repeat("\x00", 40),
		"rep.txt":   strings.Repeat("abcdefghijklmnop", 5) + "tail",
		"odd.bin":   "\x01\x02\x03\x04\x05\xfe\xff",
		"empty":     "",
		"dir/":      "",
	}
}

func TestOdMatchesGNU(t *testing.T) {
	var cmds []string
	for _, o := range []string{"", "-c", "-An -c", "-b", "-x", "-d", "-o", "-s", "-a", "-i", "-l",
		"-t x1", "-t x1z", "-A x -t x1z -v", "-t x2", "-t x4", "-t x8", "-t o1", "-t o2", "-t o4", "-t o8",
		"-t d1", "-t d2", "-t d4", "-t d8", "-t u1", "-t u2", "-t u4", "-t u8", "-t dC", "-t uS", "-t xI", "-t oL",
		"-t a", "-t c", "-t x1 -t c", "-t u2 -t c", "-t cz", "-t d1z -t x2", "-tx1 -tu1 -to1 -td1 -ta",
		"-A d", "-A o", "-A n", "-A x", "-Ax -tx2", "-v", "-w8", "-w4 -c", "-w3 -t x2", "-w0", "-w1 -t x4",
		"-w32", "--width=8", "--width", "-w", "-vw", "-w -c", "-j 5", "-j5 -N 10", "-N 3", "-N 0", "-j 0x10", "-j 010 -N 0x4",
		"-N 1k", "-j 1b", "--skip-bytes=3 --read-bytes=9", "--format=x1", "--address-radix=d", "--output-duplicates",
		"-j 1000", "-A q", "-t 1", "-t xq", "-t y"} {
		for _, f := range []string{"text.txt", "all.bin", "zeros.bin", "rep.txt", "odd.bin", "empty"} {
			cmds = append(cmds, "od "+o+" "+f)
		}
	}
	cmds = append(cmds, "od nosuch", "od text.txt nosuch odd.bin", "od dir", "od -c dir text.txt",
		"od empty empty", "od -j 30 text.txt odd.bin", "od -c odd.bin text.txt", "printf 'abc' | od -c",
		"printf 'abc' | od -c - odd.bin", "cat all.bin | od -A x -t x1z", "od -j 44 text.txt", "od -j 43 text.txt",
		"od -N 5 -j 3 -c rep.txt", "od -c < text.txt")
	diffTools(t, []string{"od"}, odFiles(), cmds)
}

func init() {
	runaways["od"] = []string{`od /dev/zero > /dev/null`, `od -v -c sparse > /dev/null`, `od -j 1099511627000 sparse`, `yes | od -c > /dev/null`}
	// a line of a TB, held twice (the words are computed: CanRun sees
	// them as "" and lets the command run)
	memBombs = append(memBombs, `W=1000000000000; od -w$W f`, `W=100000000; od -A n -t x1z -w$W /dev/zero`)
}
