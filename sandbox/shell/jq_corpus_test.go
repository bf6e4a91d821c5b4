package shell

import (
	"os"
	"testing"
)

// jqCorpusKnown are corpus-jq.txt's commands that the fast path answers
// unlike jq 1.6, each with why. They are counted as wrong but do not
// fail the test.
var jqCorpusKnown = map[string]string{}

// TestJqCorpus runs testdata/corpus-jq.txt, jq commands in the shapes
// agents type, as auto routes them: what CanRun accepts runs on the fast
// path and must match /usr/bin/jq (jq 1.6, the sandbox's) under bash on a
// tmpfs copy of the fixture, stdout, stderr and status byte for byte;
// what it routes runs in the sandbox, right by construction.
func TestJqCorpus(t *testing.T) {
	if _, err := os.Stat("/usr/bin/jq"); err != nil {
		t.Fatal("/usr/bin/jq (jq 1.6, scripts/packages.txt) is needed for the differential test")
	}
	entries := readCorpusFile(t, "testdata/corpus-jq.txt")
	if len(entries) < 400 {
		t.Fatalf("jq corpus has %d entries", len(entries))
	}
	fast, wrong, known := 0, 0, 0
	routed := map[string]int{}
	for _, e := range entries {
		ok, why, got, gotErr, code := autoRun(t, e.cmd)
		if !ok {
			routed[routeKind(why)]++
			if testing.Verbose() {
				t.Logf("corpus-jq.txt:%d: routed: %s: %s", e.line, why, e.cmd)
			}
			continue
		}
		want, wantErr, wantCode := bashRunBoth(t, e.cmd)
		if got != want || gotErr != wantErr || code != wantCode {
			wrong++
			if why, ok := jqCorpusKnown[e.cmd]; ok {
				known++
				if testing.Verbose() {
					t.Logf("corpus-jq.txt:%d: known to differ: %s: %s", e.line, why, e.cmd)
				}
				continue
			}
			t.Errorf("corpus-jq.txt:%d: %s\n--- fast path (status %d):\n%s--- stderr:\n%s--- jq 1.6 (status %d):\n%s--- stderr:\n%s",
				e.line, e.cmd, code, got, gotErr, wantCode, want, wantErr)
			continue
		}
		if _, ok := jqCorpusKnown[e.cmd]; ok {
			t.Errorf("corpus-jq.txt:%d: %s: listed as known to differ, but matches jq 1.6", e.line, e.cmd)
		}
		fast++
	}
	n := len(entries)
	pct := func(k int) float64 { return 100 * float64(k) / float64(n) }
	t.Logf("jq corpus: %d commands; on the fast path and identical to jq 1.6 %d (%.1f%%), sent to the sandbox %d (%.1f%%), wrong on the fast path %d (%.1f%%, %d of them known); routed by kind: %v",
		n, fast, pct(fast), n-fast-wrong, pct(n-fast-wrong), wrong, pct(wrong), known, routed)
}
