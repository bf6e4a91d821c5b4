package hibernate

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// An image is made by whoever can write its bucket: another tenant of
// the bucket, or an agent whose workspace writes back to it. Its
// manifest names every byte of the store (chunks by their sha256), and
// the store holds the workspace's spec (sources' URLs, credentials'
// environment variables and key files, policy), its agent identity, its
// owners and the state of its checks: a resume trusts all of that. So a
// manifest is signed, HMAC-SHA256 with a key the operator's hosts share
// and no agent can read, over the image's bucket and prefix and the
// manifest's bytes; a resume refuses a manifest without a valid
// signature before it parses it. The signature travels as the manifest
// object's metadata (MACMeta).

// MACMeta is the manifest object's metadata key that holds its signature
// (x-amz-meta-computerfs-mac).
const MACMeta = "computerfs-mac"

// ErrUnsigned: the manifest has no signature, or one that this host's key
// did not make (forged, altered, or moved from another location).
var ErrUnsigned = errors.New("the image is not signed with this host's image key (written by someone who does not hold it, altered, or copied from another location)")

// DefaultKeyFile is where a host keeps its image key (root's, mode 0600).
// The environment variable COMPUTERFS_IMAGE_KEY replaces it.
const DefaultKeyFile = "/var/lib/computerfs/image-key"

const keyBytes = 32

// KeyFile returns path, else $COMPUTERFS_IMAGE_KEY, else DefaultKeyFile.
func KeyFile(path string) string {
	if path != "" {
		return path
	}
	if p := os.Getenv("COMPUTERFS_IMAGE_KEY"); p != "" {
		return p
	}
	return DefaultKeyFile
}

// LoadKey reads the image key at path. It must be a regular file of the
// process's user that no one else can read or write.
func LoadKey(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no image key at %s: a resume trusts only images signed with this host's key (copy the key of the host that hibernated the workspace there, mode 0600, or give --image-key): %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("image key: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("image key: %w", err)
	}
	sys, _ := info.Sys().(*syscall.Stat_t)
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o077 != 0 || sys == nil || int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("image key %s: must be a regular file of this user, mode 0600 (is %v)", path, info.Mode())
	}
	b := make([]byte, 2*keyBytes+2)
	n, _ := f.Read(b)
	key, err := hex.DecodeString(string(trimNL(b[:n])))
	if err != nil || len(key) != keyBytes {
		return nil, fmt.Errorf("image key %s: want %d hex digits", path, 2*keyBytes)
	}
	return key, nil
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// LoadOrCreateKey reads the image key at path, or makes one (random,
// mode 0600) if there is none. Of several processes that make it at once,
// all end up with the same.
func LoadOrCreateKey(path string) ([]byte, error) {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("image key: %w", err)
		}
		key := make([]byte, keyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		tmp, err := os.CreateTemp(filepath.Dir(path), ".image-key-*")
		if err != nil {
			return nil, fmt.Errorf("image key: %w", err)
		}
		_, err = tmp.WriteString(hex.EncodeToString(key) + "\n")
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			// A link never replaces: whoever came first made the key.
			if err = os.Link(tmp.Name(), path); errors.Is(err, os.ErrExist) {
				err = nil
			}
		}
		os.Remove(tmp.Name())
		if err != nil {
			return nil, fmt.Errorf("image key: %w", err)
		}
	}
	return LoadKey(path)
}

// Sign returns the signature key makes of manifest bytes b at loc (the
// manifest object's metadata MACMeta).
func Sign(key []byte, loc Location, b []byte) string { return sign(key, loc, b) }

// sign returns the signature of manifest bytes b at loc.
func sign(key []byte, loc Location, b []byte) string { return signAs(Format, key, loc, b) }

// leaseFormat separates a lease's signature from a manifest's: one is
// never taken for the other.
const leaseFormat = "computerfs-lease"

// signAs returns the signature of bytes b of the kind what at loc.
func signAs(what string, key []byte, loc Location, b []byte) string {
	h := hmac.New(sha256.New, key)
	fmt.Fprintf(h, "%s\x00%d:%s\x00%d:%s\x00", what, len(loc.Bucket), loc.Bucket, len(loc.Prefix), loc.Prefix)
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// verify checks the signature mac of manifest bytes b at loc.
func verify(key []byte, loc Location, b []byte, mac string) error {
	if !verifyAs(Format, key, loc, b, mac) {
		return fmt.Errorf("%s: %w", loc, ErrUnsigned)
	}
	return nil
}

// verifyAs reports whether mac is key's signature of bytes b of the kind
// what at loc.
func verifyAs(what string, key []byte, loc Location, b []byte, mac string) bool {
	got, err := hex.DecodeString(mac)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	want, _ := hex.DecodeString(signAs(what, key, loc, b))
	return hmac.Equal(got, want)
}
