package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/internal/textsafe"
	"github.com/computerfs/computerfs/kv"
)

// cmdSnapshot takes, lists (no NAME) or deletes (--delete) snapshots of a
// mounted workspace (-w) or of a store that is not mounted (--store).
func cmdSnapshot(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("snapshot")
	mount := fset.String("w", "", "the workspace's mount point")
	store := fset.String("store", "", "a store that is not mounted (opened here)")
	del := fset.Bool("delete", false, "delete the snapshot NAME")
	asJSON := fset.Bool("json", false, "print JSON")
	pos, err := parse(fset, args, stdout)
	if err != nil {
		return err
	}
	if err := oneOf(*mount, *store); err != nil {
		return err
	}
	if len(pos) > 1 {
		return usageErr("unexpected argument %q", pos[1])
	}
	if *del && len(pos) == 0 {
		return usageErr("missing NAME")
	}
	if *store != "" {
		return snapshotStore(*store, pos, *del, *asJSON, stdout, stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := computerfs.Dial(*mount)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		list, err := c.Snapshots(ctx)
		if err != nil {
			return err
		}
		return printSnapshots(stdout, list, *asJSON)
	case *del:
		return c.DeleteSnapshot(ctx, pos[0])
	}
	start := time.Now()
	info, err := c.Snapshot(ctx, pos[0])
	if err != nil {
		return err
	}
	return printSnapshot(stdout, info, time.Since(start), *asJSON)
}

// snapshotStore is cmdSnapshot for a store that is not mounted: listed
// without opening it, opened for a snapshot or a deletion.
func snapshotStore(dir string, pos []string, del, asJSON bool, stdout, stderr io.Writer) error {
	if len(pos) == 0 {
		if ok, err := kv.IsStore(dir); err != nil || !ok {
			if err == nil {
				err = fmt.Errorf("store %s: %w", dir, kv.ErrNotStore)
			}
			return err
		}
		list, err := kv.ListSnapshots(dir)
		if err != nil {
			return err
		}
		return printSnapshots(stdout, list, asJSON)
	}
	log, err := newLogger(stderr, "warn", "text")
	if err != nil {
		return err
	}
	st, err := computerfs.OpenExisting(dir, log)
	if err != nil {
		return mountedAdvice(err, useW)
	}
	defer st.Close()
	if del {
		return st.DeleteSnapshot(pos[0])
	}
	start := time.Now()
	info, err := st.Snapshot(pos[0])
	if err != nil {
		return err
	}
	return printSnapshot(stdout, info, time.Since(start), asJSON)
}

func printSnapshots(stdout io.Writer, list []computerfs.SnapshotInfo, asJSON bool) error {
	if asJSON {
		if list == nil {
			list = []computerfs.SnapshotInfo{}
		}
		return printJSON(stdout, list)
	}
	for _, s := range list {
		fmt.Fprintf(stdout, "%-24s %s  %s own\n", textsafe.Name(s.Name), s.Created.Local().Format(time.DateTime), humanBytes(s.Own))
	}
	return nil
}

func printSnapshot(stdout io.Writer, info computerfs.SnapshotInfo, took time.Duration, asJSON bool) error {
	if asJSON {
		return printJSON(stdout, info)
	}
	fmt.Fprintf(stdout, "snapshot %s taken in %v (changes held %v)\n", textsafe.Name(info.Name), took.Round(time.Millisecond), info.Held.Round(10*time.Microsecond))
	return nil
}

// cmdFork makes a new store from a mounted workspace (-w) or a store that
// is not mounted (--src), from a snapshot or the live state.
func cmdFork(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("fork")
	mount := fset.String("w", "", "the mount point of the workspace to fork")
	src := fset.String("src", "", "a store to fork that is not mounted (with --from, it may be)")
	from := fset.String("from", "", "the snapshot to fork (default: the current state)")
	dst := fset.String("store", "", "the new store's directory (must not exist, or be empty)")
	asJSON := fset.Bool("json", false, "print JSON")
	pos, err := parse(fset, args, stdout)
	if err != nil {
		return err
	}
	if err := needArgs(pos); err != nil {
		return err
	}
	if *dst == "" {
		return usageErr("missing --store DIR")
	}
	switch {
	case *mount == "" && *src == "":
		return usageErr("missing -w MOUNTPOINT or --src STORE")
	case *mount != "" && *src != "":
		return usageErr("give -w MOUNTPOINT or --src STORE, not both")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	var res computerfs.ForkResult
	if *mount != "" {
		c, err := computerfs.Dial(*mount)
		if err != nil {
			return err
		}
		if res, err = c.Fork(ctx, *dst, *from); err != nil {
			return err
		}
	} else {
		log, err := newLogger(stderr, "warn", "text")
		if err != nil {
			return err
		}
		res, err = computerfs.ForkStore(*src, *dst, computerfs.ForkOptions{From: *from, Logger: log})
		if err != nil {
			return mountedAdvice(err, useW)
		}
	}
	if *asJSON {
		return printJSON(stdout, res)
	}
	what := "the current state"
	if res.From != "" {
		what = "snapshot " + textsafe.Name(res.From)
	}
	fmt.Fprintf(stdout, "forked %s into %s in %v (agent %s); mount it with: computerfs mount --store %s MOUNTPOINT\n",
		what, textsafe.Name(res.Store), time.Since(start).Round(time.Millisecond), res.Agent, textsafe.Name(res.Store))
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// humanBytes writes n in B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// cmdRollback puts a mounted workspace (-w, through its daemon) or a
// store that is not mounted (--store) back to one of its snapshots.
func cmdRollback(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("rollback")
	mount := fset.String("w", "", "the mount point of the workspace")
	store := fset.String("store", "", "a store that is not mounted")
	asJSON := fset.Bool("json", false, "print JSON")
	pos, err := parse(fset, args, stdout)
	if err != nil {
		return err
	}
	if err := oneOf(*mount, *store); err != nil {
		return err
	}
	if err := needArgs(pos, "NAME"); err != nil {
		return err
	}
	start := time.Now()
	var info computerfs.RollbackInfo
	if *mount != "" {
		c, err := computerfs.Dial(*mount)
		if err != nil {
			return err
		}
		res, err := c.Rollback(context.Background(), pos[0])
		if err != nil {
			return err
		}
		info = res.RollbackInfo
	} else {
		log, err := newLogger(stderr, "warn", "text")
		if err != nil {
			return err
		}
		if info, err = computerfs.RollbackStore(*store, pos[0], log); err != nil {
			return mountedAdvice(err, useW)
		}
	}
	if *asJSON {
		return printJSON(stdout, info)
	}
	fmt.Fprintf(stdout, "rolled back to snapshot %s in %v (journal record %d)\n", textsafe.Name(info.Name), time.Since(start).Round(time.Millisecond), info.Seq)
	return nil
}

// cmdUndo puts a mounted workspace back to one of its checkpoints, or
// lists them (--list).
func cmdUndo(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("undo")
	mount := fset.String("w", "", "the mount point of the workspace")
	list := fset.Bool("list", false, "list the checkpoints instead")
	asJSON := fset.Bool("json", false, "print JSON")
	pos, err := parse(fset, args, stdout)
	if err != nil {
		return err
	}
	if *mount == "" {
		return &exitError{2, errors.New("missing -w MOUNTPOINT")}
	}
	if len(pos) > 1 || (*list && len(pos) > 0) {
		return &exitError{2, fmt.Errorf("unexpected argument %q", pos[len(pos)-1])}
	}
	c, err := computerfs.Dial(*mount)
	if err != nil {
		return err
	}
	if *list {
		cps, err := c.Checkpoints(context.Background())
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, cps)
		}
		for _, cp := range cps {
			fmt.Fprintf(stdout, "%-10s %s  %s\n", cp.Name, cp.Created.Local().Format("2006-01-02 15:04:05"), textsafe.Text(cp.Label))
		}
		return nil
	}
	to := ""
	if len(pos) == 1 {
		to = pos[0]
	}
	start := time.Now()
	res, err := c.Undo(context.Background(), to)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, res)
	}
	fmt.Fprintf(stdout, "back to checkpoint %s in %v (journal record %d)\n", textsafe.Name(res.Checkpoint), time.Since(start).Round(time.Millisecond), res.Seq)
	return nil
}
