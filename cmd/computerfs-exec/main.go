// Command computerfs-exec is `computerfs exec` in a binary of its own that
// initialises nothing but what the call needs (see internal/execcli), for
// harnesses that run many short commands: it starts in a few milliseconds
// where the full computerfs binary takes tens.
package main

import (
	"os"

	"github.com/computerfs/computerfs/internal/execcli"
)

func main() { os.Exit(execcli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
