package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/computerfs/computerfs/internal/textsafe"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/sources"
)

func cmdRefresh(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("refresh")
	mount := fset.String("w", "", "the workspace's mount point (the daemon refreshes it)")
	store := fset.String("store", "", "a store that is not mounted (refreshed in this process)")
	asJSON := fset.Bool("json", false, "print the report as JSON")
	pos, err := parse(fset, args, stdout)
	if err != nil {
		return err
	}
	if err := needArgs(pos); err != nil {
		return err
	}
	if err := oneOf(*mount, *store); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var rep sources.RefreshReport
	if *mount != "" {
		c, err := computerfs.Dial(*mount)
		if err != nil {
			return err
		}
		rep, err = c.Refresh(ctx)
		if err != nil {
			return err
		}
	} else {
		log, err := newLogger(stderr, "warn", "text")
		if err != nil {
			return err
		}
		rep, err = computerfs.RefreshStore(ctx, *store, computerfs.MountOptions{Logger: log})
		if err != nil {
			return mountedAdvice(err, useW)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		printRefresh(stdout, rep)
	}
	return refreshExit(rep)
}

// refreshExit: 1 if a source failed, 3 if paths were left alone because
// they have local edits, 0 otherwise.
func refreshExit(rep sources.RefreshReport) error {
	conflicts := 0
	for _, s := range rep.Sources {
		if s.Error != "" {
			return &exitError{1, fmt.Errorf("refresh of %s failed: %s", s.Path, s.Error)}
		}
		conflicts += len(s.Conflicts)
	}
	if conflicts > 0 {
		return &exitError{3, fmt.Errorf("%d paths changed upstream were left alone: they have local edits", conflicts)}
	}
	return nil
}

func printRefresh(w io.Writer, rep sources.RefreshReport) {
	for _, s := range rep.Sources {
		fmt.Fprintf(w, "%s (%s)", textsafe.Name(s.Path), s.Kind)
		if s.Note != "" {
			fmt.Fprintf(w, ": %s", textsafe.Text(s.Note))
		}
		fmt.Fprintln(w)
		for _, l := range []struct {
			tag   string
			paths []string
		}{{"updated", s.Updated}, {"added", s.Added}, {"removed", s.Removed}} {
			for _, p := range l.paths {
				fmt.Fprintf(w, "  %-8s %s\n", l.tag, textsafe.Name(p))
			}
		}
		for _, c := range s.Conflicts {
			fmt.Fprintf(w, "  %-8s %s: %s\n", "kept", textsafe.Name(c.Path), textsafe.Text(c.Reason))
		}
		if s.Error != "" {
			fmt.Fprintf(w, "  error    %s\n", textsafe.Text(s.Error))
		}
	}
}

func cmdStatus(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("status")
	mount := fset.String("w", "", "the workspace's mount point")
	store := fset.String("store", "", "the workspace's store, mounted or not")
	asJSON := fset.Bool("json", false, "print JSON")
	pos, err := parse(fset, args, stdout)
	if err != nil {
		return err
	}
	if err := needArgs(pos); err != nil {
		return err
	}
	if err := oneOf(*mount, *store); err != nil {
		return err
	}
	var st computerfs.Status
	if *store != "" {
		st, err = computerfs.StoreStatus(context.Background(), *store)
	} else {
		var c *computerfs.Client
		if c, err = computerfs.Dial(*mount); err == nil {
			st, err = c.Status(context.Background())
		}
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	if st.Pid == 0 {
		fmt.Fprintf(stdout, "store %s, not mounted (agent %s)\n", textsafe.Name(st.Store), st.Agent)
	} else {
		fmt.Fprintf(stdout, "workspace %s (store %s, daemon pid %d, agent %s)\n", textsafe.Name(st.Mountpoint), textsafe.Name(st.Store), st.Pid, st.Agent)
	}
	fmt.Fprintf(stdout, "  usage %s: files %s, journal %s, audit %s\n", usageOf(st.Usage), mib(st.Usage.Files), mib(st.Usage.Journal), mib(st.Usage.Audit))
	if f := st.Fetch; f != nil {
		fmt.Fprintf(stdout, "  resume: %d blobs still to fetch, %d fetched (%s), %d failed\n", f.Owed, f.Fetched, mib(f.Bytes), f.Failed)
		if f.Error != "" {
			fmt.Fprintf(stdout, "  resume: %s\n", textsafe.Text(f.Error))
		}
	}
	for _, s := range st.Sources {
		fmt.Fprintf(stdout, "  %-20s %-7s %-16s %s\n", textsafe.Name(s.Path), s.Kind, "sync: "+s.Sync, textsafe.Text(s.From))
		if s.SyncState != nil {
			printSyncState(stdout, s.SyncState)
		}
	}
	return nil
}

// usageOf is "12.3 MiB of a 100.0 MiB quota", or "12.3 MiB (no quota)".
func usageOf(u kv.UsageReport) string {
	if u.Quota <= 0 {
		return mib(u.Used) + " (no quota)"
	}
	return mib(u.Used) + " of a " + mib(u.Quota) + " quota"
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
