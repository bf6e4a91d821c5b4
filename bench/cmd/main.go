// Command bench runs computerfs's benchmarks without the computerfs CLI:
// `go run ./bench/cmd [flags] NAME=DIR...` is `computerfs bench`.
package main

import (
	"fmt"
	"os"

	"github.com/computerfs/computerfs/bench"
)

func main() {
	if err := bench.Main(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
