package main

import (
	"bytes"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary play the child: the harness re-executes
// its own binary with -child first.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestHarness runs a short SIGKILL campaign end to end and checks that it
// reports a pass with every kind of kill plan it made.
func TestHarness(t *testing.T) {
	n := 30
	if testing.Short() {
		n = 12
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	var out bytes.Buffer
	c := &config{cycles: n, runs: 2, atoms: 8, seed: seed, dir: t.TempDir()}
	if code := runParent(c, &out); code != 0 {
		t.Fatalf("exit status %d:\n%s", code, out.String())
	}
	t.Log(out.String())
	for _, want := range []string{"RESULT: PASS", "0 lost", "0 with more than one effect"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if !strings.Contains(out.String(), "cycles (SIGKILLs)") {
		t.Error("report lacks the cycle count")
	}
}

// TestDrawPlan checks that the kill plans cover every kind with sane
// parameters.
func TestDrawPlan(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	seen := map[string]int{}
	for i := 0; i < 2000; i++ {
		p := drawPlan(rng)
		seen[p.kind]++
		switch {
		case p.k < 1:
			t.Fatalf("plan %v: k < 1", p)
		case p.kind == planDelay && (p.delay < 5*time.Millisecond || p.delay > 80*time.Millisecond):
			t.Fatalf("plan %v: delay out of range", p)
		case p.delay < 0:
			t.Fatalf("plan %v: negative delay", p)
		}
	}
	for _, k := range planKinds {
		if seen[k] < 2000/20 {
			t.Errorf("plan %s drawn %d times in 2000", k, seen[k])
		}
	}
}

func TestPercentile(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var d []time.Duration
		for _, x := range n {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	for _, tc := range []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{ms(7), 0.99, 7 * time.Millisecond},
		{ms(5, 1, 3, 2, 4), 0.5, 3 * time.Millisecond},
		{ms(5, 1, 3, 2, 4), 1, 5 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
	} {
		if got := percentile(tc.in, tc.p); got != tc.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.in, tc.p, got, tc.want)
		}
	}
}
