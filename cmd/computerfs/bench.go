package main

import (
	"errors"
	"io"

	"github.com/computerfs/computerfs/bench"
)

// cmdBench runs the benchmark suite on the directories given as NAME=DIR.
func cmdBench(args []string, stdout io.Writer) error {
	err := bench.Main(args, stdout)
	var ue *bench.UsageError
	if errors.As(err, &ue) {
		return usageErr("%s", ue.Msg)
	}
	return err
}
