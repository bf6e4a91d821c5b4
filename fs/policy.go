package fs

import (
	"syscall"

	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/policy"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// AgentRules are path rules (a spec's deny, read_only_paths and read_only)
// that the mount enforces on the requests of the agent: the programs of
// the workspace's sandbox. Other callers (root, the operator) are not
// bound. See package policy for what each rule covers.
//
// The kernel caches names and attributes for every caller alike, so the
// rules are enforced where requests always reach the daemon: LOOKUP (a
// denied name is never cached: its entry, positive or negative, has a
// timeout of 0, so the agent's every path walk through it asks again and
// gets EACCES), OPEN and CREATE, every change (MKNOD, MKDIR, SYMLINK,
// LINK, UNLINK, RMDIR, RENAME, SETATTR, SETXATTR, REMOVEXATTR, TMPFILE),
// READLINK, GETXATTR, LISTXATTR and READDIR. The agent's listings leave
// denied names out: with deny rules, directories are opened without the
// kernel's listing cache, so that each caller's listing is its own (see
// OpenDir).
type AgentRules struct {
	// Is tells whether a request's caller uid is the agent's. Root's
	// requests (uid 0) are never bound.
	Is     func(uid uint32) bool
	Policy *policy.Checker
}

// agentRules returns cfg's rules, or nil if there is nothing to enforce.
func agentRules(cfg *Config) *AgentRules {
	if cfg.Agent == nil || cfg.Agent.Is == nil || !cfg.Agent.Policy.Active() {
		return nil
	}
	return cfg.Agent
}

// rules are the agent's rules, or nil.
func (f *FS) rules() *policy.Checker {
	if f.agent == nil {
		return nil
	}
	return f.agent.Policy
}

// bound tells whether the request h is bound by the agent's rules.
func (f *FS) bound(h *fuse.InHeader) bool {
	return f.agent != nil && h.Uid != 0 && f.agent.Is(h.Uid)
}

// entryPath is the store path of name in the directory dir.
func (f *FS) entryPath(dir uint64, name string) (string, error) {
	dp, err := f.rules().DirPath(f.store, dir)
	if err != nil {
		return "", err
	}
	return policy.Join(dp, name), nil
}

// lookupDenied tells whether name in dir is denied, for LOOKUP: refused
// to the agent, and never cached for anyone.
func (f *FS) lookupDenied(dir uint64, name string) (bool, error) {
	if !f.rules().HasDeny() {
		return false, nil
	}
	p, err := f.entryPath(dir, name)
	if err != nil {
		return false, err
	}
	return f.agent.Policy.Denied(p) != nil, nil
}

// checkEntry refuses the agent's change of name in dir: creating,
// removing or renaming it.
func (f *FS) checkEntry(h *fuse.InHeader, dir uint64, name string) error {
	if !f.bound(h) {
		return nil
	}
	if f.agent.Policy.ReadOnly() {
		return f.agent.Policy.Write("/")
	}
	p, err := f.entryPath(dir, name)
	if err != nil {
		return err
	}
	return f.agent.Policy.Write(p)
}

// checkUnlink refuses the agent's removal of name from dir: a change of
// that path, and of the file's other names if it has some.
func (f *FS) checkUnlink(h *fuse.InHeader, dir uint64, name string) error {
	if err := f.checkEntry(h, dir, name); err != nil || !f.bound(h) {
		return err
	}
	if a, err := f.store.Lookup(dir, name); err == nil && a.Nlink > 1 && !a.IsDir() {
		return f.agent.Policy.Ino(f.store, a.Ino, true)
	}
	return nil
}

// checkIno refuses the agent's read (or change, with write) of ino when a
// rule covers any of its names.
func (f *FS) checkIno(h *fuse.InHeader, ino uint64, write bool) error {
	if !f.bound(h) {
		return nil
	}
	return f.agent.Policy.Ino(f.store, ino, write)
}

// checkAttr is checkIno for the inode whose attributes are a.
func (f *FS) checkAttr(h *fuse.InHeader, a *kv.Attr, write bool) error {
	if !f.bound(h) {
		return nil
	}
	return f.agent.Policy.InoAttr(f.store, a, write)
}

// checkRename refuses the agent's rename of oldName in oldDir to newName
// in newDir (RENAME_EXCHANGE in flags: both ways).
func (f *FS) checkRename(h *fuse.InHeader, oldDir uint64, oldName string, newDir uint64, newName string, flags uint32) error {
	if !f.bound(h) {
		return nil
	}
	src, err := f.store.Lookup(oldDir, oldName)
	if err != nil {
		return err
	}
	from, err := f.entryPath(oldDir, oldName)
	if err != nil {
		return err
	}
	to, err := f.entryPath(newDir, newName)
	if err != nil {
		return err
	}
	exchange := flags&renameExchange != 0
	var dst kv.Attr
	if exchange {
		if dst, err = f.store.Lookup(newDir, newName); err != nil {
			return err
		}
		if err := f.agent.Policy.Ino(f.store, dst.Ino, true); err != nil {
			return err
		}
	}
	return f.agent.Policy.Rename(f.store, from, src.Ino, src.IsDir(), to, exchange, dst.Ino, dst.IsDir())
}

// renameExchange is RENAME_EXCHANGE.
const renameExchange = 2

// openWrites tells whether open flags can change the file.
func openWrites(flags uint32) bool {
	return flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC) != 0
}
