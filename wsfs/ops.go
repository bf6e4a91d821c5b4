package wsfs

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/computerfs/computerfs/kv"
)

// Mkdir makes the directory p with permission bits perm (less the umask).
func (f *FS) Mkdir(p string, perm uint32) error {
	_, err := f.create(p, kv.NewInode{Mode: kv.S_IFDIR | perm&0o7777&^f.umask})
	return pathErr("mkdir", p, err)
}

// MkdirAll makes p and any missing parents, as mkdir -p does. A path that
// exists and is a directory (or a link to one) is fine.
func (f *FS) MkdirAll(p string, perm uint32) error {
	if a, err := f.Stat(p); err == nil {
		if !a.IsDir() {
			return pathErr("mkdir", p, syscall.ENOTDIR)
		}
		return nil
	}
	names := split(p)
	cur := ""
	for _, n := range names {
		cur += "/" + n
		a, err := f.Stat(cur)
		if err == nil {
			if !a.IsDir() {
				return pathErr("mkdir", cur, syscall.ENOTDIR)
			}
			continue
		}
		if err := f.Mkdir(cur, perm); err != nil && !errors.Is(err, syscall.EEXIST) {
			return err
		}
	}
	return nil
}

// create makes a new inode at p, which must not exist.
func (f *FS) create(p string, n kv.NewInode) (kv.Attr, error) {
	r, err := f.lookup(p, false, true)
	if err != nil {
		return kv.Attr{}, err
	}
	if r.ino != 0 {
		return kv.Attr{}, syscall.EEXIST
	}
	return f.kvCreate(r.dir, r.name, f.newInode(n))
}

// newInode gives n the FS's owner unless it names one.
func (f *FS) newInode(n kv.NewInode) kv.NewInode {
	if n.Uid == 0 && n.Gid == 0 {
		n.Uid, n.Gid = f.owner.UID, f.owner.GID
	}
	return n
}

// CreateInode makes an inode of any kind at p as n describes (imports use
// it for remote files and to set times and origins in one step). n's
// owner defaults to the FS's owner.
func (f *FS) CreateInode(p string, n kv.NewInode) (kv.Attr, error) {
	a, err := f.create(p, n)
	return a, pathErr("create", p, err)
}

// Symlink makes a symbolic link at link that points to target.
func (f *FS) Symlink(target, link string) error {
	_, err := f.create(link, kv.NewInode{Mode: kv.S_IFLNK | 0o777, Target: target})
	return pathErr("symlink", link, err)
}

// Readlink returns the target of the symbolic link p.
func (f *FS) Readlink(p string) (string, error) {
	r, err := f.lookup(p, false, false)
	if err != nil {
		return "", pathErr("readlink", p, err)
	}
	if r.attr.Mode&kv.S_IFMT != kv.S_IFLNK {
		return "", pathErr("readlink", p, syscall.EINVAL)
	}
	t, err := f.s.Readlink(r.ino)
	return t, pathErr("readlink", p, err)
}

// Link makes newname another name of the file oldname (not a directory).
func (f *FS) Link(oldname, newname string) error {
	src, err := f.lookup(oldname, false, false)
	if err != nil {
		return pathErr("link", oldname, err)
	}
	if src.attr.IsDir() {
		return pathErr("link", oldname, syscall.EPERM)
	}
	dst, err := f.lookup(newname, false, true)
	if err != nil {
		return pathErr("link", newname, err)
	}
	if dst.ino != 0 {
		return pathErr("link", newname, syscall.EEXIST)
	}
	err = f.kvLink(src.ino, dst.dir, dst.name)
	return pathErr("link", newname, err)
}

// Remove removes the file or empty directory p (symbolic links themselves,
// not their targets).
func (f *FS) Remove(p string) error {
	r, err := f.lookup(p, false, true)
	if err == nil && r.ino == 0 {
		err = syscall.ENOENT
	}
	if err != nil {
		return pathErr("remove", p, err)
	}
	if r.attr.IsDir() {
		f.forgetDirs()
		err = f.kvRmdir(r.dir, r.name)
	} else {
		err = f.kvUnlink(r.dir, r.name)
	}
	return pathErr("remove", p, err)
}

// RemoveAll removes p and everything under it, as rm -rf does. A missing p
// is not an error.
func (f *FS) RemoveAll(p string) error { return f.RemoveAllContext(context.Background(), p) }

// RemoveAllContext is RemoveAll that stops, with ctx's error, when ctx
// ends (what it removed by then stays removed).
func (f *FS) RemoveAllContext(ctx context.Context, p string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	r, err := f.lookup(p, false, true)
	if err != nil {
		return pathErr("remove", p, err)
	}
	if r.ino == 0 {
		return nil
	}
	if r.attr.IsDir() {
		f.forgetDirs()
		if err := f.removeTree(ctx, r.ino); err != nil {
			return pathErr("remove", p, err)
		}
		return pathErr("remove", p, f.kvRmdir(r.dir, r.name))
	}
	return pathErr("remove", p, f.kvUnlink(r.dir, r.name))
}

// removeTree empties the directory dir, in batches so that a huge directory
// is never held in memory. It keeps the directories it is inside on a
// stack of its own, not Go's: the agent makes trees of any depth (a
// chain of a million directories through the mount), and a recursion a
// level deep on each would end the daemon with a fatal stack overflow.
// The stack holds an entry (two inodes and a name) for each directory
// of a batch still to remove: at most 1,024 a level.
func (f *FS) removeTree(ctx context.Context, dir uint64) error {
	type level struct {
		dir, parent uint64 // parent: where dir is named name (0 for the top)
		name        string
	}
	stack := []level{{dir: dir}}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		top := &stack[len(stack)-1]
		var batch []kv.Dirent
		err := f.s.ReadDir(top.dir, "", func(d kv.Dirent) bool {
			batch = append(batch, d)
			return len(batch) < 1024
		})
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			// empty: remove it from its parent and go back up
			done := *top
			stack = stack[:len(stack)-1]
			if done.parent != 0 {
				if err := f.kvRmdir(done.parent, done.name); err != nil && err != kv.ErrNotFound {
					return err
				}
			}
			continue
		}
		// Files go now; the batch's directories are emptied and removed
		// first (they go on the stack above this one, which is read
		// again once they are gone).
		parent := top.dir
		for _, d := range batch {
			if d.Type == kv.S_IFDIR {
				stack = append(stack, level{dir: d.Ino, parent: parent, name: d.Name})
				continue
			}
			if err := f.kvUnlink(parent, d.Name); err != nil && err != kv.ErrNotFound {
				return err
			}
		}
	}
	return nil
}

// Rename renames oldpath to newpath, replacing a file or an empty directory
// there, as rename(2) does.
func (f *FS) Rename(oldpath, newpath string) error {
	src, err := f.lookup(oldpath, false, true)
	if err == nil && src.ino == 0 {
		err = syscall.ENOENT
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: kv.Errno(err)}
	}
	dst, err := f.lookup(newpath, false, true)
	if err == nil {
		if src.attr.IsDir() || dst.attr.IsDir() {
			f.forgetDirs()
		}
		err = f.kvRename(src.dir, src.name, dst.dir, dst.name)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: kv.Errno(err)}
	}
	return nil
}

// Chmod sets the permission bits of p (following symbolic links).
func (f *FS) Chmod(p string, mode uint32) error {
	return f.setattr("chmod", p, true, kv.SetAttrRequest{Valid: kv.SetMode, Mode: mode & 0o7777})
}

// Lchown sets the owner and group of p itself.
func (f *FS) Lchown(p string, uid, gid uint32) error {
	return f.setattr("lchown", p, false, kv.SetAttrRequest{Valid: kv.SetUid | kv.SetGid, Uid: uid, Gid: gid})
}

// Chtimes sets the access and modification times of p.
func (f *FS) Chtimes(p string, atime, mtime time.Time) error {
	return f.setattr("chtimes", p, true, kv.SetAttrRequest{Valid: kv.SetAtime | kv.SetMtime,
		Atime: atime.UnixNano(), Mtime: mtime.UnixNano()})
}

// Truncate sets the size of the regular file p.
func (f *FS) Truncate(p string, size int64) error {
	if size < 0 {
		return pathErr("truncate", p, syscall.EINVAL)
	}
	return f.setattr("truncate", p, true, kv.SetAttrRequest{Valid: kv.SetSize, Size: uint64(size)})
}

func (f *FS) setattr(op, p string, follow bool, req kv.SetAttrRequest) error {
	r, err := f.lookup(p, follow, false)
	if err == nil {
		_, err = f.kvSetAttr(r.ino, req)
	}
	return pathErr(op, p, err)
}

// ReadDir calls fn for each entry of the directory p in name order,
// streaming (a huge directory is never held in memory), until fn returns
// false. after resumes a listing after that name.
func (f *FS) ReadDir(p, after string, fn func(kv.Dirent) bool) error {
	r, err := f.lookup(p, true, false)
	if err == nil && !r.attr.IsDir() {
		err = syscall.ENOTDIR
	}
	if err == nil {
		err = f.mayReadAttr(&r.attr)
	}
	if err == nil {
		err = f.s.ReadDir(r.ino, after, f.guardList(r.gpath, fn))
	}
	return pathErr("readdir", p, err)
}

// ReadFile returns the content of the file p.
func (f *FS) ReadFile(p string) ([]byte, error) {
	file, err := f.Open(p, O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	a, err := f.s.GetAttr(file.ino)
	if err != nil {
		return nil, pathErr("read", p, err)
	}
	buf := make([]byte, a.Size)
	n, _, err := f.s.Read(file.ino, 0, buf)
	return buf[:n], pathErr("read", p, err)
}

// WriteFile makes data the content of p, creating it with perm (less the
// umask) if missing, in one change of the store: readers, and the store
// after a crash, see the old content or the new, never a part of it.
func (f *FS) WriteFile(p string, data []byte, perm uint32) error {
	_, err := f.writeWhole(p, data, perm)
	return pathErr("write", p, err)
}
