// Package sources fills a workspace store from the sources a spec declares
// (git repositories, S3 prefixes, local directories, inline files) and
// fetches lazy S3 files' content when they are first read. It writes into
// the store directly (package wsfs), never through the FUSE mount.
package sources

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// Importer imports a spec's sources into a store.
type Importer struct {
	Store *kv.Store
	Spec  *spec.Spec
	// Owner owns the imported files (the spec's owner overrides it).
	Owner wsfs.Owner
	Log   *slog.Logger
	// Progress, if not nil, reports long imports.
	Progress *Progress
	// HTTPClient carries S3 requests (tests inject faults with it).
	HTTPClient *http.Client
	// ScratchDir holds git clones on their way into the store (default:
	// the system's temporary directory). It should be on local disk.
	ScratchDir string
	// NoGitCLI makes git sources use go-git even where a git binary exists.
	NoGitCLI bool

	fs    *wsfs.FS
	owner wsfs.Owner
}

// Run imports every source in order. It stops at the first error; the
// caller throws away the partly filled store.
func (im *Importer) Run(ctx context.Context) error {
	if im.Log == nil {
		im.Log = slog.Default()
	}
	owner := im.Owner
	if o := im.Spec.Owner; o != nil {
		owner = wsfs.Owner{UID: o.UID, GID: o.GID}
	}
	im.owner = owner
	im.fs = wsfs.New(im.Store, owner)
	im.fs.SetExclusive() // an import fills a new store that nothing else uses
	for i := range im.Spec.Sources {
		src := &im.Spec.Sources[i]
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := im.fs.MkdirAll(path.Dir(src.Path), 0o755); err != nil {
			return fmt.Errorf("source %s: %w", src.Path, err)
		}
		log := im.Log.With("source", src.Path, "kind", src.Kind())
		log.Info("importing")
		var err error
		switch src.Kind() {
		case "git":
			if err = im.importGit(ctx, i, src); err == nil {
				err = im.recordHistory(ctx, i, src, log)
			}
		case "s3":
			err = im.importS3(ctx, i, src)
		case "dir":
			if err = im.importDir(ctx, i, src); err == nil {
				err = im.recordHistory(ctx, i, src, log)
			}
		case "content":
			err = im.importContent(i, src)
		}
		im.Progress.End()
		if err != nil {
			return fmt.Errorf("source %s (%s): %w", src.Path, src.Kind(), err)
		}
		log.Info("imported")
	}
	return nil
}

// importContent writes an inline file.
func (im *Importer) importContent(idx int, src *spec.Source) error {
	mode := uint32(0o644)
	if src.Mode != nil {
		mode = uint32(*src.Mode)
	}
	a, err := im.fs.CreateInode(src.Path, kv.NewInode{Mode: kv.S_IFREG | mode})
	if err != nil {
		return err
	}
	if len(*src.Content) > 0 {
		if _, err := im.Store.Write(a.Ino, 0, []byte(*src.Content)); err != nil {
			return err
		}
	}
	return im.Store.SetOrigin(a.Ino, kv.Origin{Source: uint32(idx)})
}

// importDir copies a local directory tree in.
func (im *Importer) importDir(ctx context.Context, idx int, src *spec.Source) error {
	st, err := os.Stat(src.Dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("dir %s is not a directory", src.Dir)
	}
	im.Progress.Begin(src.Path, "copy", 0, 0)
	return im.copyTree(ctx, src.Dir, src.Path, func(rel string) *kv.Origin {
		return &kv.Origin{Source: uint32(idx), Key: rel}
	})
}

// copyTree copies the directory tree root into the workspace at dst
// (which must not exist): directories, regular files, symbolic links (as
// they are), modes and modification times. Sockets and devices are
// skipped with a warning. origin, if not nil, gives each file's origin.
func (im *Importer) copyTree(ctx context.Context, root, dst string, origin func(rel string) *kv.Origin) error {
	type dirTime struct {
		ino   uint64
		mtime int64
	}
	var dirs []dirTime
	inos := map[string]uint64{}
	buf := make([]byte, 16*kv.ChunkSize) // one copy buffer for every file
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		n := kv.NewInode{Mode: uint32(info.Mode().Perm()), Uid: im.owner.UID, Gid: im.owner.GID}
		if info.Mode()&fs.ModeSetuid != 0 {
			n.Mode |= kv.S_ISUID
		}
		if info.Mode()&fs.ModeSetgid != 0 {
			n.Mode |= kv.S_ISGID
		}
		if info.Mode()&fs.ModeSticky != 0 {
			n.Mode |= kv.S_ISVTX
		}
		if rel == "." {
			a, err := im.fs.CreateInode(dst, kv.NewInode{Mode: kv.S_IFDIR | n.Mode})
			if err != nil {
				return err
			}
			inos["."] = a.Ino
			dirs = append(dirs, dirTime{a.Ino, info.ModTime().UnixNano()})
			return nil
		}
		parent, name := inos[path.Dir(rel)], path.Base(rel)
		if parent == 0 {
			return fmt.Errorf("copy %s: parent not copied", p)
		}
		switch {
		case d.IsDir():
			n.Mode |= kv.S_IFDIR
			a, err := im.Store.Create(parent, name, n)
			if err != nil {
				return fmt.Errorf("copy %s: %w", p, err)
			}
			inos[rel] = a.Ino
			dirs = append(dirs, dirTime{a.Ino, info.ModTime().UnixNano()})
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			n.Mode, n.Target, n.Mtime = kv.S_IFLNK|0o777, target, info.ModTime().UnixNano()
			if origin != nil {
				n.Origin = origin(rel)
			}
			if _, err := im.Store.Create(parent, name, n); err != nil {
				return fmt.Errorf("copy %s: %w", p, err)
			}
		case d.Type().IsRegular():
			n.Mode |= kv.S_IFREG
			size, err := im.copyFile(p, parent, name, n, info.ModTime().UnixNano(), origin, rel, buf)
			if err != nil {
				return fmt.Errorf("copy %s: %w", p, err)
			}
			im.Progress.Add(1, size)
		default:
			im.Log.Warn("skipped a special file", "path", p, "type", d.Type().String())
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Directory times last: adding entries moved them.
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := im.Store.SetAttr(dirs[i].ino, kv.SetAttrRequest{Valid: kv.SetMtime, Mtime: dirs[i].mtime}); err != nil {
			return err
		}
	}
	return nil
}

func (im *Importer) copyFile(src string, parent uint64, name string, n kv.NewInode, mtime int64, origin func(string) *kv.Origin, rel string, buf []byte) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	a, err := im.Store.Create(parent, name, n)
	if err != nil {
		return 0, err
	}
	var off int64
	for {
		n, err := io.ReadFull(in, buf)
		if n > 0 {
			if _, werr := im.Store.Write(a.Ino, off, buf[:n]); werr != nil {
				return off, werr
			}
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return off, err
		}
	}
	if _, err := im.Store.SetAttr(a.Ino, kv.SetAttrRequest{Valid: kv.SetMtime, Mtime: mtime}); err != nil {
		return off, err
	}
	if origin == nil {
		return off, nil
	}
	return off, im.Store.SetOrigin(a.Ino, *origin(rel))
}
