package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/kv"
)

func cmdLog(args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("log", flag.ContinueOnError)
	fset.SetOutput(stderr)
	mount := fset.String("w", "", "the workspace's mount point")
	store := fset.String("store", "", "a store that is not mounted")
	since := fset.String("since", "", "from a sequence number (120), a time back from now (10m) or a time (RFC 3339)")
	path := fset.String("path", "", "only changes to this path or under it (as /repo/a.go)")
	asJSON := fset.Bool("json", false, "one JSON object per line")
	follow := fset.Bool("follow", false, "keep printing new changes as they come (with -w)")
	pos, err := parseInterleaved(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 || (*mount == "") == (*store == "") {
		fset.Usage()
		return &exitError{2, errors.New("log needs -w MOUNTPOINT or --store DIR")}
	}
	if *follow && *mount == "" {
		return &exitError{2, errors.New("--follow needs -w MOUNTPOINT (a running workspace)")}
	}
	q := computerfs.LogQuery{Path: *path, Limit: 10000}
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
		st, err := kv.Open(*store, kv.Options{Logger: discardLogger()})
		if err != nil {
			return err
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

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
