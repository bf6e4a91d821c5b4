package kv

import "encoding/binary"

// Key prefixes and per-inode key kinds; see the package comment.
const (
	pfxMeta    = 'M'
	pfxInode   = 'I'
	pfxOrphan  = 'O'
	pfxJournal = 'J'
	pfxAudit   = 'A'

	kindAttr    = 'a'
	kindChunk   = 'c'
	kindDirent  = 'd'
	kindLink    = 'l'
	kindOrigin  = 'o'
	kindBackref = 'p'
	kindXattr   = 'x'
)

// Meta keys.
var (
	keyFormat  = []byte{pfxMeta, 'f', 'o', 'r', 'm', 'a', 't'}
	keyNextIno = []byte{pfxMeta, 'n', 'e', 'x', 't', 'i', 'n', 'o'}
	keyInodes  = []byte{pfxMeta, 'i', 'n', 'o', 'd', 'e', 's'}
)

// inodePrefix is 'I' ino: every key of the inode starts with it.
func inodePrefix(ino uint64) []byte {
	k := make([]byte, 9, 9+1+8+256)
	k[0] = pfxInode
	binary.BigEndian.PutUint64(k[1:], ino)
	return k
}

// inodeEnd is the first key after every key of ino.
func inodeEnd(ino uint64) []byte { return inodePrefix(ino + 1) }

func attrKey(ino uint64) []byte { return append(inodePrefix(ino), kindAttr) }
func linkKey(ino uint64) []byte { return append(inodePrefix(ino), kindLink) }

func chunkKey(ino, chunk uint64) []byte {
	return binary.BigEndian.AppendUint64(append(inodePrefix(ino), kindChunk), chunk)
}

func direntKey(dir uint64, name string) []byte {
	return append(append(inodePrefix(dir), kindDirent), name...)
}

// kindPrefix is 'I' ino kind: the prefix of all keys of one kind of ino.
func kindPrefix(ino uint64, kind byte) []byte { return append(inodePrefix(ino), kind) }

func backrefKey(ino, parent uint64, name string) []byte {
	k := binary.BigEndian.AppendUint64(append(inodePrefix(ino), kindBackref), parent)
	return append(k, name...)
}

func xattrKey(ino uint64, name string) []byte {
	return append(append(inodePrefix(ino), kindXattr), name...)
}

func originKey(ino uint64) []byte { return append(inodePrefix(ino), kindOrigin) }

// userMetaKey is the meta key of a value that a layer above the store keeps.
func userMetaKey(name string) []byte { return append([]byte{pfxMeta, 'u', ':'}, name...) }

func orphanKey(ino uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pfxOrphan}, ino)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Directory entry values: child ino and the S_IFMT type bits >> 12.
func encodeDirent(ino uint64, mode uint32) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 9), ino)
	return append(v, byte((mode&S_IFMT)>>12))
}

func decodeDirent(v []byte) (ino uint64, typ uint32, err error) {
	if len(v) != 9 {
		return 0, 0, corrupt("dirent value of %d bytes", len(v))
	}
	return binary.BigEndian.Uint64(v), uint32(v[8]) << 12, nil
}
