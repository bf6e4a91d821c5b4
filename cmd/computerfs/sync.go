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

	"github.com/computerfs/computerfs/internal/textsafe"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/syncer"
)

func cmdSync(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("sync")
	mount := fset.String("w", "", "the workspace's mount point")
	asJSON := fset.Bool("json", false, "print the report as JSON")
	pos, err := parse(fset, args, stdout)
	if err != nil {
		return err
	}
	if err := needArgs(pos); err != nil {
		return err
	}
	if *mount == "" {
		return usageErr("missing -w MOUNTPOINT")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := computerfs.Dial(*mount)
	if err != nil {
		return err
	}
	rep, err := c.Sync(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		printSync(stdout, rep)
	}
	if rep.Failed() {
		return &exitError{1, errors.New("sync incomplete: see the errors and conflicts above")}
	}
	return nil
}

func printSync(w io.Writer, rep syncer.Report) {
	if len(rep.Sources) == 0 {
		fmt.Fprintln(w, "no source has write-back")
	}
	for _, s := range rep.Sources {
		if s.Kind == "git" {
			printGitSync(w, &s)
			continue
		}
		fmt.Fprintf(w, "%s (%s): %d uploaded, %d deleted, %d conflicts, %d errors\n",
			textsafe.Name(s.Path), s.Kind, len(s.Uploaded), len(s.Deleted), len(s.Conflicts), len(s.Errors))
		for _, p := range s.Uploaded {
			fmt.Fprintf(w, "  uploaded %s\n", textsafe.Name(p))
		}
		for _, p := range s.Deleted {
			fmt.Fprintf(w, "  deleted  %s\n", textsafe.Name(p))
		}
		for _, c := range s.Conflicts {
			fmt.Fprintf(w, "  conflict %s: %s\n", textsafe.Name(c.Path), textsafe.Text(c.Reason))
		}
		for _, e := range s.Errors {
			fmt.Fprintf(w, "  error    %s\n", textsafe.Text(e))
		}
	}
}

// printGitSync prints what a git source's sync did: the commit it made,
// the push, conflicts and errors.
func printGitSync(w io.Writer, s *syncer.SourceReport) {
	what := "up to date"
	if s.Pushed != "" {
		what = fmt.Sprintf("pushed %.12s to %s", s.Pushed, textsafe.Name(s.Branch))
	}
	fmt.Fprintf(w, "%s (git): %s, %d conflicts, %d errors\n", textsafe.Name(s.Path), what, len(s.Conflicts), len(s.Errors))
	if s.Commit != "" {
		fmt.Fprintf(w, "  committed %.12s (%d changes)\n", s.Commit, len(s.Committed))
		for _, c := range s.Committed {
			fmt.Fprintf(w, "    %s\n", textsafe.Name(c))
		}
	}
	for _, c := range s.Conflicts {
		fmt.Fprintf(w, "  conflict %s: %s\n", textsafe.Name(c.Path), textsafe.Text(c.Reason))
	}
	for _, e := range s.Errors {
		fmt.Fprintf(w, "  error    %s\n", textsafe.Text(e))
	}
}

// printSyncState is a source's line of write-back state in status.
func printSyncState(w io.Writer, s *syncer.SourceStatus) {
	last := "never"
	if !s.Last.Time.IsZero() {
		last = fmt.Sprintf("%s: %s", s.Last.Time.Local().Format(time.DateTime), textsafe.Text(s.Last.Result))
	}
	fmt.Fprintf(w, "      mode %s, %d pending, last sync %s\n", s.Mode, s.Pending, last)
	if s.NextRetry != nil {
		fmt.Fprintf(w, "      retrying at %s\n", s.NextRetry.Local().Format(time.TimeOnly))
	}
	for _, c := range s.Conflicts {
		fmt.Fprintf(w, "      conflict %s: %s\n", textsafe.Name(c.Path), textsafe.Text(c.Reason))
	}
}
