package kv

import (
	"encoding/binary"
	"time"
)

// File type bits of Attr.Mode, as in stat(2).
const (
	S_IFMT   = 0o170000
	S_IFSOCK = 0o140000
	S_IFLNK  = 0o120000
	S_IFREG  = 0o100000
	S_IFBLK  = 0o060000
	S_IFDIR  = 0o040000
	S_IFCHR  = 0o020000
	S_IFIFO  = 0o010000
	S_ISUID  = 0o4000
	S_ISGID  = 0o2000
	S_ISVTX  = 0o1000
)

// Attr is an inode's attributes. Times are nanoseconds since the Unix epoch.
type Attr struct {
	Ino    uint64
	Mode   uint32 // type and permission bits
	Nlink  uint32
	Uid    uint32
	Gid    uint32
	Rdev   uint32
	Size   uint64
	Blocks uint64 // 512-byte blocks holding data
	Atime  int64
	Mtime  int64
	Ctime  int64
	Btime  int64
	Flags  uint32 // FlagRemote, FlagBlob, FlagWriting, FlagNoXattrs
}

// Attr.Flags bits.
const (
	// FlagRemote marks a regular file whose content is still at its source
	// (a lazy S3 object): the store holds its size but no data, and the
	// first access to the data fetches it (see SetFetcher).
	FlagRemote = 1 << 0
	// FlagBlob marks a regular file whose data is in a file of its own
	// under the store's blobs/ directory, not in chunks (see blob.go).
	FlagBlob = 1 << 1
	// FlagNoXattrs (1 << 3; 1 << 2 is FlagWriting) marks an inode that has
	// had no extended attribute since it was made: SetXattr clears it in
	// the batch that writes the first one. Its keys are then known from its
	// attributes, and deleting it needs no scan (deleteInode).
	FlagNoXattrs = 1 << 3
)

// IsDir reports whether the inode is a directory.
func (a *Attr) IsDir() bool { return a.Mode&S_IFMT == S_IFDIR }

// IsRegular reports whether the inode is a regular file.
func (a *Attr) IsRegular() bool { return a.Mode&S_IFMT == S_IFREG }

// Attribute records are versioned on their own: version 1 had no flags.
const (
	attrVersion = 2
	attrLenV1   = 1 + 8 + 5*4 + 2*8 + 4*8
	attrLen     = attrLenV1 + 4
)

func (a *Attr) encode() []byte {
	b := make([]byte, 0, attrLen)
	b = append(b, attrVersion)
	b = binary.BigEndian.AppendUint64(b, a.Ino)
	for _, v := range []uint32{a.Mode, a.Nlink, a.Uid, a.Gid, a.Rdev} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	b = binary.BigEndian.AppendUint64(b, a.Size)
	b = binary.BigEndian.AppendUint64(b, a.Blocks)
	for _, v := range []int64{a.Atime, a.Mtime, a.Ctime, a.Btime} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return binary.BigEndian.AppendUint32(b, a.Flags)
}

func decodeAttr(b []byte) (Attr, error) {
	if !(len(b) == attrLen && b[0] == attrVersion || len(b) == attrLenV1 && b[0] == 1) {
		return Attr{}, corrupt("attribute record of %d bytes, version %d", len(b), firstByte(b))
	}
	var a Attr
	a.Ino = binary.BigEndian.Uint64(b[1:])
	u := b[9:]
	a.Mode, a.Nlink, a.Uid, a.Gid, a.Rdev = binary.BigEndian.Uint32(u), binary.BigEndian.Uint32(u[4:]),
		binary.BigEndian.Uint32(u[8:]), binary.BigEndian.Uint32(u[12:]), binary.BigEndian.Uint32(u[16:])
	u = u[20:]
	a.Size, a.Blocks = binary.BigEndian.Uint64(u), binary.BigEndian.Uint64(u[8:])
	u = u[16:]
	a.Atime, a.Mtime = int64(binary.BigEndian.Uint64(u)), int64(binary.BigEndian.Uint64(u[8:]))
	a.Ctime, a.Btime = int64(binary.BigEndian.Uint64(u[16:])), int64(binary.BigEndian.Uint64(u[24:]))
	if b[0] >= 2 {
		a.Flags = binary.BigEndian.Uint32(u[32:])
	}
	return a, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// now is the clock for timestamps; tests may replace it.
var now = func() int64 { return time.Now().UnixNano() }
