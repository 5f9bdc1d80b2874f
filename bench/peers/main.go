package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// config is the parsed command line.
type config struct {
	runs      []int
	atoms     int
	reps      int
	stores    []string
	history   []int
	hruns     int
	maxWrite  float64 // bytes
	dir       string
	seed      int64
	plots     string
	md        string
	skipWrite bool
	skipHist  bool
	breakdown bool
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// parseInts parses a comma-separated list of positive integers.
func parseInts(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-%s: %q is not a positive integer", flagName, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var names []string
	for _, p := range registry {
		names = append(names, p.name)
	}
	runs := fs.String("runs", "1,16,64", "numbers of concurrent runs R to measure, comma-separated")
	atoms := fs.Int("atoms", 200, "atoms per run A in the throughput/latency experiment")
	reps := fs.Int("reps", 3, "repetitions of every configuration; tables report medians")
	stores := fs.String("stores", strings.Join(names, ","), "stores to measure, comma-separated")
	history := fs.String("history", "100,1000,5000", "history sizes (atoms per run) of the restart experiment; empty to skip")
	hruns := fs.Int("hruns", 1, "runs in the restart experiment")
	maxWrite := fs.Int("maxwrite-mib", 2048, "skip restart-experiment sizes for which a whole-state-per-atom store would write more than this many MiB")
	dir := fs.String("dir", os.TempDir(), "directory on the disk to measure (a real disk, not tmpfs); stores are created and removed under it")
	seed := fs.Int64("seed", 1, "workload seed")
	plots := fs.String("plots", "plots", "directory for the SVG plots; empty to skip them")
	md := fs.String("md", "", "also write the Markdown report to this file")
	skipWrite := fs.Bool("skip-write", false, "skip the throughput/latency experiment")
	breakdown := fs.Bool("breakdown", false, "print, per sample, the bytes per atom of each entry of the store's directory after the restore")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q (flags only)", fs.Args())
	}
	c := &config{atoms: *atoms, reps: *reps, hruns: *hruns, maxWrite: float64(*maxWrite) * (1 << 20),
		dir: *dir, seed: *seed, plots: *plots, md: *md, skipWrite: *skipWrite, breakdown: *breakdown}
	var err error
	if c.runs, err = parseInts("runs", *runs); err != nil {
		return nil, err
	}
	if c.history, err = parseInts("history", *history); err != nil {
		return nil, err
	}
	c.skipHist = len(c.history) == 0
	if c.skipWrite && c.skipHist {
		return nil, fmt.Errorf("nothing to measure: -skip-write and an empty -history")
	}
	if !c.skipWrite && len(c.runs) == 0 {
		return nil, fmt.Errorf("-runs: no value")
	}
	if c.atoms < 1 || c.reps < 1 || c.hruns < 1 || *maxWrite < 1 {
		return nil, fmt.Errorf("-atoms, -reps, -hruns and -maxwrite-mib must be >= 1 (got %d, %d, %d, %d)", c.atoms, c.reps, c.hruns, *maxWrite)
	}
	for _, s := range strings.Split(*stores, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.stores = append(c.stores, s)
		}
	}
	if len(c.stores) == 0 {
		return nil, fmt.Errorf("-stores: no store named")
	}
	return c, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	peers, err := lookup(c.stores)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	base, err := os.MkdirTemp(c.dir, "continuum-peers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	ctx := context.Background()
	progress := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }

	rep := &report{
		When:    time.Now().UTC(),
		Command: "go run . " + strings.Join(args, " "),
		Machine: machine(),
		Dir:     c.dir,
		Atoms:   c.atoms,
		Reps:    c.reps,
		HRuns:   c.hruns,
	}
	for _, p := range peers {
		rep.Stores = append(rep.Stores, p.name)
	}

	if !c.skipWrite {
		maxR := 0
		for _, r := range c.runs {
			maxR = max(maxR, r)
		}
		progress("generating %d runs x %d atoms (seed %d)", maxR, c.atoms, c.seed)
		sc, err := newScript(maxR, c.atoms, c.seed)
		if err != nil {
			return err
		}
		rep.PayloadPerAtom = float64(sc.recordBytes(maxR)) / float64(maxR*c.atoms)
		for i := 0; i < c.reps; i++ {
			for _, r := range c.runs {
				for _, p := range peers {
					smp, err := measureConfig(ctx, p, base, sc, r)
					if err != nil {
						return fmt.Errorf("%s, R=%d, rep %d: %w", p.name, r, i+1, err)
					}
					progress("rep %d R=%-3d %-16s %9.0f atoms/s  p50 %8.2f ms  p99 %8.2f ms  %7.0f B/atom (empty %d KiB)  open %6.1f ms  restore 1 %7.2f ms  all %8.1f ms",
						i+1, r, p.name, smp.AtomsPerSec, ms(smp.P50), ms(smp.P99), smp.BytesPerAtom, smp.EmptyBytes>>10,
						ms(smp.Restore.Open), ms(smp.Restore.RestoreOne), ms(smp.Restore.RestoreAll))
					if c.breakdown {
						progress("    after the restore, B/atom: %s", breakdownLine(smp.Reopened, r*c.atoms))
					}
					rep.Samples = append(rep.Samples, smp)
				}
			}
		}
	}

	if !c.skipHist {
		for _, h := range c.history {
			progress("generating %d runs x %d atoms for the restart experiment", c.hruns, h)
			sc, err := newScript(c.hruns, h, c.seed)
			if err != nil {
				return err
			}
			perAtom := float64(sc.recordBytes(c.hruns)) / float64(c.hruns*h)
			for _, p := range peers {
				if w := historyWrite(p, c.hruns, h, perAtom); p.quadratic && w > c.maxWrite {
					progress("skip %s at %d atoms: it would write about %.1f GiB (-maxwrite-mib %.0f)", p.name, h, w/(1<<30), c.maxWrite/(1<<20))
					rep.Skipped = append(rep.Skipped, skipped{Store: p.name, History: h, Bytes: w})
					continue
				}
				for i := 0; i < c.reps; i++ {
					rr, err := measureHistory(ctx, p, base, sc, c.hruns)
					if err != nil {
						return fmt.Errorf("%s, history %d, rep %d: %w", p.name, h, i+1, err)
					}
					progress("rep %d history %-5d %-16s open %7.2f ms  restore %8.2f ms  restart %8.2f ms",
						i+1, h, p.name, ms(rr.Open), ms(rr.RestoreOne), ms(rr.Restart()))
					rep.History = append(rep.History, histSample{Store: p.name, Atoms: h, Restore: rr})
				}
			}
		}
	}

	var md strings.Builder
	rep.markdown(&md)
	if _, err := io.WriteString(stdout, md.String()); err != nil {
		return err
	}
	if c.md != "" {
		if err := os.WriteFile(c.md, []byte(md.String()), 0o644); err != nil {
			return err
		}
	}
	if c.plots != "" {
		files, err := rep.plots(c.plots)
		if err != nil {
			return err
		}
		for _, f := range files {
			progress("wrote %s", f)
		}
	}
	return nil
}

// machine describes the computer the figures come from.
func machine() string {
	kernel := "unknown kernel"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%d CPUs (GOMAXPROCS %d), %s/%s, kernel %s, %s",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, kernel, runtime.Version())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median returns the median of vals (the mean of the middle two for an
// even count); 0 for none.
func median(vals []float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	s := append([]float64(nil), vals...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// plotPaths names the plot files under dir.
func plotPaths(dir string) map[string]string {
	return map[string]string{
		"throughput": filepath.Join(dir, "throughput.svg"),
		"p50":        filepath.Join(dir, "latency_p50.svg"),
		"p99":        filepath.Join(dir, "latency_p99.svg"),
		"restart":    filepath.Join(dir, "restart.svg"),
	}
}

// breakdownLine formats the bytes per atom of each entry, largest first,
// then their total.
func breakdownLine(m map[string]int64, atoms int) string {
	names := make([]string, 0, len(m))
	var total int64
	for n, b := range m {
		names = append(names, n)
		total += b
	}
	sort.Slice(names, func(i, j int) bool { return m[names[i]] > m[names[j]] })
	var sb strings.Builder
	for _, n := range names {
		fmt.Fprintf(&sb, "%s %.0f, ", n, float64(m[n])/float64(atoms))
	}
	fmt.Fprintf(&sb, "total %.0f", float64(total)/float64(atoms))
	return sb.String()
}
