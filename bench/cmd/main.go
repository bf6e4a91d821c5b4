// Command bench runs computerfs's benchmarks without the computerfs CLI:
// `go run ./bench/cmd [flags] NAME=DIR...` is `computerfs bench`.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/computerfs/computerfs/bench"
)

func main() {
	if err := bench.Main(os.Args[1:], os.Stdout); err != nil {
		var ue *bench.UsageError
		if errors.As(err, &ue) {
			fmt.Fprintf(os.Stderr, "bench: %v; see 'bench -h'\n", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
