package main

import (
	"fmt"
	"io"

	"github.com/computerfs/computerfs/internal/version"
)

func cmdVersion(args []string, stdout, _ io.Writer) error {
	pos, err := parse(newFlags("version"), args, stdout)
	if err != nil {
		return err
	}
	if err := needArgs(pos); err != nil {
		return err
	}
	fmt.Fprintln(stdout, version.Get().Long())
	return nil
}
