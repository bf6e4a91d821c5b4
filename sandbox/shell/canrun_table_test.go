package shell

import (
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestCanRunUnimplementedOptions walks the table of commands: for each
// built-in, every option it does not implement (each letter that is not
// among its short options, a long option it does not have, --help,
// --version) makes CanRun route the command line to the sandbox, alone
// and before operands, so that the fast path never accepts an option
// and misreads it.
func TestCanRunUnimplementedOptions(t *testing.T) {
	names := Builtins()
	if len(names) < 50 {
		t.Fatalf("only %d commands in the table", len(names))
	}
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	// options a command rewrites before it parses its options (sed -iSUFFIX
	// is --in-place=SUFFIX)
	rewritten := map[string]string{"sed": "i"}
	for _, name := range names {
		d := builtins[name]
		var bad []string
		for _, l := range letters {
			if !strings.ContainsRune(d.opts.shorts+rewritten[name], l) {
				bad = append(bad, "-"+string(l))
			}
		}
		bad = append(bad, "--no-such-option", "--help", "--version")
		// and the options it takes but ignores, as they parse
		for _, o := range d.ignored {
			bad = append(bad, optionWord(d.opts, o))
		}
		for _, b := range bad {
			for _, line := range []string{name + " " + b, name + " " + b + " a b"} {
				if ok, _ := CanRun(line); ok {
					t.Errorf("CanRun(%q) = true: %s does not implement %s", line, name, b)
				}
			}
		}
	}
}

// TestCanRunImplementedOptions: the other side, each short option that a
// command implements (with a value if it takes one) stays on the fast
// path, but for the ones whose check refuses some of their forms.
func TestCanRunImplementedOptions(t *testing.T) {
	// options that are in the table and that a check routes anyway in
	// this form (gzip -r, tar -X with no mode, a shell's -s and -c with
	// no script...), or that need another to go with them
	skip := map[string]string{
		"gzip": "r", "gunzip": "r", "zcat": "r", "tar": "cxtfCzjavOkhpom", "sh": "csloeufna", "bash": "csloeufna",
		"dash": "csloeufna", "rg": "tT", // rg -t and -T take a type name, not 1
		"column": "soL", "unzip": "Zq", // column's go with -t (table mode); unzip -q with -l/-t, -Z with -1
	}
	var refused []string
	for _, name := range Builtins() {
		d := builtins[name]
		for i := 0; i < len(d.opts.shorts); i++ {
			l := d.opts.shorts[i]
			if l == ':' || l == '?' || strings.IndexByte(skip[name], l) >= 0 || slices.Contains(d.ignored, string(l)) {
				continue
			}
			line := name + " -" + string(l)
			if i+1 < len(d.opts.shorts) && d.opts.shorts[i+1] == ':' {
				line += " 1"
			}
			operand := " a"
			if name == "env" || name == "xargs" {
				operand = " cat" // the command they run
			}
			if name == "jq" {
				operand = " ." // jq's first operand is its filter, which jqCanRun checks
			}
			if ok, why := CanRun(line + operand); !ok {
				refused = append(refused, line+": "+why)
			}
		}
	}
	sort.Strings(refused)
	// the forms that the fast path takes only alone (uname -a, id -u)
	for _, r := range refused {
		if !strings.HasPrefix(r, "uname ") && !strings.HasPrefix(r, "id ") {
			t.Errorf("refused: %s", r)
		}
	}
}

// optionWord is option o of spec s as a command line gives it, with a
// value if it takes one.
func optionWord(s optSpec, o string) string {
	if len(o) == 1 {
		i := strings.Index(s.shorts, o)
		if i >= 0 && i+1 < len(s.shorts) && s.shorts[i+1] == ':' {
			return "-" + o + " 1"
		}
		return "-" + o
	}
	if slices.Contains(s.longs, o+"=") {
		return "--" + o + "=1"
	}
	return "--" + o
}

func TestOptionWord(t *testing.T) {
	s := opts("ab:", "long", "val=", "opt?")
	for o, want := range map[string]string{"a": "-a", "b": "-b 1", "long": "--long", "val": "--val=1", "opt": "--opt"} {
		if got := optionWord(s, o); got != want {
			t.Errorf("optionWord(%q) = %q, want %q", o, got, want)
		}
	}
	// each ignored option is one of the command's own
	for _, name := range Builtins() {
		d := builtins[name]
		for _, o := range d.ignored {
			if ok, why := CanRun(name + " " + optionWord(d.opts, o) + " a"); ok || !strings.Contains(why, "ignore") {
				t.Errorf("%s %s: routed %v (%s), want routed as ignored", name, o, !ok, why)
			}
		}
	}
}
