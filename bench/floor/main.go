// Command floor mounts go-fuse's loopback file system over a directory
// (the benchmarks put it on tmpfs) with the mount options computerfs uses:
// every user, the kernel checking permissions, and 60 s entry, attribute
// and negative-entry timeouts. What the benchmarks measure on it is the
// cost of the kernel's FUSE round trips with almost nothing behind them,
// so "computerfs ÷ floor" is what the store and its server add on top.
//
// Usage: floor MOUNTPOINT ORIGINAL (runs until unmounted or signalled).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: floor MOUNTPOINT ORIGINAL")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(mountpoint, orig string) error {
	root, err := fs.NewLoopbackRoot(orig)
	if err != nil {
		return err
	}
	timeout := 60 * time.Second
	srv, err := fs.Mount(mountpoint, root, &fs.Options{
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
		NullPermissions: true,
		MountOptions: fuse.MountOptions{
			AllowOther:    true,
			Options:       []string{"default_permissions"},
			FsName:        orig,
			Name:          "floor",
			MaxWrite:      1 << 20,
			MaxBackground: 64,
			DirectMount:   true,
		},
	})
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		srv.Unmount()
	}()
	srv.Wait()
	return nil
}
