package syncer

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/computerfs/computerfs/kv"
)

// TestPlan runs testdata/plan: scripts of journal records and store states
// with the pending paths, decisions and cursor moves they must give.
//
//	touches root=/s       records, one a line: SEQ TIME OP PATH [PATH2] (PATH/...: cut)
//	decide key=K          a state: [exists ino=N ctime=N] [origin=KEY,ID,CTIME] [version=V] [conflict]
//	ready now=N debounce=N closed=N   with the touch time in the input
//	advance cursor=N last=N [notdone=N,N]
func TestPlan(t *testing.T) {
	datadriven.RunTest(t, "testdata/plan", func(t *testing.T, d *datadriven.TestData) string {
		args := map[string]string{}
		for _, a := range d.CmdArgs {
			args[a.Key] = strings.Join(a.Vals, ",")
		}
		num := func(s string) uint64 {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("%s: %q is not a number", d.Pos, s)
			}
			return n
		}
		switch d.Cmd {
		case "touches":
			var recs []kv.Record
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				f := strings.Fields(line)
				if len(f) < 4 {
					t.Fatalf("%s: record %q", d.Pos, line)
				}
				// A path ending in "/..." is cut (kv.Record.PathCut): the
				// nearest ancestor of what changed.
				cut := func(p string) (string, bool) {
					if q, ok := strings.CutSuffix(p, "/..."); ok {
						return q + map[bool]string{true: "/"}[q == ""], true
					}
					return p, false
				}
				r := kv.Record{Seq: num(f[0]), Time: int64(num(f[1]))}
				r.Path, r.PathCut = cut(f[3])
				if len(f) > 4 {
					r.Path2, r.Path2Cut = cut(f[4])
				}
				recs = append(recs, r)
			}
			ts := Touches(args["root"], recs)
			var out []string
			for _, rel := range sortedRels(ts) {
				tt := ts[rel]
				out = append(out, fmt.Sprintf("%q first=%d time=%d", rel, tt.First, tt.Time))
			}
			if len(out) == 0 {
				return "none\n"
			}
			return strings.Join(out, "\n") + "\n"
		case "decide":
			var f File
			for _, w := range strings.Fields(d.Input) {
				k, v, _ := strings.Cut(w, "=")
				switch k {
				case "exists":
					f.Exists = true
				case "ino":
					f.Ino = num(v)
				case "ctime":
					f.Ctime = int64(num(v))
				case "origin":
					p := strings.Split(v, ",")
					f.Origin = &kv.Origin{Key: p[0], ID: p[1], Ctime: int64(num(p[2]))}
				case "version":
					f.Version = v
				case "conflict":
					f.Conflict = true
				default:
					t.Fatalf("%s: unknown word %q", d.Pos, w)
				}
			}
			return Decide(args["key"], f).String() + "\n"
		case "ready":
			tt := &Touch{Time: int64(num(strings.TrimSpace(d.Input)))}
			now := time.Unix(0, int64(num(args["now"])))
			return fmt.Sprintln(Ready(tt, now, time.Duration(num(args["debounce"])), int64(num(args["closed"]))))
		case "advance":
			var nd []uint64
			if s := args["notdone"]; s != "" {
				for _, x := range strings.Split(s, ",") {
					nd = append(nd, num(x))
				}
			}
			sort.Slice(nd, func(i, j int) bool { return nd[i] < nd[j] })
			return fmt.Sprintln(Advance(num(args["cursor"]), num(args["last"]), nd))
		}
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
		return ""
	})
}
