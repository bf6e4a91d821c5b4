package computerfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/computerfs/computerfs/internal/agentid"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/sandbox"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

// Agent is a workspace's agent identity: the host uid and gid that own
// everything the agent writes, through the shell fast path, the tools, the
// sandbox (which runs as it) and the mount. Each workspace has its own.
type Agent struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
	// Block is, for an agent named by the spec or a flag (outside the
	// range agents are allocated from), 1 + the index of the sandbox id
	// block the registry gave it (agentid.BlockBase): its sandboxes' ids
	// are its own as an allocated agent's are. 0: none (an agent of the
	// range, whose block follows from its uid, or a daemon that is not
	// root, whose sandboxes map no other ids).
	Block uint32 `json:"block,omitempty"`
}

// same says whether a and b are the same uid and gid (whatever their
// sandbox blocks).
func (a Agent) same(b Agent) bool { return a.UID == b.UID && a.GID == b.GID }

func (a Agent) String() string { return fmt.Sprintf("%d:%d", a.UID, a.GID) }

func (a Agent) owner() wsfs.Owner { return wsfs.Owner{UID: a.UID, GID: a.GID} }

// The range agent identities are allocated from: uid and gid
// AgentBase+N for the Nth workspace, N < AgentCount (see
// internal/agentid), skipping ids that the host's user or group database
// knows.
const (
	AgentBase  = agentid.Base // 1879048192
	AgentCount = agentid.Count
)

// sandboxIDs is the id block of the agent's sandboxes: its own, for an
// agent allocated from the range (agentid.SandboxBlock) and for a named
// one the registry gave a block (Block); the shared one
// (sandbox.SharedIDs) only for an agent with neither (a daemon that is not
// root).
func (a Agent) sandboxIDs() sandbox.IDs {
	if base, n, ok := agentid.SandboxBlock(a.UID); ok {
		return sandbox.IDs{Base: base, Count: n}
	}
	if base, n, ok := agentid.BlockBase(a.Block); ok {
		return sandbox.IDs{Base: base, Count: n}
	}
	return sandbox.SharedIDs
}

// DefaultAgentsDir is the host-wide registry of allocated agent
// identities: one file per uid, named by it, holding the store directory
// it belongs to. The environment variable COMPUTERFS_AGENTS_DIR replaces
// it (tests).
const DefaultAgentsDir = agentid.DefaultRegistry

func agentsDir(dir string) string { return agentid.Registry(dir) }

// metaAgent is the store's meta key of its agent identity (JSON).
const metaAgent = "agent"

// storedAgent returns the agent identity recorded in the store.
func storedAgent(st *kv.Store) (Agent, bool, error) {
	b, err := st.GetMeta(metaAgent)
	if err == kv.ErrNotFound {
		return Agent{}, false, nil
	}
	if err != nil {
		return Agent{}, false, err
	}
	var a Agent
	if err := json.Unmarshal(b, &a); err != nil {
		return Agent{}, false, fmt.Errorf("store's agent identity: %w", err)
	}
	return a, true, nil
}

func recordAgent(st *kv.Store, a Agent) error {
	b, _ := json.Marshal(a)
	return st.SetMeta(metaAgent, b)
}

// checkAgent refuses identities an agent must never have.
func checkAgent(a Agent) error {
	switch {
	case a.UID == 0 || a.GID == 0:
		return fmt.Errorf("agent %s: the agent is never root", a)
	case a.UID == 1<<32-1 || a.GID == 1<<32-1:
		return fmt.Errorf("agent %s: uid and gid must be below 4294967295", a)
	}
	return nil
}

// ParseAgent reads "UID:GID" (or "UID", the gid then the same number).
func ParseAgent(s string) (Agent, error) {
	u, g, ok := strings.Cut(s, ":")
	if !ok {
		g = u
	}
	uid, err1 := strconv.ParseUint(u, 10, 32)
	gid, err2 := strconv.ParseUint(g, 10, 32)
	if err1 != nil || err2 != nil {
		return Agent{}, fmt.Errorf("agent %q: want UID:GID (numbers)", s)
	}
	a := Agent{UID: uint32(uid), GID: uint32(gid)}
	return a, checkAgent(a)
}

// registry is the host-wide record of agent identities (a directory),
// used under an exclusive lock on its .lock file so that concurrent
// mounts and imports never take the same uid.
type registry struct {
	dir  string
	lock *os.File
}

func openRegistry(dir string) (*registry, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent registry: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("agent registry: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("agent registry: lock: %w", err)
	}
	return &registry{dir: dir, lock: f}, nil
}

func (r *registry) close() { r.lock.Close() }

// entries maps each registered uid to its entry (gid and store).
func (r *registry) entries() (map[uint32]regEntry, error) {
	des, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, err
	}
	m := map[uint32]regEntry{}
	for _, de := range des {
		uid, err := strconv.ParseUint(de.Name(), 10, 32)
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(r.dir, de.Name()))
		if err != nil {
			continue
		}
		var e regEntry
		if json.Unmarshal(b, &e) != nil {
			continue
		}
		m[uint32(uid)] = e
	}
	return m, nil
}

type regEntry struct {
	GID   uint32 `json:"gid"`
	Store string `json:"store"`
	Block uint32 `json:"block,omitempty"` // a named agent's sandbox block (Agent.Block)
}

// live says whether the store an entry names still exists. A store that
// is gone frees its identity.
func (e regEntry) live() bool {
	_, err := os.Stat(e.Store)
	return !errors.Is(err, fs.ErrNotExist)
}

func (r *registry) put(a Agent, store string) error {
	b, _ := json.Marshal(regEntry{GID: a.GID, Store: store, Block: a.Block})
	p := filepath.Join(r.dir, strconv.FormatUint(uint64(a.UID), 10))
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// claim registers a as the agent of store, and returns it with its
// sandbox block: an agent outside the range keeps the block it had if no
// other store's agent has it, else gets the lowest free one. An identity
// that another existing store has is refused: two workspaces never share
// an agent, nor their sandboxes' ids.
func (r *registry) claim(a Agent, store string) (Agent, error) {
	m, err := r.entries()
	if err != nil {
		return Agent{}, err
	}
	for uid, e := range m {
		if e.Store == store || !e.live() {
			continue
		}
		if uid == a.UID {
			return Agent{}, fmt.Errorf("agent %s is already the agent of the store %s (give another uid:gid, or remove that store)", a, e.Store)
		}
	}
	if _, _, inRange := agentid.SandboxBlock(a.UID); inRange {
		a.Block = 0
	} else if taken := takenBlocks(m, store); a.Block == 0 || taken[a.Block-1] {
		a.Block = 0
		for k := uint32(0); k < AgentCount; k++ {
			if !taken[k] {
				a.Block = k + 1
				break
			}
		}
		if a.Block == 0 {
			return Agent{}, fmt.Errorf("agent registry %s: all %d sandbox id blocks are taken", r.dir, AgentCount)
		}
	}
	// Forget any other identity this store had.
	for uid, e := range m {
		if e.Store == store && uid != a.UID {
			os.Remove(filepath.Join(r.dir, strconv.FormatUint(uint64(uid), 10)))
		}
	}
	return a, r.put(a, store)
}

// takenBlocks are the sandbox blocks of live stores other than store:
// block k is the agent AgentBase+k's, or a named agent's given block k.
func takenBlocks(m map[uint32]regEntry, store string) map[uint32]bool {
	taken := map[uint32]bool{}
	for uid, e := range m {
		if e.Store == store || !e.live() {
			continue
		}
		if uid-AgentBase < AgentCount {
			taken[uid-AgentBase] = true
		}
		if e.Block != 0 {
			taken[e.Block-1] = true
		}
	}
	return taken
}

// allocate returns the identity registered for store, or registers the
// lowest free one of the range.
func (r *registry) allocate(store string) (Agent, error) {
	m, err := r.entries()
	if err != nil {
		return Agent{}, err
	}
	var mine []uint32
	for uid, e := range m {
		if e.Store == store {
			mine = append(mine, uid)
		}
	}
	if len(mine) > 0 {
		sort.Slice(mine, func(i, j int) bool { return mine[i] < mine[j] })
		return Agent{UID: mine[0], GID: m[mine[0]].GID}, nil
	}
	taken := takenBlocks(m, store)
	usedGID := map[uint32]bool{}
	for _, e := range m {
		if e.live() {
			usedGID[e.GID] = true
		}
	}
	for id := uint32(AgentBase); id < AgentBase+AgentCount; id++ {
		if e, ok := m[id]; ok && e.live() || usedGID[id] || taken[id-AgentBase] || hostKnows(id) {
			continue
		}
		a := Agent{UID: id, GID: id}
		return a, r.put(a, store)
	}
	return Agent{}, fmt.Errorf("agent registry %s: all %d identities from %d are taken", r.dir, AgentCount, AgentBase)
}

// hostKnows says whether the host's user or group database has id.
func hostKnows(id uint32) bool {
	s := strconv.FormatUint(uint64(id), 10)
	if _, err := user.LookupId(s); err == nil {
		return true
	}
	_, err := user.LookupGroupId(s)
	return err == nil
}

// AgentOptions say how a workspace gets its agent identity.
type AgentOptions struct {
	// Agent names the identity (nil: the spec's, else the one recorded
	// in the store, else one allocated).
	Agent *Agent
	// Dir is the registry (default DefaultAgentsDir).
	Dir string
}

// resolveAgent returns the agent identity for the store at dir: opts',
// else the spec's, else the one the registry has for it, else a new one.
// It is registered for the store. A daemon that is not root has no
// identities to give: its agent is its own user.
func resolveAgent(dir string, sp *spec.Spec, opts AgentOptions) (Agent, error) {
	var want *Agent
	switch {
	case opts.Agent != nil:
		want = opts.Agent
	case sp != nil && sp.Agent != nil:
		want = &Agent{UID: sp.Agent.UID, GID: sp.Agent.GID}
	}
	if os.Geteuid() != 0 {
		self := Agent{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
		if want != nil && *want != self {
			return Agent{}, fmt.Errorf("agent %s: a daemon that is not root cannot give its workspace another identity than its own (%s)", *want, self)
		}
		return self, nil
	}
	if want != nil {
		if err := checkAgent(*want); err != nil {
			return Agent{}, err
		}
	}
	r, err := openRegistry(agentsDir(opts.Dir))
	if err != nil {
		return Agent{}, err
	}
	defer r.close()
	if want != nil {
		return r.claim(*want, dir)
	}
	return r.allocate(dir)
}

// setupAgent gives the store its agent identity: the one it recorded, or,
// for a store that has none (made before agent identities, or new and not
// imported from a spec), one resolved now and recorded. Such a store's
// files that belong to root (everything the agent wrote before, as the
// fast path and tools wrote as the root directory's owner, root by
// default) are given to the agent; a store whose root directory belongs
// to another user than root (mount --owner) keeps that user as its agent.
func setupAgent(st *kv.Store, dir string, sp *spec.Spec, opts AgentOptions, log interface {
	Info(string, ...any)
	Warn(string, ...any)
}) (Agent, error) {
	a, ok, err := storedAgent(st)
	if err != nil {
		return Agent{}, err
	}
	if ok {
		if opts.Agent != nil && !opts.Agent.same(a) {
			return Agent{}, fmt.Errorf("agent %s: the store's agent is %s, for good (its files are that agent's)", *opts.Agent, a)
		}
		if os.Geteuid() == 0 {
			// The registry may have lost it (another registry, a new
			// host): say again that this store has it.
			if r, err := openRegistry(agentsDir(opts.Dir)); err == nil {
				got, err := r.claim(a, dir)
				r.close()
				switch {
				case err != nil:
					log.Warn("the workspace's agent identity is registered to another store too", "agent", a.String(), "err", err)
				case got.Block != a.Block:
					// Another store has its sandboxes' block now (a registry
					// lost, a resume on another host): a new one. The cache
					// volume's files have the old block's ids: it goes.
					log.Info("the workspace's sandboxes have a new id block", "agent", a.String(), "block", got.Block)
					os.Remove(filepath.Join(dir, cacheImage))
					a = got
					if err := recordAgent(st, a); err != nil {
						return Agent{}, err
					}
				}
			}
		}
		return a, nil
	}
	root, err := st.GetAttr(kv.RootIno)
	if err != nil {
		return Agent{}, err
	}
	adopt := Agent{UID: root.Uid, GID: root.Gid}
	named := opts.Agent != nil || sp != nil && sp.Agent != nil
	if !named && root.Uid != 0 && checkAgent(adopt) == nil {
		a = adopt
		if os.Geteuid() == 0 {
			r, err := openRegistry(agentsDir(opts.Dir))
			if err != nil {
				return Agent{}, err
			}
			a, err = r.claim(a, dir)
			r.close()
			if err != nil {
				return Agent{}, err
			}
		}
		log.Info("the store has no agent identity: the owner of its root directory is its agent from now on", "agent", a.String())
	} else {
		if a, err = resolveAgent(dir, sp, opts); err != nil {
			return Agent{}, err
		}
		n, err := chownRootFiles(st, a)
		if err != nil {
			return Agent{}, fmt.Errorf("giving root's files to the agent %s: %w", a, err)
		}
		if n > 1 {
			log.Warn("the store had no agent identity: its files that belonged to root now belong to its new agent", "agent", a.String(), "files", n)
		}
	}
	if err := privateRoot(st, a); err != nil {
		return Agent{}, err
	}
	return a, recordAgent(st, a)
}

// privateRoot makes the workspace's root directory the agent's, mode
// 0700: no other host user can enter the mount (root still can).
func privateRoot(st *kv.Store, a Agent) error {
	root, err := st.GetAttr(kv.RootIno)
	if err != nil {
		return err
	}
	_, err = st.SetAttr(kv.RootIno, kv.SetAttrRequest{Valid: kv.SetUid | kv.SetGid | kv.SetMode,
		Uid: a.UID, Gid: a.GID, Mode: root.Mode&0o7000 | 0o700})
	return err
}

// chownRootFiles gives every inode of the store owned by uid 0 to the
// agent (and every group 0 to its group), and returns how many it changed.
// Directories still to visit are kept on a list of its own, not Go's
// stack: the agent makes trees of any depth, and a recursion a level
// deep on each would end the daemon at mount with a fatal stack overflow.
func chownRootFiles(st *kv.Store, a Agent) (int, error) {
	n := 0
	seen := map[uint64]bool{kv.RootIno: true}
	todo := []uint64{kv.RootIno}
	for len(todo) > 0 {
		ino := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		attr, err := st.GetAttr(ino)
		if err != nil {
			return n, err
		}
		var req kv.SetAttrRequest
		if attr.Uid == 0 {
			req.Valid |= kv.SetUid
			req.Uid = a.UID
		}
		if attr.Gid == 0 {
			req.Valid |= kv.SetGid
			req.Gid = a.GID
		}
		if req.Valid != 0 {
			if _, err := st.SetAttr(ino, req); err != nil {
				return n, err
			}
			n++
		}
		if !attr.IsDir() {
			continue
		}
		if err := st.ReadDir(ino, "", func(d kv.Dirent) bool {
			if !seen[d.Ino] {
				seen[d.Ino] = true
				todo = append(todo, d.Ino)
			}
			return true
		}); err != nil {
			return n, err
		}
	}
	return n, nil
}

// prepareNewStore gives a store that does not exist yet (or an empty
// directory) its agent identity before the daemon opens it for good,
// without a journal: a new workspace's history starts with the agent's
// first change, not with the daemon's setting up of its root directory.
func prepareNewStore(dir string, opts MountOptions) error {
	// A store's database is under db/ (the lock file and the daemon's
	// log come before it).
	entries, err := os.ReadDir(filepath.Join(dir, "db"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil // openStore will say what is wrong
	}
	for _, e := range entries {
		if n := e.Name(); n == "CURRENT" || strings.HasPrefix(n, "MANIFEST-") {
			return nil // an existing store
		}
	}
	if kv.CheckDir(dir) != nil {
		return nil // not a store: openStore will say so
	}
	o := opts
	o.NoJournal = true
	st, err := openStore(dir, o)
	if err != nil {
		return err
	}
	_, err = setupAgent(st, dir, nil, AgentOptions{Agent: opts.Agent, Dir: opts.AgentsDir}, opts.Logger)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return err
}
