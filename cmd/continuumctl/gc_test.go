package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// gcStore writes a store whose first segments hold only run "old" (ended
// completed) and whose run "live" is active, signed with key if not nil.
func gcStore(t *testing.T, key ed25519.PrivateKey) string {
	t.Helper()
	return gcStoreOf(t, key, []gcRun{{"old", 40}, {"live", 2}})
}

// gcRun is a run gcStoreOf writes: n atoms; "old" ends completed.
type gcRun struct {
	id string
	n  int
}

// gcStoreOf writes the runs in order, as gcStore does.
func gcStoreOf(t *testing.T, key ed25519.PrivateKey, runs []gcRun) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	opts := storeOptions()
	opts.SigningKey = key
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, r := range runs {
		run, err := db.Run(ctx, r.id)
		if err != nil {
			t.Fatal(err)
		}
		for range r.n {
			a, err := run.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			val := make([]byte, 600)
			for i := range val {
				val[i] = byte(rng.Uint32())
			}
			if err := a.Commit(ctx, new(frame.Delta).Set(fmt.Sprint("k", a.Seq()%5), val)); err != nil {
				t.Fatal(err)
			}
		}
		if r.id == "old" {
			if err := run.End(ctx, engine.StatusCompleted, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGCCommand: gc refuses an active run and a store another process has
// open, deletes by status and reclaims, and verify then lists the run as
// deleted by policy (signed with --key) and passes.
func TestGCCommand(t *testing.T) {
	key := ed25519.NewKeyFromSeed(testSigningSeed)
	dir := gcStore(t, key)
	origin, err := engine.StoreOrigin(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := chain.MarshalSigningKey(origin, key)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "agent.key")
	if err := os.WriteFile(keyFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	pub := publicKeyFile(t, dir, key.Public().(ed25519.PublicKey))

	if code, _, errOut := runCLI("gc", dir, "--run", "live", "--key", keyFile); code != cli.ExitUsage || !strings.Contains(errOut, "active; End it first") {
		t.Fatalf("gc of an active run: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCLI("gc", dir, "--status", "done"); code != cli.ExitUsage || !strings.Contains(errOut, "want completed, failed or cancelled") {
		t.Fatalf("gc --status done: exit %d, %s", code, errOut)
	}
	// Beside an agent that has the store open.
	opts := storeOptions()
	opts.SigningKey = key
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("gc", dir, "--status", "completed")
	db.Close()
	if code != cli.ExitUsage || !strings.Contains(errOut, "another process has the store open") {
		t.Fatalf("gc beside an open store: exit %d, %s", code, errOut)
	}

	code, out, errOut := runCLI("gc", dir, "--status", "completed", "--ended-before", "0s", "--key", keyFile, "--json")
	if code != cli.ExitOK {
		t.Fatalf("gc: exit %d, %s", code, errOut)
	}
	var got gcJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("gc --json: %v\n%s", err, out)
	}
	if len(got.Deleted) != 1 || got.Deleted[0].Run != "old" || got.Deleted[0].Seq != 42 || got.Segments == 0 || got.Bytes == 0 || got.Floor <= 1 {
		t.Fatalf("gc --json: %+v", got)
	}
	code, out, _ = runCLI("gc", dir, "--key", keyFile)
	if code != cli.ExitOK || !strings.Contains(out, "deleted no run") || !strings.Contains(out, "reclaimed nothing") {
		t.Fatalf("a second gc: exit %d, %s", code, out)
	}
	code, out, errOut = runCLI("verify", "--pubkey", pub, "--deep", dir)
	if code != cli.ExitOK || !strings.Contains(out, `run "old": deleted by policy at`) || !strings.Contains(out, "its records reclaimed, the deletion signed") ||
		strings.Contains(out, `run "old": ok`) {
		t.Fatalf("verify after gc: exit %d\n%s%s", code, out, errOut)
	}
	var v verifyJSON
	_, out, _ = runCLI("verify", "--json", "--pubkey", pub, dir)
	if err := json.Unmarshal([]byte(out), &v); err != nil || !v.OK || len(v.Deleted) != 1 || v.Deleted[0].RunID != "old" || !v.Deleted[0].Reclaimed {
		t.Fatalf("verify --json after gc: %v %+v", err, v)
	}
}

// TestGCCommandCompacts: with a live run in the log's first segment, gc
// reclaims the deleted run's segments after it by compaction (and says
// so), and verify passes.
func TestGCCommandCompacts(t *testing.T) {
	dir := gcStoreOf(t, nil, []gcRun{{"pin", 1}, {"old", 40}, {"live", 2}})
	if code, _, errOut := runCLI("gc", dir, "--compact-dead", "2"); code != cli.ExitUsage || !strings.Contains(errOut, "at most 1") {
		t.Fatalf("gc --compact-dead 2: exit %d, %s", code, errOut)
	}
	code, out, errOut := runCLI("gc", dir, "--run", "old", "--json")
	if code != cli.ExitOK {
		t.Fatalf("gc: exit %d, %s", code, errOut)
	}
	var got gcJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("gc --json: %v\n%s", err, out)
	}
	if got.Segments != 0 || got.Compacted == 0 || got.Emptied == 0 || got.CompactedBytes <= 0 {
		t.Fatalf("gc --json: %+v; want the segments after the live first one compacted", got)
	}
	code, out, _ = runCLI("gc", dir)
	if code != cli.ExitOK || !strings.Contains(out, "reclaimed nothing") {
		t.Fatalf("a second gc: exit %d, %s", code, out)
	}
	code, out, errOut = runCLI("verify", "--deep", dir)
	if code != cli.ExitOK || !strings.Contains(out, `run "old": deleted by policy at`) {
		t.Fatalf("verify after gc: exit %d\n%s%s", code, out, errOut)
	}
}

// TestGCPolicyKept: gc by policy says why it kept each run it did not
// delete: active, a status not selected, an end time not before the
// cutoff, a fork of it that lives; in text and --json. With --run, no
// run is listed as kept.
func TestGCPolicyKept(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	db, err := engine.Open(dir, storeOptions())
	if err != nil {
		t.Fatal(err)
	}
	end := func(id string, st engine.Status) {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := r.Begin(ctx)
		if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
			t.Fatal(err)
		}
		if st != engine.StatusActive {
			if err := r.End(ctx, st, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	end("done", engine.StatusCompleted)
	end("broken", engine.StatusFailed)
	end("parent", engine.StatusCompleted)
	if _, err := db.Fork(ctx, "parent", 1, "child"); err != nil {
		t.Fatal(err)
	}
	end("child", engine.StatusActive)
	end("live", engine.StatusActive)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	copyDir(t, dir, filepath.Join(tmp, "a"))
	copyDir(t, dir, filepath.Join(tmp, "b"))

	code, out, errOut := runCLI("gc", dir, "--status", "completed")
	if code != cli.ExitOK {
		t.Fatalf("gc --status: exit %d, %s %s", code, out, errOut)
	}
	for _, want := range []string{
		"deleted 1 run:\n  \"done\"",
		"kept 4 runs:\n",
		`  "broken": failed, not a status --status selects`,
		`  "child": active: only an ended run is deleted`,
		`  "live": active: only an ended run is deleted`,
		`  "parent": selected, but kept while its forks live: "child"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("gc --status: the output lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = runCLI("gc", filepath.Join(tmp, "a"), "--ended-before", "2000-01-01T00:00:00Z", "--json")
	var got gcJSON
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &got) != nil || len(got.Deleted) != 0 || len(got.Kept) != 5 {
		t.Fatalf("gc --ended-before --json: exit %d, %s %s", code, out, errOut)
	}
	if k := got.Kept[0]; k.Run != "broken" || !strings.Contains(k.Why, "not before 2000-01-01T00:00:00Z") {
		t.Errorf("gc --ended-before: kept %+v", k)
	}

	code, out, errOut = runCLI("gc", filepath.Join(tmp, "b"), "--run", "done", "--json")
	got = gcJSON{}
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &got) != nil || len(got.Deleted) != 1 || got.Kept != nil {
		t.Fatalf("gc --run --json: exit %d, %s %s", code, out, errOut)
	}
}
