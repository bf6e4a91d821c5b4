package computerfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/computerfs/computerfs/kv"
)

// TestImportWritesTables: an import leaves its data in table files, not in
// a log that the daemon mounting the store would have to replay (and
// write into tables) before it answers.
func TestImportWritesTables(t *testing.T) {
	src := t.TempDir()
	for i := range 2000 {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprint("f", i)), []byte(strings.Repeat("x", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store := filepath.Join(t.TempDir(), "ws")
	if _, err := doImport(t, parseSpec(t, fmt.Sprintf("sources:\n  - path: /d\n    dir: %q\n", src)), store); err != nil {
		t.Fatal(err)
	}
	st, err := kv.Open(store, kv.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Pebble's metrics: the log the store was opened with wrote nothing
	// into tables ("WAL: 1 files (0B)  in: 0B  written: 0B ...").
	for _, line := range strings.Split(st.Metrics(), "\n") {
		if strings.HasPrefix(line, "WAL:") {
			if !strings.Contains(line, "written: 0B") {
				t.Fatalf("the mount replays the import's log: %s", line)
			}
			return
		}
	}
	t.Fatalf("no WAL line in the store's metrics:\n%s", st.Metrics())
}
