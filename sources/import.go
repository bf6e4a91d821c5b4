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
			err = im.importGit(ctx, i, src)
		case "s3":
			err = im.importS3(ctx, i, src)
		case "dir":
			err = im.importDir(i, src)
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

// importDir copies a local directory tree: directories, regular files,
// symbolic links (as they are), modes and modification times. Sockets and
// devices are skipped with a warning.
func (im *Importer) importDir(idx int, src *spec.Source) error {
	root := src.Dir
	st, err := os.Stat(root)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("dir %s is not a directory", root)
	}
	im.Progress.Begin(src.Path, "copy", 0, 0)
	var dirs []struct {
		path  string
		mtime int64
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		dst := path.Join(src.Path, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := uint32(info.Mode().Perm())
		mtime := info.ModTime().UnixNano()
		origin := &kv.Origin{Source: uint32(idx), Key: filepath.ToSlash(rel)}
		switch {
		case d.IsDir():
			if _, err := im.fs.CreateInode(dst, kv.NewInode{Mode: kv.S_IFDIR | mode}); err != nil {
				return err
			}
			dirs = append(dirs, struct {
				path  string
				mtime int64
			}{dst, mtime})
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if _, err := im.fs.CreateInode(dst, kv.NewInode{Mode: kv.S_IFLNK | 0o777, Target: target, Mtime: mtime, Origin: origin}); err != nil {
				return err
			}
		case d.Type().IsRegular():
			n, err := im.copyFile(p, dst, mode, mtime, origin)
			if err != nil {
				return err
			}
			im.Progress.Add(1, n)
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
		ino, _, err := im.fs.Resolve(dirs[i].path)
		if err == nil {
			_, err = im.Store.SetAttr(ino, kv.SetAttrRequest{Valid: kv.SetMtime, Mtime: dirs[i].mtime})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (im *Importer) copyFile(src, dst string, mode uint32, mtime int64, origin *kv.Origin) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	a, err := im.fs.CreateInode(dst, kv.NewInode{Mode: kv.S_IFREG | mode})
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 16*kv.ChunkSize)
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
	return off, im.Store.SetOrigin(a.Ino, *origin)
}
