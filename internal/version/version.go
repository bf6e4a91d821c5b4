// Package version tells which build of computerfs is running: the version
// the Makefile's build target stamps in, else what the Go toolchain
// recorded (the module's version and the commit it was built from).
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// stamped is set by the Makefile's build target:
//
//	go build -ldflags "-X github.com/computerfs/computerfs/internal/version.stamped=$(git describe --always --dirty)"
var stamped string

// Info describes the build.
type Info struct {
	Version  string // v1.2.3, a pseudo-version, or the stamped one; "devel" if unknown
	Revision string // the commit, if the build recorded it
	Modified bool   // the work tree had changes
	Go       string // the Go version it was built with
}

// Get returns the build's Info.
func Get() Info {
	i := Info{Version: stamped, Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if i.Version == "" {
		i.Version = "devel"
		if i.Revision != "" {
			i.Version += "-" + short(i.Revision)
			if i.Modified {
				i.Version += "-dirty"
			}
		}
	}
	return i
}

// String is the version alone, as the MCP server reports it.
func String() string { return Get().Version }

// Long is the line `computerfs version` prints.
func (i Info) Long() string {
	var b strings.Builder
	b.WriteString("computerfs " + i.Version)
	if i.Revision != "" {
		b.WriteString(" (commit " + short(i.Revision))
		if i.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	b.WriteString(", built with " + i.Go)
	return b.String()
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
