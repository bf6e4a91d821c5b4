package hibernate

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// TestZeroChunkName: the constant name of a chunk of zeros is that
// chunk's sha256, so that holes are recognised on upload and left as
// holes on download.
func TestZeroChunkName(t *testing.T) {
	s := sha256.Sum256(make([]byte, ChunkSize))
	if got := hex.EncodeToString(s[:]); got != zeroChunk {
		t.Fatalf("zeroChunk = %s, the sha256 of %d zero bytes is %s", zeroChunk, ChunkSize, got)
	}
}
