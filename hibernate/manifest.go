package hibernate

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Format names what manifest.json holds; Version is the layout this
// package writes and reads.
const (
	Format  = "computerfs-hibernate"
	Version = 1
)

// ChunkSize is the size of the pieces files are stored in: a change in
// a big blob uploads the chunks it touched, and big files download in
// parallel.
const ChunkSize = 4 << 20

// Bounds on what a manifest read from S3 may hold, so that a damaged or
// hostile one cannot exhaust the host.
const (
	maxManifestBytes = 256 << 20
	maxFiles         = 1 << 20
)

var (
	// ErrNoImage: there is no manifest at the location.
	ErrNoImage = errors.New("no hibernated workspace here")
	// ErrFormat: the manifest is of another format or version.
	ErrFormat = errors.New("not a hibernated workspace of a format this computerfs reads")
	// ErrCorrupt: the manifest or an object does not hold what it must.
	ErrCorrupt = errors.New("hibernated workspace is corrupt")
	// ErrIncomplete: an object the manifest names is missing.
	ErrIncomplete = errors.New("hibernated workspace is incomplete")
	// ErrOtherStore: the location holds the image of another store.
	ErrOtherStore = errors.New("the location holds another workspace's image")
	// ErrImageChanged: the image was written by someone else since this
	// store last wrote or read it.
	ErrImageChanged = errors.New("the image changed since this store last hibernated or resumed from it")
)

// Manifest lists the files of a hibernated store.
type Manifest struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	StoreID string `json:"store_id"` // the store's identity (State.StoreID)
	Host    string `json:"host"`     // the host that wrote the image
	// Holder is the lease holder id of the store that wrote it (State.Holder).
	Holder    string    `json:"holder,omitempty"`
	Created   time.Time `json:"created"`
	ChunkSize int64     `json:"chunk_size"`
	Files     []File    `json:"files"`
}

// File is one file of the store, by its path under the store directory.
type File struct {
	Path   string   `json:"path"` // slash-separated, relative
	Size   int64    `json:"size"`
	Mode   uint32   `json:"mode"`   // permission bits
	Chunks []string `json:"chunks"` // sha256 of each ChunkSize piece, in hex

	sig   fileSig  // the file on disk when listed (upload)
	known []string // its chunks as the cache remembers them, if it did not change since
}

// Bytes returns the total size of the files.
func (m *Manifest) Bytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// parseManifest decodes and checks a manifest read from S3.
func parseManifest(b []byte) (*Manifest, error) {
	var head struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	if head.Format != Format {
		return nil, fmt.Errorf("%w (format %q, want %q)", ErrFormat, head.Format, Format)
	}
	if head.Version != Version {
		return nil, fmt.Errorf("%w (version %d, this computerfs reads %d)", ErrFormat, head.Version, Version)
	}
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	return &m, nil
}

// check refuses a manifest that could write outside the store directory,
// twice to one file, or more than it says.
func (m *Manifest) check() error {
	if m.ChunkSize <= 0 || m.ChunkSize > 1<<30 {
		return fmt.Errorf("chunk size %d", m.ChunkSize)
	}
	if len(m.Files) > maxFiles {
		return fmt.Errorf("%d files", len(m.Files))
	}
	if m.StoreID == "" {
		return errors.New("no store id")
	}
	seen := make(map[string]bool, len(m.Files))
	dirs := make(map[string]bool)
	for _, f := range m.Files {
		p := filepath.FromSlash(f.Path)
		if !filepath.IsLocal(p) || filepath.Clean(p) != p || strings.ContainsRune(f.Path, '\\') {
			return fmt.Errorf("path %q", f.Path)
		}
		if seen[f.Path] || dirs[f.Path] {
			return fmt.Errorf("path %q twice", f.Path)
		}
		seen[f.Path] = true
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			dirs[filepath.ToSlash(d)] = true
		}
		if f.Size < 0 || f.Mode&^0o777 != 0 {
			return fmt.Errorf("%s: size %d, mode %o", f.Path, f.Size, f.Mode)
		}
		if want := (f.Size + m.ChunkSize - 1) / m.ChunkSize; int64(len(f.Chunks)) != want {
			return fmt.Errorf("%s: %d chunks for %d bytes", f.Path, len(f.Chunks), f.Size)
		}
		for _, c := range f.Chunks {
			if !isHash(c) {
				return fmt.Errorf("%s: chunk %q", f.Path, c)
			}
		}
	}
	for f := range seen {
		if dirs[f] {
			return fmt.Errorf("path %q is a file and a directory", f)
		}
	}
	return nil
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}
