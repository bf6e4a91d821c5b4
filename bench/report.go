package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Report is the outcome of Run.
type Report struct {
	Started  time.Time    `json:"started"`
	Seconds  float64      `json:"seconds"` // time taken by the benchmarks
	Quick    bool         `json:"quick"`
	Reps     int          `json:"reps"` // at most; slow benchmarks do fewer
	Baseline string       `json:"baseline"`
	Compare  []Pair       `json:"compare,omitempty"`
	Host     HostInfo     `json:"host"`
	Targets  []TargetInfo `json:"targets"`
	Results  []Result     `json:"results"`
	Notes    []string     `json:"notes,omitempty"`
}

// HostInfo describes the machine.
type HostInfo struct {
	OS        string `json:"os"`
	Kernel    string `json:"kernel"`
	CPUs      int    `json:"cpus"`
	MemMiB    int64  `json:"mem_mib"`
	GoVersion string `json:"go_version"`
	// CPUIdle is how idle CPUs wait (see cpuIdle): it sets what a FUSE
	// round trip costs.
	CPUIdle string `json:"cpu_idle,omitempty"`
}

// TargetInfo is a target with what was learnt about it.
type TargetInfo struct {
	Target
	FSType     string `json:"fs_type"`                // as stat -f names it
	PeakRSSKiB int64  `json:"peak_rss_kib,omitempty"` // VmHWM of Target.PID after the run
}

// Result is one benchmark's outcome on every target.
type Result struct {
	Name    string         `json:"name"`
	Desc    string         `json:"desc"`
	Unit    string         `json:"unit"`
	Better  Better         `json:"better"`
	Targets []TargetResult `json:"targets"` // in the order of the targets
	Ratios  []PairRatio    `json:"ratios,omitempty"`
}

// TargetResult is one benchmark's outcome on one target.
type TargetResult struct {
	Target  string    `json:"target"`
	Median  float64   `json:"median,omitempty"`
	Samples []float64 `json:"samples,omitempty"`
	// Ratio is Median divided by the baseline's median.
	Ratio float64 `json:"ratio_to_baseline,omitempty"`
	// Error, if set, is why the benchmark failed on this target.
	Error string `json:"error,omitempty"`
	// OverBudget tells that repetitions were skipped because the
	// benchmark took longer than Options.Budget on this target.
	OverBudget bool `json:"over_budget,omitempty"`
}

// PairRatio is the ratio of two targets' medians asked for by
// Options.Compare.
type PairRatio struct {
	Pair
	Ratio float64 `json:"ratio"`
}

// Result returns the result of the benchmark named name, if any.
func (r *Report) Result(name string) (Result, bool) {
	for _, res := range r.Results {
		if res.Name == name {
			return res, true
		}
	}
	return Result{}, false
}

// Median returns the median of target's samples, or 0.
func (res Result) Median(target string) float64 {
	for _, tr := range res.Targets {
		if tr.Target == target {
			return tr.Median
		}
	}
	return 0
}

// Failed lists "benchmark on target: error" for every failure.
func (r *Report) Failed() []string {
	var out []string
	for _, res := range r.Results {
		for _, tr := range res.Targets {
			if tr.Error != "" {
				out = append(out, fmt.Sprintf("%s on %s: %s", res.Name, tr.Target, tr.Error))
			}
		}
	}
	return out
}

func (r *Report) computeRatios() {
	for i := range r.Results {
		res := &r.Results[i]
		base := res.Median(r.Baseline)
		for j := range res.Targets {
			tr := &res.Targets[j]
			tr.Ratio = 0
			if base > 0 && tr.Median > 0 {
				tr.Ratio = tr.Median / base
			}
		}
		res.Ratios = nil
		for _, p := range r.Compare {
			a, b := res.Median(p.Target), res.Median(p.Base)
			if a > 0 && b > 0 {
				res.Ratios = append(res.Ratios, PairRatio{Pair: p, Ratio: a / b})
			}
		}
	}
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteMarkdown writes the report as Markdown: a short header, the
// targets, and one table with a row per benchmark.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	mode := "full"
	if r.Quick {
		mode = "quick"
	}
	fmt.Fprintf(&b, "### computerfs bench (%s sizes)\n\n", mode)
	idle := ""
	if r.Host.CPUIdle != "" {
		idle = ", " + r.Host.CPUIdle
	}
	fmt.Fprintf(&b, "%s; %s, %d CPUs%s, %d MiB RAM, kernel %s, %s; benchmarks took %s.\n\n",
		r.Started.Format("2006-01-02 15:04 UTC"), r.Host.OS, r.Host.CPUs, idle, r.Host.MemMiB, r.Host.Kernel,
		r.Host.GoVersion, (time.Duration(r.Seconds) * time.Second).Round(time.Second))

	b.WriteString("| target | file system | directory | peak RSS of server |\n|---|---|---|---:|\n")
	for _, t := range r.Targets {
		rss := ""
		if t.PeakRSSKiB > 0 {
			rss = fmt.Sprintf("%.1f MiB", float64(t.PeakRSSKiB)/1024)
		}
		fmt.Fprintf(&b, "| %s | %s | `%s` | %s |\n", t.Name, t.FSType, t.Dir, rss)
	}
	b.WriteString("\n")

	fmt.Fprintf(&b, "Values are medians of up to %d runs each. Unit ↓: lower is better (times, in seconds); "+
		"unit ↑: higher is better (rates). A column \"A ÷ B\" is A's median divided by B's, in the benchmark's unit: "+
		"for ↓ rows below 1 means A is faster, for ↑ rows above 1 means A is faster.\n\n", r.Reps)

	// Header: benchmark, unit, one column per target, then the ratios.
	var ratioTargets []string
	hasBase := false
	for _, t := range r.Targets {
		if t.Name == r.Baseline {
			hasBase = true
		}
	}
	if hasBase {
		for _, t := range r.Targets {
			if t.Name != r.Baseline {
				ratioTargets = append(ratioTargets, t.Name)
			}
		}
	}
	b.WriteString("| benchmark | what | unit |")
	align := "|---|---|---|"
	for _, t := range r.Targets {
		fmt.Fprintf(&b, " %s |", t.Name)
		align += "---:|"
	}
	for _, name := range ratioTargets {
		fmt.Fprintf(&b, " %s ÷ %s |", name, r.Baseline)
		align += "---:|"
	}
	for _, p := range r.Compare {
		fmt.Fprintf(&b, " %s ÷ %s |", p.Target, p.Base)
		align += "---:|"
	}
	b.WriteString("\n" + align + "\n")

	for _, res := range r.Results {
		arrow := "↓"
		if res.Better == HigherIsBetter {
			arrow = "↑"
		}
		fmt.Fprintf(&b, "| %s | %s | %s %s |", res.Name, escapeCell(res.Desc), res.Unit, arrow)
		byName := map[string]TargetResult{}
		for _, tr := range res.Targets {
			byName[tr.Target] = tr
		}
		for _, t := range r.Targets {
			tr := byName[t.Name]
			switch {
			case tr.Error != "":
				b.WriteString(" error |")
			case tr.Median > 0 && tr.OverBudget:
				fmt.Fprintf(&b, " %s * |", formatValue(tr.Median))
			case tr.Median > 0:
				fmt.Fprintf(&b, " %s |", formatValue(tr.Median))
			default:
				b.WriteString(" – |")
			}
		}
		for _, name := range ratioTargets {
			b.WriteString(" " + formatRatio(byName[name].Ratio) + " |")
		}
		for _, p := range r.Compare {
			v := 0.0
			for _, pr := range res.Ratios {
				if pr.Pair == p {
					v = pr.Ratio
				}
			}
			b.WriteString(" " + formatRatio(v) + " |")
		}
		b.WriteString("\n")
	}

	notes := append([]string(nil), r.Notes...)
	notes = append(notes, "Cold reads drop the kernel's caches (echo 3 > /proc/sys/vm/drop_caches) after writing the file; "+
		"a FUSE daemon's own caches are kept. Without keep_cache, a FUSE file's page cache is also dropped on every open. "+
		"The stat, find and random-read benchmarks are warm: on FUSE, stat and find depend on the entry and attribute timeouts "+
		"the server sets (go-fuse's loopback example: 1 s), and the random reads are served from the page cache "+
		"filled by reading the file once through the same open file.")
	if haltsAtOnce(r.Host.CPUIdle) {
		notes = append(notes, "Idle CPUs halt at once here (haltpoll, guest_halt_poll_ns 0): every FUSE request and answer "+
			"that wakes a thread on another CPU goes through the hypervisor, which makes a round trip about three times "+
			"as long as with polling (BENCH_HALT_POLL_NS=200000 make bench; see docs/performance.md).")
	}
	for _, res := range r.Results {
		for _, tr := range res.Targets {
			if tr.OverBudget && tr.Error == "" {
				notes = append(notes, fmt.Sprintf("\\* %s on %s: only %d run(s), over the time budget.", res.Name, tr.Target, len(tr.Samples)))
			}
		}
	}
	for _, f := range r.Failed() {
		notes = append(notes, "Failed: "+f)
	}
	b.WriteString("\n")
	for _, n := range notes {
		b.WriteString("- " + escapeCell(n) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func escapeCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// formatValue prints v with about three significant digits.
func formatValue(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func formatRatio(v float64) string {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	if v >= 10 {
		return fmt.Sprintf("%.1f", v)
	}
	if v >= 0.1 {
		return fmt.Sprintf("%.2f", v)
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}
