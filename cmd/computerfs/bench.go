package main

import (
	"io"

	"github.com/computerfs/computerfs/bench"
)

// cmdBench runs the benchmark suite on the directories given as NAME=DIR.
func cmdBench(args []string, stdout io.Writer) error { return bench.Main(args, stdout) }
