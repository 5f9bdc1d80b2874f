package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// TestDemo runs the demo end to end: the agent child (this test binary, see
// TestMain) is killed in the middle of the billing charge of the second
// region and restarted; then the finished run is forked to reconsider the
// third region with a discounted fee. Every effect must happen once, the
// fork must repeat none of the original's and make its one changed call
// under a key of its own, both runs must end, and the store must verify.
// The output is compared with testdata/demo.golden, times and paths
// masked.
func TestDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	var stdout, stderr bytes.Buffer
	d, code := setupDemo([]string{"--dir", dir}, &stdout, &stderr)
	if d == nil {
		t.Fatalf("setup: exit %d; stderr:\n%s", code, stderr.String())
	}
	code = d.run(context.Background())
	out, errOut := stdout.String(), stderr.String()
	// What the downstream saw is checked first, apart from the demo's own
	// verdict (its exit code), which relies on the same kind of count.
	checkCalls(t, d)
	if code != cli.ExitOK {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if errOut != "" {
		t.Errorf("stderr: %s", errOut)
	}
	for _, want := range []string{
		"SIGKILL", "atom 8 was interrupted", "billing.charge         eu-west-1        1  ok",
		"12 side effects, each exactly once", "verify: INTACT", "Run.End: deploy-checkout-v2 completed",
		"forked at 9 into deploy-checkout-v2-discount: its state there is the original's",
		"atom 13  email.send             ap-southeast-2  unchanged: served from the ledger, no call",
		"atom 12  billing.charge         ap-southeast-2  changed: a new call, under the fork's own key",
		"└─ deploy-checkout-v2-discount, forked at 9: completed, atoms 10-14, fees 12700 cents",
		"13 keys, each called once", "verify --deep: INTACT: 2 runs",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, bad := range []string{"DUPLICATE", "WRONG", "DIFFERS", "DID NOT"} {
		if strings.Contains(out, bad) {
			t.Errorf("output says %s:\n%s", bad, out)
		}
	}
	golden(t, "demo", normalize(out, map[string]string{dir: "$DIR"}))
	checkStore(t, dir)
}

// checkCalls asserts what the downstream saw, call by call: one call
// under each key, each taking effect (exactly once per key); the keys are
// the default keys of the original's twelve actions and, of the fork, only
// that of its changed charge, which carried the discounted fee; the fork
// repeated none of the original's calls.
func checkCalls(t *testing.T, d *demo) {
	t.Helper()
	want := map[string]uint64{} // key -> seq
	for _, s := range d.script {
		if s.tool != "" {
			want[demoKey(demoRun, s.seq)] = s.seq
		}
	}
	if len(want) != 4*len(demoRegions) {
		t.Fatalf("the script has %d actions, want %d", len(want), 4*len(demoRegions))
	}
	region := demoRegions[demoForkRegion]
	chargeSeq := stepSeq(d.forkScript, region, "charge")
	forkKey := demoKey(demoForkRun, chargeSeq)
	want[forkKey] = chargeSeq

	seen := map[string]int{}
	for _, c := range d.calls {
		seen[c.Key]++
		seq, ok := want[c.Key]
		if !ok {
			t.Errorf("a call under key %q (%s %s), which no step should use", c.Key, c.Tool, c.Args)
			continue
		}
		if !c.Effect || c.Effects != 1 {
			t.Errorf("key %q: the call took effect %v, %d effects under the key; want one effect", c.Key, c.Effect, c.Effects)
		}
		step := d.script[seq-1]
		if c.Key == forkKey {
			step = d.forkScript[seq-1]
		}
		if c.Tool != step.tool || !bytes.Equal(c.Args, step.args) {
			t.Errorf("key %q: call %s %s, want step %d's %s %s", c.Key, c.Tool, c.Args, seq, step.tool, step.args)
		}
		if c.Key == forkKey || c.Key == demoKey(demoRun, chargeSeq) {
			var a struct {
				Amount int `json:"amount_cents"`
			}
			wantFee := demoFeeCents
			if c.Key == forkKey {
				wantFee = demoDiscountCents
			}
			if err := json.Unmarshal(c.Args, &a); err != nil || a.Amount != wantFee {
				t.Errorf("the %s charge under %q: amount %d (%v), want %d", region, c.Key, a.Amount, err, wantFee)
			}
		}
	}
	for key := range want {
		if seen[key] != 1 {
			t.Errorf("key %q: %d calls, want exactly 1", key, seen[key])
		}
	}
	if len(d.calls) != len(want) {
		t.Errorf("the downstream received %d calls, want %d (one per key)", len(d.calls), len(want))
	}
}

// checkStore asserts what the demo leaves: a store that its public key
// verifies with no warning (what verify --strict --pubkey checks), the
// original run and its fork, both completed, with the lineage, the atoms
// and the states the demo promises.
func checkStore(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	b, err := os.ReadFile(dir + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	origin, pub, err := chain.ParsePublicKeyFile(b)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := engine.Verify(ctx, dir, &engine.VerifyOptions{PublicKey: ed25519.PublicKey(pub), Origin: origin, Deep: true})
	if err != nil || !rep.OK || len(rep.Warnings) != 0 || rep.CheckpointsVerified == 0 || len(rep.Runs) != 2 {
		t.Errorf("verify with the demo's public key: %v; report %+v", err, rep)
	}
	for _, rr := range rep.Runs {
		if !rr.Ended || rr.UnsignedTail != 0 {
			t.Errorf("verify: run %q ended %v with %d unsigned atoms; want ended, signed to the end", rr.RunID, rr.Ended, rr.UnsignedTail)
		}
	}
	in, err := engine.Inspect(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := in.Run(demoRun)
	if !ok || r.Atoms != 14 || r.LastSeq != 14 || r.Interrupted != 0 || len(r.InDoubt) != 0 || r.Status != "completed" || r.Parent != "" {
		t.Errorf("the demo's run after the demo: %+v (found %v), want 14 atoms, completed, nothing interrupted or in doubt", r, ok)
	}
	at := demoForkAt()
	fr, ok := in.Run(demoForkRun)
	if !ok || fr.Atoms != 14-at || fr.LastSeq != 14 || fr.Status != "completed" || fr.Parent != demoRun || fr.ForkedAt != at || len(fr.InDoubt) != 0 {
		t.Errorf("the fork after the demo: %+v (found %v), want %d atoms to seq 14, completed, forked from %q at %d",
			fr, ok, 14-at, demoRun, at)
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	done, err := db.Runs(engine.StatusCompleted)
	if err != nil || len(done) != 2 || done[0].ID != demoRun || done[1].ID != demoForkRun ||
		done[1].Parent != demoRun || done[1].ForkedAt != at {
		t.Errorf("completed runs: %+v, %v; want %q and its fork %q at %d", done, err, demoRun, demoForkRun, at)
	}
	orig, err := db.Run(ctx, demoRun)
	if err != nil {
		t.Fatal(err)
	}
	fork, err := db.Run(ctx, demoForkRun)
	if err != nil {
		t.Fatal(err)
	}
	state := func(r *engine.Run, seq uint64) *frame.Frame {
		t.Helper()
		s, err := r.StateAt(ctx, seq)
		if err != nil {
			t.Fatalf("run %q StateAt(%d): %v", r.ID(), seq, err)
		}
		return s
	}
	if o, f := state(orig, at), state(fork, at); !bytes.Equal(frame.AppendFrame(nil, o), frame.AppendFrame(nil, f)) {
		t.Errorf("state at the fork point %d: the fork's differs from the original's", at)
	}
	// Past the fork point the states hold what the fork's agent did: the
	// original's results where it repeated a step (its certificates), its
	// own discounted charge where it changed one.
	region := demoRegions[demoForkRegion]
	o, f := state(orig, 14), state(fork, 14)
	for _, kind := range []string{"bucket", "migration", "email"} {
		k := region + "." + kind
		if !bytes.Equal(o.Memory[k], f.Memory[k]) || len(o.Memory[k]) == 0 {
			t.Errorf("memory %q: the fork's %s, the original's %s; want the original's result", k, f.Memory[k], o.Memory[k])
		}
	}
	k := region + ".charge"
	if bytes.Equal(o.Memory[k], f.Memory[k]) || !bytes.Contains(f.Memory[k], fmt.Appendf(nil, `"amount_cents":%d`, demoDiscountCents)) {
		t.Errorf("memory %q: the fork's %s, the original's %s; want the fork's own discounted charge", k, f.Memory[k], o.Memory[k])
	}
}
