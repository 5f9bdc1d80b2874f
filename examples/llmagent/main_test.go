package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/google/go-cmp/cmp"
)

// TestMain lets the test binary stand for llmagent when the harness
// starts it as the agent (os.Executable is the test binary in tests).
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// catalogue lists kill points in the order a run reaches them: before a
// model call's certificate, between tools, after an effect (in doubt),
// before a commit.
var catalogue = []string{
	"model:1", "before:lookup_stock#1", "after:lookup_stock#1", "before:lookup_stock#2", "commit:1",
	"model:2", "after:place_order#1", "before:place_order#2", "after:place_order#2", "commit:2",
	"model:3", "before:send_email#1", "after:send_email#1", "commit:3",
	"model:4", "commit:4",
}

// drive runs the harness with the stub model and kill points in a fresh
// store, and returns the store's directory and what the harness saw.
func drive(t *testing.T, points []string) (string, *outcome) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "store")
	var log, stderr bytes.Buffer
	h := &harness{exe: exe, env: []string{childEnv + "=1"}, dir: dir, model: "stub", points: points, out: &log, stderr: &stderr}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := h.run(ctx)
	if err != nil {
		t.Fatalf("points %v: %v\n%s\nagent's stderr:\n%s", points, err, log.String(), stderr.String())
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("points %v:\n%s", points, log.String())
	}
	return dir, out
}

// frames returns the run's frame at every seq, and how it ended.
func frames(t *testing.T, dir string) ([]*frame.Frame, engine.RunInfo) {
	t.Helper()
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run, err := db.Run(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var out []*frame.Frame
	for seq := uint64(0); seq <= run.LastSeq(); seq++ {
		f, err := run.StateAt(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out, run.Info()
}

// TestKilledMidStep runs the agent against the stub model and the shop,
// kills it with SIGKILL at seeded points of its steps, starts it again
// each time, and checks that it ends as the run never killed ends: the
// same frame at every seq, completed with the same answer, every effect
// exactly once, a store that verifies deeply.
func TestKilledMidStep(t *testing.T) {
	refDir, ref := drive(t, nil)
	refFrames, refInfo := frames(t, refDir)
	if ref.status != "completed" || refInfo.Status != engine.StatusCompleted || len(refFrames) != 5 {
		t.Fatalf("reference run: %s after %d atoms", ref.status, len(refFrames)-1)
	}
	const keys = 5 // two stock lookups, two orders, one email

	seed := time.Now().UnixNano()
	if s := os.Getenv("LLMAGENT_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (LLMAGENT_SEED=%d reproduces it)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	trials := [][]string{
		// Every kind of point at least once, in one run.
		{"model:1", "before:lookup_stock#2", "after:place_order#1", "before:place_order#2", "commit:2", "after:send_email#1", "model:4", "commit:4"},
	}
	n := 6
	if testing.Short() {
		n = 2
	}
	for range n {
		idx := rng.Perm(len(catalogue))[:1+rng.IntN(4)]
		slices.Sort(idx)
		var pts []string
		for _, i := range idx {
			pts = append(pts, catalogue[i])
		}
		trials = append(trials, pts)
	}
	for _, pts := range trials {
		t.Run(strings.Join(pts, ","), func(t *testing.T) {
			dir, out := drive(t, pts)
			if len(out.killed) == 0 {
				t.Fatalf("never killed (points %v)", pts)
			}
			if out.processes != len(out.killed)+1 {
				t.Errorf("%d processes for %d kills", out.processes, len(out.killed))
			}
			once := 0
			for _, e := range out.effects {
				if e.Effects != 1 {
					t.Errorf("key %s (%s) took effect %d times", e.Key, e.Tool, e.Effects)
				}
				once++
			}
			if once != keys {
				t.Errorf("%d keys took effect, want %d", once, keys)
			}
			got, info := frames(t, dir)
			if diff := cmp.Diff(refFrames, got); diff != "" {
				t.Fatalf("frames differ from the run never killed (-never killed +killed at %v):\n%s", out.killed, diff)
			}
			if info.Status != engine.StatusCompleted || string(info.Result) != string(refInfo.Result) || out.result != ref.result {
				t.Errorf("ended %v %q, want completed %q", info.Status, info.Result, refInfo.Result)
			}
			rep, err := engine.Verify(context.Background(), dir, &engine.VerifyOptions{Deep: true})
			if err != nil || !rep.OK {
				t.Fatalf("verify: %v %v", err, rep.Failures)
			}
		})
	}
}

// TestDemo runs the program as a user does: exit 0, each effect once, the
// store intact, and the narration of the two kills.
func TestDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	var out, errb bytes.Buffer
	t.Setenv("OPENAI_BASE_URL", "")
	if code := run([]string{"--dir", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{
		">>> SIGKILL at after:place_order#1", "reconciled place_order (in doubt): it took effect",
		">>> SIGKILL at commit:3", "run completed after 4 steps: Ordered 2 bags", "verify --deep: intact",
		"3 processes, killed at: after:place_order#1, then commit:3",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "effects 1, calls 1  ok"); n != 5 {
		t.Errorf("%d effects listed once, want 5:\n%s", n, out.String())
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"--kill", "later"}, {"--kill", "before:x"}, {"extra"}, {"--nope"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	if code := run([]string{agentCmd, "--dir", "x"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
		t.Errorf("agent without its flags: exit %d, want 2", code)
	}
}
