//go:build !(seccomp && cgo)

package sandbox

import (
	"errors"
	"os"
)

// SeccompSupported says whether this binary was built with seccomp.
const SeccompSupported = false

// ErrNoSeccomp: the binary was built without seccomp support.
var errNoSeccomp = errors.New("sandbox: built without seccomp (build with -tags seccomp and libseccomp-dev), or set NoSeccomp")

func compileFilter() (*os.File, error) { return nil, errNoSeccomp }
