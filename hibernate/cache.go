package hibernate

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// CacheFile, in a store directory, remembers the chunk names of the
// files an upload or a download saw, with what identifies their content
// (inode, size, modification and change times), so that a file that did
// not change since (Pebble's tables never do; most blobs do not) is not
// read and hashed again. The change time is the kernel's: no write,
// truncate or rename leaves it as it was. No image includes the file.
const CacheFile = "hibernate-cache.json"

type fileSig struct {
	Ino   uint64 `json:"ino"`
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime"` // ns
	Ctime int64  `json:"ctime"` // ns
}

type cachedFile struct {
	Sig    fileSig  `json:"sig"`
	Chunks []string `json:"chunks"`
}

func sigOf(info fs.FileInfo) (fileSig, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileSig{}, false
	}
	return fileSig{Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, true
}

// readCache returns the store's cache (empty if it has none or it does
// not parse: it is only a cache).
func readCache(dir string) map[string]cachedFile {
	m := make(map[string]cachedFile)
	b, err := os.ReadFile(filepath.Join(dir, CacheFile))
	if err == nil && json.Unmarshal(b, &m) != nil {
		m = make(map[string]cachedFile)
	}
	return m
}

// writeCache records the chunks of files as they are now on disk (a file
// whose identity cannot be read is left out).
func writeCache(dir string, files []File) {
	m := make(map[string]cachedFile, len(files))
	for _, f := range files {
		info, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			continue
		}
		if sig, ok := sigOf(info); ok && sig.Size == f.Size {
			m[f.Path] = cachedFile{Sig: sig, Chunks: f.Chunks}
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	tmp := filepath.Join(dir, CacheFile+".tmp")
	if os.WriteFile(tmp, b, 0o600) == nil {
		os.Rename(tmp, filepath.Join(dir, CacheFile))
	}
}
