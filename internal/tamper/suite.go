package tamper

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config configures a run of the suite.
type Config struct {
	Seed int64
	// Sealed builds an encrypted store (Options.Keyring): the suite then
	// runs every reader with its keyring, continuumctl with --keyring.
	Sealed bool
	Flips  int // flipped bytes per file (PlanOptions.Flips)
	Cuts   int // truncations per file (PlanOptions.Cuts)
	// Max bounds the scenarios run: a seeded sample of the plan (0: all).
	Max int
	// Only, if set, runs the scenarios whose name it matches.
	Only *regexp.Regexp
	// Deadline is each oracle child's (the pristine one gets ten times as
	// long, since a cold machine is slow to start).
	Deadline time.Duration
	// Workers is how many children run at once.
	Workers int
	// Work is a scratch directory (the store, its copies, the children's
	// files).
	Work string
	// Keep, if set, is where the damaged copy of every failed scenario is
	// kept (as Keep/<n>/store, with its answers, scenario and the oracle's
	// stderr beside it), and the store with its older copies (Keep/build,
	// see Store.Save), which From can reuse.
	Keep string
	// From, if set, is a Keep directory whose store is reused instead of
	// building one: the same seed then damages exactly the same bytes.
	From string
	// CLI, if set, is the continuumctl binary the oracle also runs on the
	// damaged copies (see BuildCLI): on one scenario in CLIEvery (0 or 1:
	// every one), since it costs a dozen processes per scenario.
	CLI      string
	CLIEvery int
	// Progress, if set, is called after each scenario.
	Progress func(done, total int, o Outcome)
}

// Result is what a run of the suite found.
type Result struct {
	Seed     int64
	Command  string
	Store    *Store
	Pristine *Answers
	Planned  int // scenarios in the plan, before Only and Max
	Deadline time.Duration
	Outcomes []Outcome
	Elapsed  time.Duration
}

// Failed lists the outcomes that fail the suite.
func (r *Result) Failed() []Outcome {
	var out []Outcome
	for _, o := range r.Outcomes {
		if o.Class.Failed() {
			out = append(out, o)
		}
	}
	return out
}

// Run builds a store, plans the scenarios and runs each in an oracle child.
// It returns an error only when the suite cannot run at all (the store
// cannot be built, or the pristine store does not read back as built).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	start := time.Now()
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.Deadline <= 0 {
		// A hang guard, not a timing assertion: far past what a child
		// needs on a loaded machine (a fixed 5 s was missed at load 13-22).
		cfg.Deadline = 2 * time.Minute
	}
	var st *Store
	var err error
	if cfg.From != "" {
		st, err = Load(filepath.Join(cfg.From, "build"))
	} else {
		st, err = buildStore(ctx, filepath.Join(cfg.Work, "build"), cfg.Seed, cfg.Sealed)
	}
	if err != nil {
		return nil, err
	}
	plan, err := Plan(ctx, st, PlanOptions{Seed: cfg.Seed, Flips: cfg.Flips, Cuts: cfg.Cuts})
	if err != nil {
		return nil, err
	}
	res := &Result{Seed: cfg.Seed, Store: st, Planned: len(plan), Deadline: cfg.Deadline}
	if cfg.Only != nil {
		plan = slices.DeleteFunc(plan, func(s Scenario) bool { return !cfg.Only.MatchString(s.Name) })
	}
	if cfg.Max > 0 && len(plan) > cfg.Max {
		r := rand.New(rand.NewPCG(uint64(cfg.Seed), 3))
		idx := r.Perm(len(plan))[:cfg.Max]
		slices.Sort(idx)
		sample := make([]Scenario, 0, cfg.Max)
		for _, i := range idx {
			sample = append(sample, plan[i])
		}
		plan = sample
	}
	if cfg.Keep != "" && cfg.Keep != cfg.From {
		if err := st.Save(filepath.Join(cfg.Keep, "build")); err != nil {
			return nil, err
		}
	}

	pristine, err := oracleRun(ctx, &cfg, st, filepath.Join(cfg.Work, "pristine"), nil, 10*cfg.Deadline)
	if err != nil {
		return nil, err
	}
	if err := checkPristine(&cfg, st, pristine); err != nil {
		return nil, err
	}
	res.Pristine = pristine

	res.Outcomes = make([]Outcome, len(plan))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
		errs []error
	)
	next := make(chan int)
	for w := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				sc := &plan[i]
				dir := filepath.Join(cfg.Work, fmt.Sprintf("w%d", w))
				c := cfg
				if cfg.CLIEvery > 1 && i%cfg.CLIEvery != 0 {
					c.CLI = ""
				}
				o, cr, got, err := runScenario(ctx, &c, st, pristine, sc, dir)
				if err == nil && o.Class.Failed() && cfg.Keep != "" {
					err = keep(cfg.Keep, i, st, sc, cr, got)
				}
				os.RemoveAll(dir)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("scenario %q: %w", sc.Name, err))
				}
				res.Outcomes[i] = o
				done++
				if cfg.Progress != nil {
					cfg.Progress(done, len(plan), o)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range plan {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	res.Elapsed = time.Since(start)
	if len(errs) > 0 {
		return res, fmt.Errorf("tamper: %d scenarios could not run, first: %w", len(errs), errs[0])
	}
	return res, ctx.Err()
}

// runScenario damages a copy of the store in dir and classifies what the
// oracle reads from it.
func runScenario(ctx context.Context, cfg *Config, st *Store, pristine *Answers, sc *Scenario, dir string) (Outcome, childRun, *Answers, error) {
	os.RemoveAll(dir)
	cr, got, err := oracleChild(ctx, cfg, st, dir, sc, cfg.Deadline)
	if err != nil {
		return Outcome{Scenario: *sc}, cr, nil, err
	}
	return classify(sc, pristine, cr, got), cr, got, nil
}

// oracleRun runs the oracle on a copy (with sc's damage, if any) and
// insists on an answer.
func oracleRun(ctx context.Context, cfg *Config, st *Store, dir string, sc *Scenario, deadline time.Duration) (*Answers, error) {
	cr, got, err := oracleChild(ctx, cfg, st, dir, sc, deadline)
	if err != nil {
		return nil, err
	}
	if got.missing {
		return nil, fmt.Errorf("tamper: oracle of the pristine store: exit status %d, timed out %v, no answer: %s",
			cr.ExitCode, cr.TimedOut, cr.Stderr)
	}
	return got, nil
}

func oracleChild(ctx context.Context, cfg *Config, st *Store, dir string, sc *Scenario, deadline time.Duration) (childRun, *Answers, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return childRun{}, nil, err
	}
	store := filepath.Join(dir, "store")
	if sc == nil {
		if err := copyTree(st.Dir, store); err != nil {
			return childRun{}, nil, err
		}
	} else if err := sc.Apply(st.Dir, store); err != nil {
		return childRun{}, nil, fmt.Errorf("apply: %w", err)
	}
	var cli []CLIAnswer
	if cfg.CLI != "" {
		var err error
		if cli, err = readCLI(ctx, cfg.CLI, store, dir, st, deadline); err != nil {
			return childRun{}, nil, err
		}
	}
	spec := oracleSpec{Dir: store, KeySeed: st.KeySeed, Sealed: st.Sealed, NonceSeed: 1 << 40, Runs: st.Runs, Actions: st.Actions,
		Out: filepath.Join(dir, "answers.json")}
	cr, err := runChild(ctx, modeOracle, filepath.Join(dir, "spec.json"), &spec, deadline)
	if err != nil {
		return cr, nil, err
	}
	var got Answers
	if err := readAnswer(spec.Out, &got); err != nil {
		return cr, &Answers{CLI: cli, missing: true}, nil
	}
	got.CLI = cli
	return cr, &got, nil
}

// checkPristine checks that the pristine store verifies and reads back as
// it was built: the suite means nothing otherwise.
func checkPristine(cfg *Config, st *Store, p *Answers) error {
	var bad []string
	for _, v := range []VerifyAnswer{p.VerifyPlain, p.VerifyDeep} {
		if v.Detected() || v.Err != "" {
			bad = append(bad, "verify: "+v.Text())
		}
	}
	walk := func(where, s string) {
		if strings.HasPrefix(s, errPrefix) {
			bad = append(bad, where+": "+s)
		}
	}
	for i, rd := range p.Rounds {
		walk(fmt.Sprintf("open %d", i+1), rd.Open)
		walk(fmt.Sprintf("open %d Runs", i+1), rd.Runs)
		if rd.Runs != strings.Join(st.Runs, ",") {
			bad = append(bad, fmt.Sprintf("open %d: runs %q, built %q", i+1, rd.Runs, strings.Join(st.Runs, ",")))
		}
		walk(fmt.Sprintf("open %d continue", i+1), rd.Continue)
		if (i == 1) != (rd.Continue != "") {
			bad = append(bad, fmt.Sprintf("open %d: continue %q", i+1, rd.Continue))
		}
		if rd.Close != "" || rd.Background != "" {
			bad = append(bad, fmt.Sprintf("open %d: close %q, background error %q", i+1, rd.Close, rd.Background))
		}
		for id, ra := range rd.Run {
			q := fmt.Sprintf("open %d run %s", i+1, id)
			for _, s := range append(append([]string{ra.LastSeq, ra.Head, ra.Info, ra.Interrupted, ra.State, ra.StateE, ra.Begin}, ra.StateAt...), ra.Atoms...) {
				walk(q, s)
			}
			j := 0
			for _, a := range st.Actions {
				if a.Run != id {
					continue
				}
				want := outcomeInDoubt
				if a.Outcome == outcomeResult {
					want = "result " + digest(a.Result)
				}
				if j >= len(ra.Do) || ra.Do[j] != want {
					got := "(none)"
					if j < len(ra.Do) {
						got = ra.Do[j]
					}
					bad = append(bad, fmt.Sprintf("%s: Do of %s (seq %d, key %q): %s, want %s", q, a.Tool, a.Seq, a.Key, got, want))
				}
				j++
			}
		}
	}
	if cfg.CLI != "" && len(p.CLI) != len(cliCommands(st.Runs)) {
		bad = append(bad, fmt.Sprintf("continuumctl: %d answers, want %d", len(p.CLI), len(cliCommands(st.Runs))))
	}
	for _, a := range p.CLI {
		if a.Exit != 0 || a.Panicked || a.TimedOut {
			bad = append(bad, fmt.Sprintf("continuumctl %s: exit %d: %s", a.Cmd, a.Exit, a.Stderr))
		}
	}
	walk("tools: Inspect", p.Tools.Inspect)
	walk("tools: Scan", p.Tools.Scan)
	if len(bad) > 0 {
		return fmt.Errorf("tamper: the pristine store does not read back as built:\n  %s", strings.Join(bad, "\n  "))
	}
	return nil
}

// keep saves a failed scenario's damaged copy (as the oracle got it,
// before anything opened it), its answers and the oracle's stderr under
// root.
func keep(root string, i int, st *Store, sc *Scenario, cr childRun, got *Answers) error {
	dst := filepath.Join(root, fmt.Sprint(i))
	if err := sc.Apply(st.Dir, filepath.Join(dst, "store")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dst, "stderr.txt"), []byte(cr.Stderr), 0o600); err != nil {
		return err
	}
	if err := writeAnswer(filepath.Join(dst, "scenario.json"), sc, ""); err != nil {
		return err
	}
	if got != nil {
		return writeAnswer(filepath.Join(dst, "answers.json"), got, "")
	}
	return nil
}
