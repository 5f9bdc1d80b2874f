package main

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
)

// TestDemo runs the demo end to end: the agent child (this test binary, see
// TestMain) is killed in the middle of the billing charge of the second
// region and restarted; every effect must happen once and the store must
// verify. The output is compared with testdata/demo.golden, times and
// paths masked.
func TestDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	code, out, errOut := runCLI("--dir", dir)
	if code != cli.ExitOK {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if errOut != "" {
		t.Errorf("stderr: %s", errOut)
	}
	for _, want := range []string{
		"SIGKILL", "atom 8 was interrupted", "billing.charge         eu-west-1        1  ok",
		"12 side effects, each exactly once", "verify: INTACT",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "DUPLICATE") {
		t.Errorf("a side effect happened twice:\n%s", out)
	}
	golden(t, "demo", normalize(out, map[string]string{dir: "$DIR"}))

	// The public key the demo leaves next to the store verifies it with
	// no warning (what verify --strict --pubkey checks), and the store
	// holds the 14 atoms.
	ctx := context.Background()
	b, err := os.ReadFile(dir + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	origin, pub, err := chain.ParsePublicKeyFile(b)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := engine.Verify(ctx, dir, &engine.VerifyOptions{PublicKey: ed25519.PublicKey(pub), Origin: origin})
	if err != nil || !rep.OK || len(rep.Warnings) != 0 || rep.CheckpointsVerified == 0 {
		t.Errorf("verify with the demo's public key: %v; report %+v", err, rep)
	}
	in, err := engine.Inspect(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if r, ok := in.Run(demoRun); !ok || r.Atoms != 14 || r.LastSeq != 14 || r.Interrupted != 0 || len(r.InDoubt) != 0 {
		t.Errorf("the demo's run after the demo: %+v (found %v), want 14 atoms, nothing interrupted or in doubt", r, ok)
	}
}
