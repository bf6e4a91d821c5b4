package hibernate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// A signature says who wrote an image, not when: an older image of the
// same location, signed, put back by whoever can write the bucket, would
// verify. Each manifest therefore carries a generation, one more than
// the greatest its writer knew of, and a resume refuses one below what it
// knows: the generation the location's signed lease names (a hibernate
// releases its lease with the generation it wrote) and the host's Record
// of the greatest generation it wrote or resumed at each location.

// Record is a host's record of the greatest image generation it wrote or
// resumed at each location (bucket and prefix, as signatures bind them):
// a directory of root's, mode 0700, a file per location. By default it is
// beside the image key (RecordDir).
type Record struct{ dir string }

// RecordDir returns the record's directory for the image key file
// keyFile: image-generations beside it.
func RecordDir(keyFile string) string {
	return filepath.Join(filepath.Dir(keyFile), "image-generations")
}

// OpenRecord opens (making it if missing) the record in dir. The
// directory must be this user's and writable by no one else: whoever can
// lower a generation there can replay an image to this host.
func OpenRecord(dir string) (*Record, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("image generations: %w", err)
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("image generations: %w", err)
	}
	sys, _ := info.Sys().(*syscall.Stat_t)
	if !info.IsDir() || info.Mode().Perm()&0o022 != 0 || sys == nil || int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("image generations %s: must be a directory of this user that no one else can write (is %v)", dir, info.Mode())
	}
	return &Record{dir: dir}, nil
}

type recordEntry struct {
	Location   string `json:"location"`
	Generation uint64 `json:"generation"`
}

func (r *Record) file(loc Location) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s\x00%d:%s", len(loc.Bucket), loc.Bucket, len(loc.Prefix), loc.Prefix)
	return filepath.Join(r.dir, hex.EncodeToString(h.Sum(nil)[:16])+".json")
}

// Seen returns the greatest generation recorded at loc (0: none).
func (r *Record) Seen(loc Location) (uint64, error) {
	b, err := os.ReadFile(r.file(loc))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("image generations: %w", err)
	}
	var e recordEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return 0, fmt.Errorf("image generations: %s is damaged (%v): remove it only if no older image of %s can have been put back", r.file(loc), err, loc)
	}
	return e.Generation, nil
}

// Raise records gen at loc unless a greater one is recorded. Concurrent
// raises (two hibernates of one host) are serialised by a lock.
func (r *Record) Raise(loc Location, gen uint64) error {
	lock, err := os.OpenFile(filepath.Join(r.dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("image generations: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("image generations: %w", err)
	}
	cur, err := r.Seen(loc)
	if err != nil || cur >= gen {
		return err
	}
	b, _ := json.Marshal(recordEntry{Location: loc.String(), Generation: gen})
	if err := replaceFile(r.file(loc), append(b, '\n')); err != nil {
		return fmt.Errorf("image generations: %w", err)
	}
	return nil
}

// CheckGeneration refuses (ErrRolledBack) the manifest m at loc if its
// generation is below min.
func CheckGeneration(loc Location, m *Manifest, min uint64) error {
	if m.Generation >= min {
		return nil
	}
	return fmt.Errorf("%s: %w: its generation is %d, and %d was seen there (written %s by host %s); if this older image is the one wanted, resume with --allow-rollback",
		loc, ErrRolledBack, m.Generation, min, m.Created.Format("2006-01-02T15:04:05Z07:00"), strconv.Quote(m.Host))
}
