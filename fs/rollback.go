package fs

import (
	"slices"

	"github.com/computerfs/computerfs/kv"
)

// Rollback of the mounted store (kv.Store.RollbackWith). The store becomes
// the snapshot's while the kernel holds names, attributes, pages and open
// files of the old state; programs must see errors or the old state, never
// a mix:
//
//   - Every handle opened before the rollback is stale: handle numbers
//     only grow, so one atomic load (staleFh) tells, and each request on a
//     stale handle (read, write, fsync, fallocate, lseek, ftruncate, fstat,
//     copy_file_range) fails with EIO. Directories have no handles (OPENDIR
//     is answered ENOSYS, see dir.go).
//   - Passthrough handles are the kernel's: it reads and writes the blob
//     file it was given, which the rollback moved aside with the old
//     blobs/ and removed, so those writes land where nothing reads. Their
//     backing ids stay registered until their last release (ptStale), and
//     the kernel wants every open of an inode open for passthrough to use
//     its backing file: an open of such an inode fails with EIO until the
//     old handles are closed.
//   - The kernel's caches: the attributes and pages of every inode it knows
//     are dropped, and in every directory it knows, the names whose entry
//     differs between the old state and the new (including names only one
//     of them has: a cached negative entry may hide a file of the
//     snapshot). A reply sent from the old state just before the rollback
//     may reach the kernel after that, so the caller does the same again
//     a moment later (Rollback's again).
//
// Opens and releases take rollMu for reading around their store calls;
// the rollback takes it for writing from the moment its fork is ready, so
// no open is between the store and its handle while the handles are
// marked.

// stale tells whether fh is a handle opened before the last rollback.
func (f *FS) stale(fh uint64) bool { return fh != 0 && fh <= f.staleFh.Load() }

// Rollback puts the store back to its snapshot name under the mount. If it
// happened, again drops the kernel's caches of the old state once more:
// the caller calls it a moment later (a second), while the store is open.
func (f *FS) Rollback(name string) (info kv.RollbackInfo, again func(), err error) {
	var (
		locked bool
		known  []uint64
		old    map[uint64][]kv.Dirent
	)
	info, err = f.store.RollbackWith(name, kv.RollbackHooks{
		Ready: func() {
			f.rollMu.Lock()
			locked = true
		},
		Held: func(l kv.Listing) { known, old = f.rolledBack(l) },
	})
	if locked {
		f.rollMu.Unlock()
	}
	if old == nil || f.server == nil {
		return info, nil, err
	}
	f.invalidate(known, old)
	return info, func() { f.invalidate(known, old) }, err
}

// rolledBack marks the handles opened so far stale and reads, from the old
// state, the entries of the directories the kernel knows. Every store call
// is held off, and every open and release.
func (f *FS) rolledBack(l kv.Listing) ([]uint64, map[uint64][]kv.Dirent) {
	f.mu.Lock()
	f.staleFh.Store(f.nextFh)
	known := make([]uint64, 0, len(f.lookups)+1)
	known = append(known, kv.RootIno)
	for ino := range f.lookups {
		if ino != kv.RootIno {
			known = append(known, ino)
		}
	}
	f.mu.Unlock()
	f.ptMapMu.Lock()
	for ino, pf := range f.pt {
		if s := f.ptStale[ino]; s != nil { // a second rollback: one backing file per inode
			s.n += pf.n
			continue
		}
		f.ptStale[ino] = pf
	}
	f.pt = make(map[uint64]*ptFile)
	f.ptMapMu.Unlock()
	f.cursors.mu.Lock()
	f.cursors.dirs = nil
	f.cursors.mu.Unlock()
	old := make(map[uint64][]kv.Dirent)
	for _, ino := range known {
		var ents []kv.Dirent
		if err := l.Entries(ino, func(d kv.Dirent) bool { ents = append(ents, d); return true }); err != nil {
			f.log.Error("fuse: rollback: listing a directory of the old state", "ino", ino, "err", err)
		}
		if len(ents) > 0 {
			old[ino] = ents
		}
	}
	return known, old
}

// invalidate drops the kernel's attributes and pages of the inodes in
// known, and the names of the directories among them whose entry is not
// the same in old and in the store now.
func (f *FS) invalidate(known []uint64, old map[uint64][]kv.Dirent) {
	for _, ino := range known {
		f.server.InodeNotify(ino, 0, 0) // ENOENT for one the kernel forgot: nothing to drop
		before := old[ino]
		seen := make(map[string]bool, len(before))
		err := f.store.ReadDir(ino, "", func(d kv.Dirent) bool {
			i, found := slices.BinarySearchFunc(before, d.Name, func(e kv.Dirent, name string) int {
				switch {
				case e.Name < name:
					return -1
				case e.Name > name:
					return 1
				}
				return 0
			})
			if found {
				seen[d.Name] = true
				if before[i].Ino == d.Ino {
					return true
				}
			}
			f.server.EntryNotify(ino, d.Name)
			return true
		})
		if err != nil {
			f.log.Error("fuse: rollback: listing a directory", "ino", ino, "err", err)
		}
		for _, e := range before {
			if !seen[e.Name] {
				f.server.EntryNotify(ino, e.Name)
			}
		}
	}
}

// releaseStale ends a handle opened before the last rollback: a
// passthrough one gives back its old backing id at its inode's last; the
// store has nothing of it to record.
func (f *FS) releaseStale(h *handle) {
	if !h.pt {
		return
	}
	defer f.ptLock(h.ino)()
	f.ptMapMu.Lock()
	pf := f.ptStale[h.ino]
	done := pf != nil && pf.n <= 1
	if pf != nil {
		pf.n--
	}
	if done {
		delete(f.ptStale, h.ino)
	}
	f.ptMapMu.Unlock()
	if done {
		if errno := f.server.UnregisterBackingFd(pf.id); errno != 0 {
			f.log.Warn("fuse: releasing a backing file failed", "ino", h.ino, "errno", errno)
		}
	}
}

// ptStaleOpen tells whether ino still has passthrough handles from before
// the last rollback, which the kernel would not let a new open join.
func (f *FS) ptStaleOpen(ino uint64) bool {
	f.ptMapMu.Lock()
	defer f.ptMapMu.Unlock()
	return f.ptStale[ino] != nil
}
