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

type profile struct{}

func defaultProfile() (*profile, string, error) { return nil, "", errNoSeccomp }

func compileFilter(*profile) (*os.File, error) { return nil, errNoSeccomp }
