package shell

import (
	"strings"
	"testing"
)

func TestColumnMatchesUtilLinux(t *testing.T) {
	files := map[string]string{
		"t.txt":    "name age city\nalice 30 NYC\nbob  4   LA\n\n  lead  x\ncharlie 100 SF extra\n",
		"c.csv":    "a,b,c\n1,,3\nlong value,2\n,x,\n\nτέλος,y,z\n,\n",
		"tabs.tsv": "a\tb\tc d\nxx\t\tz\n\t\t\n",
		"crlf.txt": "a b\r\nccc dd\r\nx y\n",
		"odd.txt":  "e\u0301 b\nccc dd\n\xff\xfe x\n\u200bz q\n日本語 x\n\x01a\x7f b\nlast line no newline",
		"wide.txt": strings.Repeat("x", 60) + " " + strings.Repeat("y", 50) + " " + strings.Repeat("z", 30) + "\na b c\n",
		"ws.txt":   "a b\n   \nc d\n\n",
		"empty":    "",
		"dir/":     "",
	}
	var cmds []string
	for _, o := range []string{"-t", "-t -s,", "-ts,", "-t -s ', '", "-t -s ' '", "-t -s $'\\t'", "-t -s '\\t'", "-t -s, -o ' | '",
		"-t -o ''", "-t -L", "-t -L -s,", "-tL", "--table", "--table --separator=, --output-separator=:", "--table --keep-empty-lines",
		"-t -s ,x", "-t -s é"} {
		for _, f := range []string{"t.txt", "c.csv", "tabs.tsv", "crlf.txt", "odd.txt", "wide.txt", "ws.txt", "empty"} {
			cmds = append(cmds, "column "+o+" "+f)
		}
	}
	cmds = append(cmds, "column -t nosuch", "column -t t.txt nosuch", "column -t nosuch t.txt c.csv", "column -t nosuch nosuch2",
		"column -t dir", "column -t t.txt dir", "column -t t.txt c.csv", "printf 'a b\\nccc d\\n' | column -t",
		"printf 'a b\\nccc d' | column -t -", "mount_out='x y'; echo \"$mount_out\" | column -t", "column -t < c.csv")
	diffTools(t, []string{"column"}, files, cmds)
}

func init() {
	runaways["column"] = []string{`column -t /dev/zero`, `yes | column -t > /dev/null`, `yes 'a b c' | column -t -s ' ' > /dev/null`}
	// a line without end, and 30 million rows
	memBombs = append(memBombs, `column -t /dev/zero`, `yes 'a b c' | head -n 30000000 | column -t`)
}
