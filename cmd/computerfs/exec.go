package main

import (
	"errors"
	"io"
	"os"

	"github.com/computerfs/computerfs/internal/execcli"
)

// cmdExec is internal/execcli, which the thin client computerfs-exec
// shares, with this program's help and errors.
func cmdExec(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("exec")
	f := execcli.Define(fset)
	pos, err := parse(fset, args, stdout)
	if err != nil {
		return err
	}
	err = execcli.Run(f, pos, os.Stdin, stdout, stderr)
	var ue *execcli.UsageError
	var es execcli.ExitStatus
	switch {
	case errors.As(err, &ue):
		return usageErr("%s", ue.Msg)
	case errors.As(err, &es):
		return &exitError{int(es), errSilent}
	}
	return err
}

// errSilent ends the program with a status and no message (the command
// said what it had to).
var errSilent = errors.New("")
