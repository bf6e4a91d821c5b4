package shell

import (
	"testing"
)

func TestJoinMatchesGNU(t *testing.T) {
	files := map[string]string{
		"a.txt":    "apple 1\nbanana 2\ncherry 3\ncherry 33\ndate 4\n",
		"b.txt":    "apple red\ncherry dark red\ncherry pale\nelder x\nfig\n",
		"u1.txt":   "b 1\na 2\nc 3\n",
		"u2.txt":   "a x\nb y\nc z\n",
		"u3.txt":   "a x\nc z\nb y\nd w\n",
		"c1.csv":   "id,name,age\n1,ann,30\n2,bob,\n3,cy,40\n5,,50\n",
		"c2.csv":   "id,city\n1,NYC\n3,\n4,LA\n5,SF\n",
		"case1":    "Apple 1\nbanana 2\n",
		"case2":    "apple A\nBANANA B\n",
		"blank1":   "  a   1  \n\nb\t2\n c 3 x\n",
		"blank2":   "a one\n\nb two \nc\n",
		"k2.txt":   "1 apple\n2 banana\n3 cherry\n",
		"empty":    "",
		"nonl":     "apple 9",
		"dir/":     "",
		"tab1.tsv": "a\t1\t\nb\t2\tx\n",
		"tab2.tsv": "a\tA\nb\t\n",
	}
	var cmds []string
	pairs := [][2]string{{"a.txt", "b.txt"}, {"b.txt", "a.txt"}, {"u1.txt", "u2.txt"}, {"u2.txt", "u1.txt"}, {"u3.txt", "u2.txt"},
		{"u2.txt", "u3.txt"}, {"c1.csv", "c2.csv"}, {"case1", "case2"}, {"blank1", "blank2"}, {"a.txt", "empty"}, {"empty", "a.txt"},
		{"a.txt", "nonl"}, {"tab1.tsv", "tab2.tsv"}, {"u3.txt", "u3.txt"}}
	for _, o := range []string{"", "-a 1", "-a 2", "-a1 -a2", "-v 1", "-v 2", "-v1 -v2", "-a 1 -v 2", "-i", "--ignore-case",
		"-t,", "-t , -a 1 -a 2 -e NULL -o auto", "-t, --header", "-t, --header -a 2 -o 0,1.2,2.2 -e -", "-o 1.1,2.2", "-o '1.2 2.1 0'",
		"-o 0 -o 2.2", "-o 2.1,1.1 -e X", "-o auto", "-o auto -e E -a 1", "-e E", "-e E -a 1 -a 2", "-1 2 -2 1", "-j 1", "-j 2",
		"-2 2", "--check-order", "--nocheck-order", "--nocheck-order -a 1", "--header", "-t ''", "-t $'\\t'", "-t $'\\t' -e N -o auto",
		"-1 3", "-i -a 2 -o 0,2.2"} {
		for _, p := range pairs {
			cmds = append(cmds, "join "+o+" "+p[0]+" "+p[1])
		}
	}
	cmds = append(cmds, "join -1 2 k2.txt a.txt", "join -2 2 a.txt k2.txt", "join a.txt", "join", "join a.txt nosuch",
		"join nosuch a.txt", "join dir a.txt", "join a.txt dir", "join -o 1 a.txt b.txt", "join -o 1.x a.txt b.txt",
		"join -o 3.1 a.txt b.txt", "join -o 1.0 a.txt b.txt", "join -1 0 a.txt b.txt", "join -1 x a.txt b.txt", "join -a 3 a.txt b.txt",
		"join -v x a.txt b.txt", "join -t ab a.txt b.txt", "cat a.txt | join - b.txt", "cat b.txt | join a.txt -",
		"join <(sort u1.txt) <(sort u2.txt)", "join -j 1 -o 1.2,2.2 a.txt b.txt")
	diffTools(t, []string{"join"}, files, cmds)
}

func init() {
	runaways["join"] = []string{`join /dev/zero /dev/zero`, `join <(yes) <(yes) > /dev/null`, `join sparse f`}
	// one key shared by many lines of each file: the cross product
	// streams, but the lines of a key are held
	memBombs = append(memBombs, `join <(yes) <(yes) > /dev/null`)
}
