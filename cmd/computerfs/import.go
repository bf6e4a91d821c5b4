package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/term"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/sources"
	"github.com/computerfs/computerfs/spec"
	"github.com/computerfs/computerfs/wsfs"
)

func cmdImport(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("import")
	specFile := fset.String("spec", "", "workspace spec file (YAML)")
	store := fset.String("store", "", "store directory to populate (must be new, or already imported from a spec)")
	owner := fset.String("owner", "", "UID:GID that owns the imported files unless the spec says (default: the agent)")
	agentsDir := fset.String("agents-dir", "", "the host-wide registry of agent identities (default "+computerfs.DefaultAgentsDir+")")
	agent := fset.String("agent", "", "UID:GID of the workspace's agent identity, which owns what the agent writes (default: the spec's, else one allocated)")
	cacheMiB := fset.Int64("cache-size", 128, "Pebble block cache during the import, in MiB")
	memtableMiB := fset.Int64("memtable-size", 128, "largest Pebble memtable during the import, in MiB (up to two are in memory)")
	level := fset.String("log-level", "info", "log level: debug, info, warn, error")
	format := fset.String("log-format", "text", "log format: text or json")
	pos, err := parse(fset, args, stdout)
	if err != nil {
		return err
	}
	if err := needArgs(pos); err != nil {
		return err
	}
	if *specFile == "" {
		return usageErr("missing --spec FILE")
	}
	if *store == "" {
		return usageErr("missing --store DIR")
	}
	log, err := newLogger(stderr, *level, *format)
	if err != nil {
		return &exitError{2, err}
	}
	o, err := parseOwner(*owner)
	if err != nil {
		return &exitError{2, err}
	}
	a, err := parseAgent(*agent)
	if err != nil {
		return &exitError{2, err}
	}
	if *cacheMiB <= 0 || *memtableMiB < 4 || *memtableMiB > 1024 {
		return &exitError{2, errors.New("--cache-size must be positive and --memtable-size between 4 and 1024 MiB")}
	}
	imported, err := importSpec(*specFile, *store, importTuning{o, a, *agentsDir, *cacheMiB << 20, uint64(*memtableMiB) << 20}, log, stderr)
	if err != nil {
		return err
	}
	if !imported {
		log.Info("store was already imported; nothing to do", "store", *store)
	}
	return nil
}

// importSpec loads a spec and imports it into store unless that store was
// imported already. SIGINT and SIGTERM stop it; the store is then left
// as it was.
func importSpec(specFile, store string, tune importTuning, log *slog.Logger, stderr io.Writer) (bool, error) {
	sp, err := spec.Load(specFile)
	if err != nil {
		return false, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	progress := &sources.Progress{Log: log}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		progress.Term = stderr
	}
	imported, err := computerfs.Import(ctx, computerfs.ImportOptions{Spec: sp, Store: store, Owner: tune.owner, Agent: computerfs.AgentOptions{Agent: tune.agent, Dir: tune.agentsDir}, Logger: log,
		Progress: progress, CacheSize: tune.cache, MemTableSize: tune.memtable})
	if err != nil && ctx.Err() != nil {
		return false, fmt.Errorf("import interrupted; the store was left as it was: %w", err)
	}
	return imported, err
}

// importTuning is what the import and mount commands' flags set for an import.
type importTuning struct {
	owner     *wsfs.Owner
	agent     *computerfs.Agent
	agentsDir string
	cache     int64
	memtable  uint64
}

// parseAgent reads --agent: UID:GID, or nothing.
func parseAgent(s string) (*computerfs.Agent, error) {
	if s == "" {
		return nil, nil
	}
	a, err := computerfs.ParseAgent(s)
	if err != nil {
		return nil, fmt.Errorf("--agent: %w", err)
	}
	return &a, nil
}

func parseOwner(s string) (*wsfs.Owner, error) {
	if s == "" {
		return nil, nil
	}
	u, g, ok := strings.Cut(s, ":")
	uid, err1 := strconv.ParseUint(u, 10, 32)
	gid, err2 := strconv.ParseUint(g, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("--owner %q: want UID:GID (numbers)", s)
	}
	return &wsfs.Owner{UID: uint32(uid), GID: uint32(gid)}, nil
}
