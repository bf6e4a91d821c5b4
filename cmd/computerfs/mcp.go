package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
	"github.com/computerfs/computerfs/internal/version"
	"github.com/computerfs/computerfs/tools"
)

func cmdMCP(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("mcp")
	mount := fset.String("w", "", "the workspace's mount point")
	listen := fset.String("listen", "", "serve streamable HTTP on this address (as 127.0.0.1:8765) instead of stdio")
	tokenFile := fset.String("token-file", "", "with --listen: the bearer token is this file's content (default: $COMPUTERFS_MCP_TOKEN, else a new one printed to stderr)")
	tlsCert := fset.String("tls-cert", "", "with --listen: serve HTTPS with this certificate (PEM; with --tls-key)")
	tlsKey := fset.String("tls-key", "", "with --listen: the certificate's private key (PEM)")
	insecure := fset.Bool("insecure-http", false, "with --listen: allow plain HTTP on an address other hosts can reach (the token and every file then cross the network in clear)")
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
	if (*tlsCert == "") != (*tlsKey == "") {
		return &exitError{2, errors.New("--tls-cert and --tls-key go together")}
	}
	if *listen == "" && (*tlsCert != "" || *insecure || *tokenFile != "") {
		return &exitError{2, errors.New("--tls-cert, --tls-key, --insecure-http and --token-file need --listen")}
	}
	scheme := "http"
	if *tlsCert != "" {
		scheme = "https"
	}
	if *listen != "" && scheme == "http" {
		remote, err := reachableFromOtherHosts(*listen)
		if err != nil {
			return &exitError{2, err}
		}
		if remote && !*insecure {
			return &exitError{2, fmt.Errorf("--listen %s: other hosts could connect, over plain HTTP: the bearer token and every file would cross the network in clear. "+
				"Listen on a loopback address (127.0.0.1:PORT, behind a TLS proxy of your own), or give --tls-cert and --tls-key, or say --insecure-http", *listen)}
		}
		if remote {
			fmt.Fprintf(stderr, "computerfs mcp: warning: plain HTTP on %s, which other hosts can reach (--insecure-http)\n", *listen)
		}
	}
	c, err := computerfs.Dial(*mount)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *listen == "" {
		err := tools.ServeStdio(ctx, c, version.String(), log)
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
	fmt.Fprintf(stderr, "computerfs mcp: serving %s on %s://%s/mcp\n", *mount, scheme, l.Addr())
	mux := http.NewServeMux()
	mux.Handle("/mcp", tools.HTTPHandler(c, version.String(), token, log))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if scheme == "https" {
		err = srv.ServeTLS(l, *tlsCert, *tlsKey)
	} else {
		err = srv.Serve(l)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// reachableFromOtherHosts reports whether a listen address accepts
// connections from other hosts: any address but a loopback one. An empty
// host (":8765") and the unspecified addresses mean every interface; a
// name counts as loopback only if every address it resolves to is.
func reachableFromOtherHosts(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("--listen %q: want HOST:PORT, as 127.0.0.1:8765", addr)
	}
	if host == "" {
		return true, nil
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
		return !ip.IsLoopback(), nil
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return false, fmt.Errorf("--listen %q: %w", addr, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return true, nil
		}
	}
	return len(ips) == 0, nil
}
