package tamper

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

var (
	flagLong      = flag.Bool("long", false, "run the whole suite (all scenarios, 48 flips and 8 cuts per file; also CONTINUUM_LONG=1); without it, the -short sizes")
	flagOn        = flag.Bool("tamper", true, "run the tamper suite (-tamper=false or CONTINUUM_TAMPER=0 skips it)")
	flagSeed      = flag.Int64("tamper.seed", 0, "seed of the store and the damage plan (0: from the clock)")
	flagFlips     = flag.Int("tamper.flips", 0, "flipped bytes per file (default 48 with -long, 6 otherwise)")
	flagCuts      = flag.Int("tamper.cuts", 0, "truncations per file (default 8 with -long, 3 otherwise)")
	flagScenarios = flag.Int("tamper.scenarios", -1, "run at most this many scenarios, a seeded sample (default all with -long, 300 otherwise; 0: all)")
	flagOnly      = flag.String("tamper.only", "", "run only the scenarios whose name matches this regexp")
	flagDeadline  = flag.Duration("tamper.deadline", 2*time.Minute, "deadline of each oracle child: a hang guard, far past what a child needs on a loaded machine")
	flagReport    = flag.String("tamper.report", "", "also write the report (Markdown) to this file")
	flagJSON      = flag.String("tamper.json", "", "also write every scenario's verdict, reason and differences (JSON) to this file, to compare two runs on one kept store")
	flagKeep      = flag.String("tamper.keep", "", "keep the store (DIR/build) and every failed scenario's damaged copy (DIR/N) under this directory")
	flagCLI       = flag.Bool("tamper.cli", true, "also run continuumctl (verify, inspect, stats, export) on the damaged copies")
	flagCLIEvery  = flag.Int("tamper.cli.every", 0, "run continuumctl on one scenario in N (default 1 with -long, 4 otherwise)")
	flagFrom      = flag.String("tamper.from", "", "reuse the store kept by an earlier -tamper.keep DIR instead of building one (with the same seed: the same bytes damaged)")
)

func TestMain(m *testing.M) {
	if IsChild() {
		os.Exit(ChildMain())
	}
	code := m.Run()
	if history.dir != "" {
		os.RemoveAll(history.dir) // BenchmarkRestart's store
	}
	os.Exit(code)
}

// TestPristine builds a store and checks that the oracle reads it back as
// built (every run, every seq, every past action's certified result, the
// action left in doubt) and that verify passes it: the suite's baseline,
// always on.
func TestPristine(t *testing.T) {
	seed := seedFlag()
	t.Logf("seed %d", seed)
	ctx := context.Background()
	st, err := Build(ctx, t.TempDir(), seed)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Deadline: time.Minute}
	ans, err := oracleRun(ctx, &cfg, st, t.TempDir(), nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPristine(&cfg, st, ans); err != nil {
		t.Fatal(err)
	}
	// A plain flip in the middle of a log record's payload must never be
	// harmless: the engine would read a different record or refuse it.
	recs, err := logRecords(ctx, st.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var rec *logRecord
	for i := range recs {
		if recs[i].kind == "atom" && recs[i].run == "alpha" && recs[i].seq == 3 {
			rec = &recs[i]
		}
	}
	if rec == nil {
		t.Fatal("no atom record of run alpha seq 3 in the log")
	}
	rel := fmt.Sprintf("wal/%016x.wal", rec.pos.Segment)
	off := (rec.pos.Offset + rec.end) / 2
	sc := Scenario{Name: "flip mid-record", File: rel, Kind: fileKind(rel), Damage: Flip, Offset: off, Mask: 0x10,
		Reach: reach(rel, recs, off, off+1)}
	cr, got, err := oracleChild(ctx, &cfg, st, t.TempDir(), &sc, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	o := classify(&sc, ans, cr, got)
	t.Logf("%s: %s %s", sc.Name, o.Class, o.Why)
	if o.Class == Harmless {
		t.Errorf("a flipped byte in atom alpha/3 was classified harmless: the oracle does not see the log")
	}
	if len(o.Diffs) == 0 && !o.Plain && !o.Deep {
		t.Errorf("a flipped byte in atom alpha/3 changed no answer and no verdict")
	}
}

// TestTamper is the tamper suite (see the package doc). It runs with every
// go test (at CI size under -short); -tamper=false or CONTINUUM_TAMPER=0
// skips it.
func TestTamper(t *testing.T) { runSuite(t, false) }

// TestTamperSealed is the tamper suite on an encrypted store
// (Options.Keyring): every reader gets the store's keyring, continuumctl
// --keyring. Under -short it samples half as many scenarios as TestTamper.
func TestTamperSealed(t *testing.T) { runSuite(t, true) }

func runSuite(t *testing.T, sealed bool) {
	if !*flagOn || os.Getenv("CONTINUUM_TAMPER") == "0" {
		t.Skip("the tamper suite is off (-tamper=false or CONTINUUM_TAMPER=0)")
	}
	seed := seedFlag()
	flips, cuts, max := *flagFlips, *flagCuts, *flagScenarios
	if flips == 0 {
		flips = pick(6, 48)
	}
	if cuts == 0 {
		cuts = pick(3, 8)
	}
	if max < 0 {
		max = pick(300, 0)
		if sealed {
			max = pick(150, 0)
		}
	}
	cfg := Config{Seed: seed, Sealed: sealed, Flips: flips, Cuts: cuts, Max: max, Deadline: *flagDeadline, Workers: 2,
		Work: t.TempDir(), Keep: *flagKeep, From: *flagFrom}
	if *flagOnly != "" {
		re, err := regexp.Compile(*flagOnly)
		if err != nil {
			t.Fatalf("-tamper.only: %v", err)
		}
		cfg.Only = re
	}
	cmd := fmt.Sprintf("go test ./internal/tamper -run %s -tamper -tamper.seed %d -tamper.flips %d -tamper.cuts %d -tamper.scenarios %d",
		t.Name()+"$", seed, flips, cuts, max)
	if testing.Short() {
		cmd = strings.Replace(cmd, "go test", "go test -short", 1)
	}
	if *flagFrom != "" {
		cmd += " -tamper.from " + *flagFrom
	}
	t.Logf("seed %d; repeat with: %s", seed, cmd)
	if *flagCLI {
		bin, err := BuildCLI(context.Background(), cfg.Work)
		if err != nil {
			t.Fatal(err)
		}
		cfg.CLI, cfg.CLIEvery = bin, *flagCLIEvery
		if cfg.CLIEvery == 0 {
			cfg.CLIEvery = pick(4, 1)
		}
	}
	cfg.Progress = func(done, total int, o Outcome) {
		if o.Class.Failed() {
			t.Logf("[%d/%d] %s %s: %s", done, total, o.Class, o.Scenario.Name, o.Why)
		} else if testing.Verbose() && done%50 == 0 {
			t.Logf("[%d/%d] ...", done, total)
		}
	}
	res, err := Run(context.Background(), cfg)
	if res != nil {
		res.Command = cmd
		var b strings.Builder
		res.WriteReport(&b)
		t.Log("\n" + b.String())
		if *flagReport != "" {
			if err := os.WriteFile(*flagReport, []byte(b.String()), 0o644); err != nil {
				t.Error(err)
			}
		}
		if *flagJSON != "" {
			if err := writeAnswer(*flagJSON, res.Outcomes, ""); err != nil {
				t.Error(err)
			}
		}
		if f := res.Failed(); len(f) > 0 {
			t.Errorf("%d of %d scenarios failed (missed, panic or hang); seed %d", len(f), len(res.Outcomes), seed)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

func seedFlag() int64 {
	if *flagSeed != 0 {
		return *flagSeed
	}
	return time.Now().UnixNano()
}

// pick returns full with -long (or CONTINUUM_LONG=1) and without -short,
// short otherwise: the whole suite (every scenario, 48 flips and 8 cuts per
// file) is a long suite, which .ci/run and bench/ ask for.
func pick[T any](short, full T) T {
	if testing.Short() || !(*flagLong || os.Getenv("CONTINUUM_LONG") == "1") {
		return short
	}
	return full
}
