//go:build seccomp && cgo

package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// SeccompSupported says whether this binary was built with seccomp.
const SeccompSupported = true

// defaultProfile is moby's default seccomp profile as it applies to a
// process with no capabilities on this kernel, and a key that changes
// when the profile or libseccomp do (the name of the compiled filter in
// the cache).
func defaultProfile() (*specs.LinuxSeccomp, string, error) {
	profile, err := seccomp.GetDefaultProfile(&specs.Spec{
		Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}},
	})
	if err != nil {
		return nil, "", err
	}
	b, err := json.Marshal(profile)
	if err != nil {
		return nil, "", err
	}
	major, minor, micro := libseccomp.GetLibraryVersion()
	h := sha256.New()
	fmt.Fprintf(h, "libseccomp %d.%d.%d\n", major, minor, micro)
	h.Write(b)
	return profile, hex.EncodeToString(h.Sum(nil))[:24], nil
}

// compileFilter compiles a profile into a sealed memory file holding the
// BPF program. Syscalls the profile names that this libseccomp does not
// know are left out (they get the default action, EPERM).
func compileFilter(profile *specs.LinuxSeccomp) (*os.File, error) {
	def, err := scmpAction(profile.DefaultAction, profile.DefaultErrnoRet)
	if err != nil {
		return nil, err
	}
	filter, err := libseccomp.NewFilter(def)
	if err != nil {
		return nil, err
	}
	defer filter.Release()
	for _, a := range profile.Architectures {
		arch, err := libseccomp.GetArchFromString(strings.ToLower(strings.TrimPrefix(string(a), "SCMP_ARCH_")))
		if err != nil {
			return nil, err
		}
		if err := filter.AddArch(arch); err != nil {
			return nil, err
		}
	}
	if len(profile.Syscalls) > 32 {
		filter.SetOptimize(2) // a binary tree; older libseccomp: linear
	}
	for _, rule := range profile.Syscalls {
		act, err := scmpAction(rule.Action, rule.ErrnoRet)
		if err != nil {
			return nil, err
		}
		if act == def {
			continue
		}
		conds, err := scmpConditions(rule.Args)
		if err != nil {
			return nil, err
		}
		for _, name := range rule.Names {
			call, err := libseccomp.GetSyscallFromName(name)
			if err != nil {
				continue // unknown to this libseccomp
			}
			if err := addRule(filter, call, act, conds); err != nil {
				return nil, fmt.Errorf("seccomp rule for %s: %w", name, err)
			}
		}
	}
	f, err := memfile("computerfs-sandbox-seccomp")
	if err != nil {
		return nil, err
	}
	if err := filter.ExportBPF(f); err != nil {
		f.Close()
		return nil, err
	}
	if err := seal(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// addRule adds a rule whose conditions must all hold. libseccomp takes
// one condition per argument in a rule; conditions on the same argument
// are therefore alternatives, each a rule of its own (as runc does).
func addRule(filter *libseccomp.ScmpFilter, call libseccomp.ScmpSyscall, act libseccomp.ScmpAction, conds []libseccomp.ScmpCondition) error {
	seen := map[uint]bool{}
	repeated := false
	for _, c := range conds {
		if seen[c.Argument] {
			repeated = true
		}
		seen[c.Argument] = true
	}
	if !repeated {
		if len(conds) == 0 {
			return filter.AddRule(call, act)
		}
		return filter.AddRuleConditional(call, act, conds)
	}
	for _, c := range conds {
		if err := filter.AddRuleConditional(call, act, []libseccomp.ScmpCondition{c}); err != nil {
			return err
		}
	}
	return nil
}

func scmpAction(a specs.LinuxSeccompAction, errnoRet *uint) (libseccomp.ScmpAction, error) {
	switch a {
	case specs.ActAllow:
		return libseccomp.ActAllow, nil
	case specs.ActErrno:
		ret := uint(unix.EPERM)
		if errnoRet != nil {
			ret = *errnoRet
		}
		return libseccomp.ActErrno.SetReturnCode(int16(ret)), nil
	case specs.ActKill, specs.ActKillThread:
		return libseccomp.ActKillThread, nil
	case specs.ActKillProcess:
		return libseccomp.ActKillProcess, nil
	case specs.ActTrap:
		return libseccomp.ActTrap, nil
	case specs.ActLog:
		return libseccomp.ActLog, nil
	case specs.ActTrace:
		ret := uint(unix.EPERM)
		if errnoRet != nil {
			ret = *errnoRet
		}
		return libseccomp.ActTrace.SetReturnCode(int16(ret)), nil
	}
	return libseccomp.ActInvalid, fmt.Errorf("seccomp action %q not supported", a)
}

func scmpConditions(args []specs.LinuxSeccompArg) ([]libseccomp.ScmpCondition, error) {
	var conds []libseccomp.ScmpCondition
	for _, a := range args {
		var op libseccomp.ScmpCompareOp
		switch a.Op {
		case specs.OpNotEqual:
			op = libseccomp.CompareNotEqual
		case specs.OpLessThan:
			op = libseccomp.CompareLess
		case specs.OpLessEqual:
			op = libseccomp.CompareLessOrEqual
		case specs.OpEqualTo:
			op = libseccomp.CompareEqual
		case specs.OpGreaterEqual:
			op = libseccomp.CompareGreaterEqual
		case specs.OpGreaterThan:
			op = libseccomp.CompareGreater
		case specs.OpMaskedEqual:
			op = libseccomp.CompareMaskedEqual
		default:
			return nil, fmt.Errorf("seccomp operator %q not supported", a.Op)
		}
		var c libseccomp.ScmpCondition
		var err error
		if op == libseccomp.CompareMaskedEqual {
			c, err = libseccomp.MakeCondition(a.Index, op, a.Value, a.ValueTwo)
		} else {
			c, err = libseccomp.MakeCondition(a.Index, op, a.Value)
		}
		if err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	return conds, nil
}
