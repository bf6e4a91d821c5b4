package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/kv"
	"github.com/computerfs/computerfs/spec"
)

func cmdLog(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("log")
	mount := fset.String("w", "", "the workspace's mount point")
	store := fset.String("store", "", "a store that is not mounted")
	since := fset.String("since", "", "from a sequence number (120), a time back from now (10m) or a time (RFC 3339)")
	path := fset.String("path", "", "only changes to this path or under it (as /repo/a.go)")
	asJSON := fset.Bool("json", false, "one JSON object per line")
	follow := fset.Bool("follow", false, "keep printing new changes as they come (with -w)")
	var exclude globList
	fset.Var(&exclude, "exclude", "leave out changes to paths this glob matches or that lie under it, as '/repo/.git/**' or '*.lock' (repeatable)")
	toolCalls := fset.Bool("tools", false, "the audit of agent tool calls instead of the journal (--since ID, --json, --follow)")
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
	if *follow && *mount == "" {
		return &exitError{2, errors.New("--follow needs -w MOUNTPOINT (a running workspace)")}
	}
	if *toolCalls {
		return logTools(*mount, *store, *since, *asJSON, *follow, stdout)
	}
	if len(exclude) > computerfs.MaxLogExcludes {
		return &exitError{2, fmt.Errorf("--exclude: %d patterns (at most %d)", len(exclude), computerfs.MaxLogExcludes)}
	}
	for _, g := range exclude {
		if err := spec.CheckGlob(g); err != nil {
			return &exitError{2, fmt.Errorf("--exclude: %w", err)}
		}
	}
	q := computerfs.LogQuery{Path: *path, Limit: 10000, Exclude: exclude}
	if *since != "" {
		sq, err := computerfs.ParseSince(*since, time.Now())
		if err != nil {
			return &exitError{2, err}
		}
		q.After, q.Since = sq.After, sq.Since
	}
	print := func(es []computerfs.LogEntry) {
		enc := json.NewEncoder(stdout)
		for _, e := range es {
			if *asJSON {
				enc.Encode(e)
			} else {
				fmt.Fprintln(stdout, e.String())
			}
		}
	}
	if *store != "" {
		st, err := computerfs.OpenExisting(*store, discardLogger())
		if err != nil {
			return mountedAdvice(err, useW)
		}
		defer st.Close()
		for {
			es, err := computerfs.ReadLog(st, q)
			if err != nil {
				return err
			}
			print(es)
			if len(es) < q.Limit {
				return nil
			}
			q.After = es[len(es)-1].Seq
		}
	}
	c, err := computerfs.Dial(*mount)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for {
		es, err := c.Log(ctx, q)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		print(es)
		if len(es) > 0 {
			q.After = es[len(es)-1].Seq
		}
		if len(es) == q.Limit {
			continue
		}
		if !*follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// globList is a repeatable flag of globs.
type globList []string

func (g *globList) String() string { return strings.Join(*g, ",") }

func (g *globList) Set(s string) error {
	*g = append(*g, s)
	return nil
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// logTools prints the audit of tool calls, oldest first. With follow,
// records are printed once their call has ended, in id order.
func logTools(mount, store, since string, asJSON, follow bool, stdout io.Writer) error {
	var after uint64
	if since != "" {
		n, err := strconv.ParseUint(since, 10, 64)
		if err != nil {
			return &exitError{2, fmt.Errorf("--since %q: with --tools, a call id", since)}
		}
		after = max(n, 1) - 1
	}
	enc := json.NewEncoder(stdout)
	print := func(r kv.AuditRecord) {
		if asJSON {
			enc.Encode(r)
		} else {
			fmt.Fprintln(stdout, computerfs.AuditString(r))
		}
	}
	const page = 1000
	if store != "" {
		st, err := computerfs.OpenExisting(store, discardLogger())
		if err != nil {
			return mountedAdvice(err, useW)
		}
		defer st.Close()
		for {
			rs, err := computerfs.ReadAudit(st, after, page)
			if err != nil {
				return err
			}
			for _, r := range rs {
				print(r)
				after = r.ID
			}
			if len(rs) < page {
				return nil
			}
		}
	}
	c, err := computerfs.Dial(mount)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for {
		rs, err := c.Audit(ctx, after, page)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		for _, r := range rs {
			if follow && !r.Done {
				break // wait for it: later records come after it
			}
			print(r)
			after = r.ID
		}
		if len(rs) == page && after == rs[len(rs)-1].ID {
			continue
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}
