package shell

import (
	"testing"
)

func TestXxdMatchesVim(t *testing.T) {
	files := odFiles()
	files["hex.txt"] = "68656c6c6f0a\n00ff 10\tAB\r\ncd\n"
	files["odd.hex"] = "6x8 41\nzzz 42\n4 3 44 zz 45\nxyz\n46"
	files["dump.hex"] = "00000000: 6865 6c6c 6f0a                           hello.\n"
	files["9name.c"] = "int x;\n"
	files["sub/a-b.bin"] = "\x01\x02"
	var cmds []string
	for _, o := range []string{"", "-u", "-l 5", "-l5", "-len 5", "-l 0", "-l -1", "-l 0x10", "-s 3", "-s -4", "-s +2",
		"-s 1000", "-s -1000", "-s 0x2 -l 0x3", "-s 2 -s +1", "-c 8", "-c8 -g4", "-c 5", "-c 5 -g 2", "-c 256", "-c 257",
		"-c 0", "-c -1", "-cols 4", "-g 0", "-g 1", "-g 3", "-g 20", "-g -1", "-g 16", "-p", "-ps", "-plain",
		"-postscript", "-pu", "-up", "-p -c 4", "-p -c 300", "-p -c 0", "-p -l 7", "-i", "-i -u", "-i -c 4", "-i -c 300",
		"-include", "-i -l 3", "-i -s 2", "--", "-c 3 --", "--len 5", "--cols 6"} {
		for _, f := range []string{"text.txt", "all.bin", "zeros.bin", "odd.bin", "empty"} {
			cmds = append(cmds, "xxd "+o+" "+f)
		}
	}
	cmds = append(cmds, "xxd nosuch", "xxd dir", "xxd -i dir", "xxd -i 9name.c", "xxd -i sub/a-b.bin", "xxd -i < text.txt",
		"printf 'abc' | xxd", "printf 'abc' | xxd -", "printf 'abc' | xxd -i", "cat all.bin | xxd -p", "xxd - < odd.bin",
		"xxd -r -p hex.txt | od -c", "xxd -r -p odd.hex | od -c", "xxd -p all.bin | xxd -r -p | od -c", "xxd -p -c 0 all.bin", "xxd -p -c 0 -l 3 odd.bin", "xxd -p -c -5 odd.bin", "xxd -i -c 0 odd.bin",
		"echo 4142 | xxd -r -p", "printf '41 4 2' | xxd -r -p | od -c", "xxd -r -p empty", "xxd -r -p < dump.hex | od -c",
		"xxd -p -r hex.txt | od -c", "xxd -ps -r hex.txt | xxd",
		"xxd all.bin | xxd -r | od -c", "xxd text.txt | xxd -r", "xxd -c 8 all.bin | xxd -r | xxd", "xxd -c 8 all.bin | xxd -r -c 8 | xxd",
		"xxd -c 32 all.bin | xxd -r -c 32 | xxd -p", "xxd -g 1 all.bin | xxd -r | xxd -p", "xxd -u zeros.bin | xxd -r | od -c",
		"xxd -r dump.hex", "xxd -r odd.hex | od -c", "xxd -r empty", "xxd -r nosuch",
		"printf '00000010: 4142\\n00000000: 6162\\n' | xxd -r | od -c", "printf '00000004: 4142\\n' | xxd -r | od -c",
		"printf '0: 41 42 zz 43\\n' | xxd -r | od -c", "printf '10: 41\\r\\n20: 4243 44\\n' | xxd -r | od -c",
		"printf 'zz\\n  \\n0:41 4243\\n8: 4 1\\n' | xxd -r | od -c", "printf '0: 414\\n' | xxd -r | od -c",
		"printf '00000000: 4142 4344  ABCD\\n00000004: 45\\n' | xxd -r | od -c", "xxd -r < dump.hex", "xxd -r - < dump.hex")
	diffTools(t, []string{"xxd", "od"}, files, cmds)
}

func init() {
	runaways["xxd"] = []string{`xxd /dev/zero > /dev/null`, `xxd -p sparse > /dev/null`, `yes | xxd -i > /dev/null`, `xxd -s 1099511627000 sparse`,
		`echo 'ffffffffff: 41' | xxd -r > /dev/null`} // a TB of zeros before the byte
}
