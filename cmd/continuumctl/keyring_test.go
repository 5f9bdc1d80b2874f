package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/seal"
)

// writeKeyring writes a keyring file of keys (id -> byte repeated) with
// current, and returns its name.
func writeKeyring(t *testing.T, name string, current string, keys map[string]byte) string {
	t.Helper()
	m := map[string][]byte{}
	for id, b := range keys {
		m[id] = bytes.Repeat([]byte{b}, seal.KeySize)
	}
	if err := os.WriteFile(name, seal.AppendKeyringFile(nil, m, current), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestKeyringCommands: an encrypted store verifies without a keyring (the
// report says the payloads were not opened) and deeply with one; inspect
// and export refuse it without the keyring and read it with it; rekey
// re-wraps the data keys so that the old key can be dropped.
func TestKeyringCommands(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "store")
	k1 := writeKeyring(t, filepath.Join(tmp, "k1.keyring"), "k1", map[string]byte{"k1": 1})
	ring, err := readKeyring(k1)
	if err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(dir, &engine.Options{Keyring: ring})
	if err != nil {
		t.Fatal(err)
	}
	r, err := db.Run(ctx, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("target", []byte("prod-eu"))); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI("verify", dir, "--json")
	var rep verifyJSON
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK || rep.RunsChecked != 1 ||
		!strings.Contains(strings.Join(rep.Unchecked, "\n"), "no payload was opened") {
		t.Fatalf("verify without a keyring: exit %d, %s %s", code, out, errOut)
	}
	code, out, errOut = runCLI("verify", dir, "--deep", "--keyring", k1, "--json")
	rep = verifyJSON{}
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK ||
		strings.Contains(strings.Join(rep.Unchecked, "\n"), "no payload was opened") {
		t.Fatalf("verify --deep --keyring: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut := runCLI("inspect", dir, "deploy", "--seq", "1"); code != cli.ExitUsage || !strings.Contains(errOut, "encrypted") {
		t.Fatalf("inspect without the keyring: exit %d, stderr %s", code, errOut)
	}
	if code, out, errOut := runCLI("inspect", dir, "deploy", "--seq", "1", "--keyring", k1); code != cli.ExitOK || !strings.Contains(out, "prod-eu") {
		t.Fatalf("inspect --keyring: exit %d, %s %s", code, out, errOut)
	}
	if code, out, errOut := runCLI("export", dir, "--run", "deploy", "--keyring", k1); code != cli.ExitOK || !strings.Contains(out, "prod-eu") {
		t.Fatalf("export --keyring: exit %d, %s %s", code, out, errOut)
	}

	// Rotation: k2 current beside k1, rekey, then k2 alone opens it.
	both := writeKeyring(t, filepath.Join(tmp, "both.keyring"), "k2", map[string]byte{"k1": 1, "k2": 2})
	only2 := writeKeyring(t, filepath.Join(tmp, "k2.keyring"), "k2", map[string]byte{"k2": 2})
	if code, _, errOut := runCLI("verify", dir, "--keyring", only2); code != cli.ExitUsage || !strings.Contains(errOut, "no such key") {
		t.Fatalf("verify with the new key alone before rekey: exit %d, stderr %s", code, errOut)
	}
	code, out, errOut = runCLI("rekey", dir, "--keyring", both, "--json")
	if code != cli.ExitOK || strings.TrimSpace(out) != `{"rewrapped":2,"current":"k2"}` {
		t.Fatalf("rekey: exit %d, %s %s", code, out, errOut)
	}
	if code, out, errOut := runCLI("verify", dir, "--deep", "--keyring", only2); code != cli.ExitOK {
		t.Fatalf("verify with the new key alone after rekey: exit %d, %s %s", code, out, errOut)
	}
}

// TestGCEncrypted: gc opens an encrypted store only with its keyring,
// and then deletes and reclaims as in a plaintext one; the store still
// verifies deeply.
func TestGCEncrypted(t *testing.T) {
	dir, k1, _ := encryptedStore(t, []string{"done", "live"}, "done")
	if code, _, errOut := runCLI("gc", dir, "--run", "done"); code != cli.ExitUsage || !strings.Contains(errOut, "keyring") {
		t.Fatalf("gc without the keyring: exit %d, stderr %s", code, errOut)
	}
	if code, out, errOut := runCLI("gc", dir, "--run", "done", "--keyring", k1); code != cli.ExitOK || !strings.Contains(out, "done") {
		t.Fatalf("gc --keyring: exit %d, %s %s", code, out, errOut)
	}
	code, out, errOut := runCLI("verify", dir, "--deep", "--keyring", k1, "--json")
	var rep verifyJSON
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK || len(rep.Deleted) != 1 {
		t.Fatalf("verify after gc: exit %d, %s %s", code, out, errOut)
	}
}

// encryptedStore creates an encrypted store in a temporary directory, each
// of runs with one atom (memory key "customer" = "email of " + the run),
// the runs of ended ended, and returns its directory, its keyring file and
// the keyring.
func encryptedStore(t *testing.T, runs []string, ended ...string) (dir, ringFile string, ring seal.Keyring) {
	t.Helper()
	ctx := context.Background()
	tmp := t.TempDir()
	dir = filepath.Join(tmp, "store")
	ringFile = writeKeyring(t, filepath.Join(tmp, "k1.keyring"), "k1", map[string]byte{"k1": 1})
	ring, err := readKeyring(ringFile)
	if err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(dir, &engine.Options{Keyring: ring})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range runs {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Commit(ctx, new(frame.Delta).Set("customer", []byte("email of "+id))); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(ended, id) {
			if err := r.End(ctx, engine.StatusCompleted, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, ringFile, ring
}

// TestKeyringCommand: keyring writes a keyring file (0600, one key,
// current) that creates and reads an encrypted store; it never writes over
// an existing file (the file is left as it was), and refuses a bad id.
func TestKeyringCommand(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	name := filepath.Join(tmp, "agent.keyring")
	code, out, errOut := runCLI("keyring", "--out", name, "--id", "2026-q1", "--json")
	var got struct{ File, Current string }
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &got) != nil || got.File != name || got.Current != "2026-q1" {
		t.Fatalf("keyring: exit %d, %s %s", code, out, errOut)
	}
	st, err := os.Stat(name)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("keyring file: %v, mode %v", err, st.Mode())
	}
	b, _ := os.ReadFile(name)
	ring, err := seal.ParseKeyringFile(b)
	if err != nil || ring.Current() != "2026-q1" {
		t.Fatalf("the keyring file does not parse: %v", err)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 1 {
		t.Fatalf("the directory holds %d entries, want the keyring alone (no temporary file left)", len(ents))
	}
	dir := filepath.Join(tmp, "store")
	db, err := engine.Open(dir, &engine.Options{Keyring: ring})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := db.Run(ctx, "r")
	a, _ := r.Begin(ctx)
	if err := a.Commit(ctx, new(frame.Delta).Set("plan", []byte("sealed plan"))); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI("inspect", dir, "r", "--keyring", name); code != cli.ExitOK || !strings.Contains(out, "sealed plan") {
		t.Fatalf("inspect with the new keyring: exit %d, %s %s", code, out, errOut)
	}

	// A second one over it is refused, and the first is intact.
	if code, _, errOut := runCLI("keyring", "--out", name); code != cli.ExitUsage || !strings.Contains(errOut, "exists") {
		t.Fatalf("keyring over an existing file: exit %d, %s", code, errOut)
	}
	if b2, _ := os.ReadFile(name); !bytes.Equal(b, b2) {
		t.Fatal("keyring changed an existing file")
	}
	// Two keyrings are two keys.
	other := filepath.Join(tmp, "other.keyring")
	if code, _, errOut := runCLI("keyring", "--out", other); code != cli.ExitOK {
		t.Fatalf("keyring: exit %d, %s", code, errOut)
	}
	if code, _, _ := runCLI("inspect", dir, "r", "--keyring", other); code == cli.ExitOK {
		t.Fatal("inspect with another keyring read the store")
	}
	for _, args := range [][]string{{"keyring"}, {"keyring", "--out", filepath.Join(tmp, "x"), "--id", "a b"}, {"keyring", filepath.Join(tmp, "y")}} {
		if code, _, _ := runCLI(args...); code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, cli.ExitUsage)
		}
	}
}
