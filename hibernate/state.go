package hibernate

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// StateFile is the file in a store directory that says where the store
// hibernates and what it holds of that image and its lease. It is
// root's, outside the workspace (the agent never sees the store
// directory), and no image includes it.
const StateFile = "hibernate.json"

// State is what a store directory knows of its image.
type State struct {
	// StoreID names the store for good: an image records it, and a
	// store does not overwrite another's image.
	StoreID string `json:"store_id"`
	// Where the image is (the URL, endpoint, region and addressing).
	URL       string `json:"url,omitempty"`
	Endpoint  string `json:"endpoint,omitempty"`
	Region    string `json:"region,omitempty"`
	PathStyle bool   `json:"path_style,omitempty"`
	// ManifestETag is the ETag of the manifest this store last wrote or
	// resumed from.
	ManifestETag string `json:"manifest_etag,omitempty"`
	// Holder is this store's lease holder id; LeaseETag the ETag of the
	// lease it last wrote ("" if it holds none); LeaseTTL how long each
	// renewal lasts.
	Holder    string        `json:"holder"`
	LeaseETag string        `json:"lease_etag,omitempty"`
	LeaseTTL  time.Duration `json:"lease_ttl,omitempty"`
	// Generation is the greatest image generation the store knows of at
	// its location (the manifest it wrote or resumed, or the floor it was
	// resumed over): its lease carries it, its next manifest is above it.
	Generation uint64 `json:"generation,omitempty"`
	// KeyFile is the image key that signs its lease and image (the one
	// given to the hibernate or resume that wrote the state).
	KeyFile string `json:"key_file,omitempty"`
}

// Location returns the state's location (an error if it has none).
func (s *State) Location() (Location, error) {
	if s.URL == "" {
		return Location{}, errors.New("the store has not hibernated or resumed")
	}
	loc, err := ParseURL(s.URL)
	if err != nil {
		return Location{}, err
	}
	loc.Endpoint, loc.Region, loc.PathStyle = s.Endpoint, s.Region, s.PathStyle
	return loc, nil
}

// SetLocation records loc as the state's location.
func (s *State) SetLocation(loc Location) {
	s.URL, s.Endpoint, s.Region, s.PathStyle = loc.String(), loc.Endpoint, loc.Region, loc.PathStyle
}

// ReadState returns the state of the store in dir: a new one (new ids)
// if it has none.
func ReadState(dir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return NewState(), nil
	}
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil || s.StoreID == "" || s.Holder == "" {
		return nil, fmt.Errorf("%s: not a hibernate state (%v)", filepath.Join(dir, StateFile), err)
	}
	return &s, nil
}

// WriteState replaces the state of the store in dir, durably.
func WriteState(dir string, s *State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := replaceFile(filepath.Join(dir, StateFile), append(b, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", StateFile, err)
	}
	return nil
}

// replaceFile puts data in place of the file at name (root's, 0600)
// durably: written aside, synced, renamed over it, its directory synced.
// A crash leaves the old file or the new, and maybe a .tmp beside it.
func replaceFile(name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(name))
}

// NewState returns the state of a store that has none: new ids.
func NewState() *State { return &State{StoreID: randomID(), Holder: randomID()} }

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
