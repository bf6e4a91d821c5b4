package shell

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/computerfs/computerfs/internal/gittest"
)

func BenchmarkGitProf(b *testing.B) {
	origin := filepath.Join(b.TempDir(), "origin")
	gittest.Generate(b, origin, 1000, 50, 7)
	s, _ := gitStore(b, origin)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var out bytes.Buffer
		s.Exec(context.Background(), "git status; git status -s; git diff", ExecOptions{Cwd: "/workspace/repo", Stdout: &out, Stderr: &out})
	}
}
