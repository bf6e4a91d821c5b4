package shell

import (
	"os/exec"
	"testing"
)

// For the external tests (package shell_test), which need the daemon.

// CorpusCommands returns the commands of the differential corpus.
func CorpusCommands(t testing.TB) []string {
	var out []string
	for _, e := range readCorpus(t) {
		out = append(out, e.cmd)
	}
	return out
}

// WriteFixtureDir writes the corpus's fixture tree under root.
func WriteFixtureDir(t testing.TB, root string) { writeFixtureDir(t, root) }

// TmpfsFixture and BashCommand: see tmpfsFixture and bashCommand.
func TmpfsFixture(t testing.TB, pattern string) (ws, tmp string, remove func()) {
	return tmpfsFixture(t, pattern)
}

func BashCommand(ws, tmp, command string) *exec.Cmd { return bashCommand(ws, tmp, command) }
