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
	c := runAutoCorpus(t, "corpus-jq.txt", 400, jqCorpusKnown, "jq 1.6")
	t.Logf("jq corpus: %d commands; on the fast path and identical to jq 1.6 %d (%.1f%%), sent to the sandbox %d (%.1f%%), wrong on the fast path %d (%.1f%%, %d of them known); routed by kind: %v",
		c.n, c.fast, c.pct(c.fast), c.n-c.fast-c.wrong, c.pct(c.n-c.fast-c.wrong), c.wrong, c.pct(c.wrong), c.known, c.routed)
}
