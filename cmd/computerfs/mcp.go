package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/tools"
)

const version = "dev"

func cmdMCP(args []string, stderr io.Writer) error {
	fset := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fset.SetOutput(stderr)
	mount := fset.String("w", "", "the workspace's mount point")
	listen := fset.String("listen", "", "serve streamable HTTP on this address (as 127.0.0.1:8765) instead of stdio")
	tokenFile := fset.String("token-file", "", "with --listen: the bearer token is this file's content (default: $COMPUTERFS_MCP_TOKEN, else a new one printed to stderr)")
	pos, err := parseInterleaved(fset, args)
	if err != nil {
		return err
	}
	if *mount == "" || len(pos) != 0 {
		fset.Usage()
		return &exitError{2, errors.New("mcp needs -w MOUNTPOINT")}
	}
	c, err := computerfs.Dial(*mount)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *listen == "" {
		err := tools.ServeStdio(ctx, c, version, log)
		if ctx.Err() != nil || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	token := strings.TrimSpace(os.Getenv("COMPUTERFS_MCP_TOKEN"))
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return err
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		b := make([]byte, 24)
		rand.Read(b)
		token = hex.EncodeToString(b)
		fmt.Fprintf(stderr, "computerfs mcp: bearer token %s\n", token)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "computerfs mcp: serving %s on http://%s/mcp\n", *mount, l.Addr())
	mux := http.NewServeMux()
	mux.Handle("/mcp", tools.HTTPHandler(c, version, token, log))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
