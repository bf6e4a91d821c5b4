package hibernate

import (
	"bytes"
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
	maxFileBytes     = 1 << 44 // 16 TiB, ext4's largest file
	maxImageBytes    = 1 << 50
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
	// ErrRolledBack: the manifest, signed, is of an older generation than
	// one this host wrote or resumed at the location, or than the one the
	// location's signed lease names: an older image put back.
	ErrRolledBack = errors.New("the image is older than one this host or the workspace's lease has seen there (an older image put back in the bucket)")
)

// Manifest lists the files of a hibernated store.
type Manifest struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	StoreID string `json:"store_id"` // the store's identity (State.StoreID)
	Host    string `json:"host"`     // the host that wrote the image
	// Holder is the lease holder id of the store that wrote it (State.Holder).
	Holder string `json:"holder,omitempty"`
	// Generation counts the manifests written at the location: each is
	// one more than the greatest its writer knew of (the manifest it
	// replaces, the host's record, the lease's). Signed with the rest, it
	// is what tells an older image put back from the newest
	// (ErrRolledBack). Images written before it have none (0).
	Generation uint64    `json:"generation,omitempty"`
	Created    time.Time `json:"created"`
	ChunkSize  int64     `json:"chunk_size"`
	Files      []File    `json:"files"`
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
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	return &m, nil
}

// Bounds on a manifest's paths: a store's deepest file is
// snapshots/NAME/blobs/INODE (NAME at most 64 bytes), so these leave room
// and keep the checks below linear in the manifest's size.
const (
	maxPathBytes = 512
	maxPathDepth = 8
)

// notInImage are the top-level names no image may hold: what an upload
// leaves out (the daemon remakes or writes them, and some it trusts: the
// sandbox's cache volume is a file system the kernel mounts, the pending
// list names what the fetcher writes) and the control socket.
func notInImage(p string) bool {
	top, _, _ := strings.Cut(p, "/")
	return ExcludedNames[top] || top == "control.sock"
}

// check refuses a manifest that could write outside the store directory,
// twice to one file, more than it says, or one of the names a store keeps
// for itself. It allocates nothing per path: a manifest is at most
// maxManifestBytes, and the work is at most maxPathDepth times that.
func (m *Manifest) check() error {
	if m.ChunkSize != ChunkSize {
		// The only size this package writes; the holes' accounting
		// (zeroChunk) and the room check assume it.
		return fmt.Errorf("chunk size %d", m.ChunkSize)
	}
	if len(m.Files) > maxFiles {
		return fmt.Errorf("%d files", len(m.Files))
	}
	if m.StoreID == "" {
		return errors.New("no store id")
	}
	seen := make(map[string]bool, len(m.Files))
	var total int64
	for _, f := range m.Files {
		if len(f.Path) > maxPathBytes || strings.Count(f.Path, "/") >= maxPathDepth {
			return fmt.Errorf("path %.64q...: longer than %d bytes or deeper than %d", f.Path, maxPathBytes, maxPathDepth)
		}
		p := filepath.FromSlash(f.Path)
		if !filepath.IsLocal(p) || filepath.Clean(p) != p || strings.ContainsAny(f.Path, "\\\x00") {
			return fmt.Errorf("path %q", f.Path)
		}
		if notInImage(f.Path) {
			return fmt.Errorf("path %q: a name the store keeps for itself", f.Path)
		}
		if seen[f.Path] {
			return fmt.Errorf("path %q twice", f.Path)
		}
		seen[f.Path] = true
		if f.Size < 0 || f.Size > maxFileBytes || f.Mode&^0o777 != 0 {
			return fmt.Errorf("%s: size %d, mode %o", f.Path, f.Size, f.Mode)
		}
		if total += f.Size; total > maxImageBytes {
			return fmt.Errorf("more than %d TiB in all", maxImageBytes>>40)
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
	// A file under a path that is a file too: look up each ancestor
	// (slices of the path, no copies).
	for _, f := range m.Files {
		for i := strings.LastIndexByte(f.Path, '/'); i > 0; i = strings.LastIndexByte(f.Path[:i], '/') {
			if seen[f.Path[:i]] {
				return fmt.Errorf("path %q is a file and a directory", f.Path[:i])
			}
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
