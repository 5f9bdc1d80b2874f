package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

// TestEraseCommand: erase refuses an active run and a plaintext store;
// it erases an ended run, after which inspect cannot read it, verify
// (without the keyring and deeply with it) passes and lists it erased, and
// the other run reads as before.
func TestEraseCommand(t *testing.T) {
	ctx := context.Background()
	dir, k1, ring := encryptedStore(t, []string{"ticket-1", "ticket-2"})
	if code, _, errOut := runCLI("erase", dir, "--keyring", k1, "--run", "ticket-1"); code != cli.ExitUsage || !strings.Contains(errOut, "active") {
		t.Fatalf("erase of an active run: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCLI("erase", dir, "--run", "ticket-1"); code != cli.ExitUsage || !strings.Contains(errOut, "--keyring") {
		t.Fatalf("erase without a keyring: exit %d, %s", code, errOut)
	}
	db, err := engine.Open(dir, &engine.Options{Keyring: ring})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := db.Run(ctx, "ticket-1")
	if err := r.End(ctx, engine.StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI("erase", dir, "--keyring", k1, "--run", "ticket-1", "--reason", "GDPR request 9", "--json")
	var got eraseJSON
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &got) != nil || len(got.Erased) != 1 || got.Erased[0].Run != "ticket-1" ||
		got.Erased[0].Reason != "GDPR request 9" || got.Erased[0].Seq != 3 {
		t.Fatalf("erase: exit %d, %s %s", code, out, errOut)
	}
	if code, out, errOut := runCLI("inspect", dir, "ticket-1", "--seq", "1", "--keyring", k1); code == cli.ExitOK || strings.Contains(out, "email of ticket-1") {
		t.Fatalf("inspect of the erased run: exit %d, %s %s", code, out, errOut)
	}
	if code, out, errOut := runCLI("inspect", dir, "ticket-2", "--seq", "1", "--keyring", k1); code != cli.ExitOK || !strings.Contains(out, "email of ticket-2") {
		t.Fatalf("inspect of the other run: exit %d, %s %s", code, out, errOut)
	}
	for _, args := range [][]string{{"verify", dir}, {"verify", dir, "--deep", "--keyring", k1}} {
		code, out, errOut := runCLI(args...)
		if code != cli.ExitOK || !strings.Contains(out, `run "ticket-1": erased by policy`) || !strings.Contains(out, "GDPR request 9") {
			t.Fatalf("%v: exit %d, %s %s", args, code, out, errOut)
		}
	}

	plain := filepath.Join(t.TempDir(), "plain")
	pdb, err := engine.Open(plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	pr, _ := pdb.Run(ctx, "r")
	if err := pr.End(ctx, engine.StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if err := pdb.Close(); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI("erase", plain, "--keyring", k1, "--run", "r"); code == cli.ExitOK || !strings.Contains(errOut, "not encrypted") && !strings.Contains(errOut, "keyring") {
		t.Fatalf("erase of a plaintext store: exit %d, %s", code, errOut)
	}
}

// TestEraseMemoryKey: erase --memory-key erases one erasable memory key of
// a run (DB.EraseKey): before it, inspect and export show the key's values
// opened with the keyring (in set_sealed ops and in a rollback's
// replace_frame); after it, inspect, export and diff show the run's other
// values in plain text and the key as erased, never its values (nor the
// sealed bytes), the other run's value of the key stays, and verify lists
// the erasure (text and --json). A key that is not erasable, a second
// erasure and --memory-key with two runs are usage errors.
func TestEraseMemoryKey(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "store")
	k1 := writeKeyring(t, filepath.Join(tmp, "k1.keyring"), "k1", map[string]byte{"k1": 1})
	ring, err := readKeyring(k1)
	if err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(dir, &engine.Options{Keyring: ring, ErasableKeys: []string{"email"}, SnapshotEvery: 1})
	if err != nil {
		t.Fatal(err)
	}
	commit := func(id string, kv ...string) {
		t.Helper()
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d := new(frame.Delta)
		for i := 0; i < len(kv); i += 2 {
			d.Set(kv[i], []byte(kv[i+1]))
		}
		if err := a.Commit(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	commit("ticket-1", "email", "alice@example.com", "plan", "gold")
	commit("ticket-1", "email", "alice@new.example", "note", "called back")
	commit("ticket-1", "email", "alice@third.example", "note", "undone")
	// Atom 4: a rollback to seq 2, whose replace_frame op carries the
	// frame at 2 with its sealed value.
	r1, err := db.Run(ctx, "ticket-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r1.Rollback(ctx, 2, engine.RollbackOptions{Exec: func(engine.Undo) ledger.Exec { return nil }}); err != nil {
		t.Fatal(err)
	}
	commit("ticket-2", "email", "bob@example.com")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	if code, out, errOut := runCLI("inspect", dir, "ticket-1", "--keyring", k1); code != cli.ExitOK ||
		!strings.Contains(out, "email = alice@new.example") || strings.Contains(out, "erased") {
		t.Fatalf("inspect before the erasure: exit %d, %s %s", code, out, errOut)
	}
	if code, out, errOut := runCLI("export", dir, "--run", "ticket-1", "--keyring", k1); code != cli.ExitOK ||
		!strings.Contains(out, `{"op":"set_sealed","key":"email","value":"alice@example.com"}`) ||
		!strings.Contains(out, `{"op":"set","key":"email","value":"alice@new.example"}`) || strings.Contains(out, "sealed_base64") {
		t.Fatalf("export before the erasure: exit %d, %s %s", code, out, errOut)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--run", "ticket-1", "--memory-key", "plan"}, "not erasable"},
		{[]string{"--run", "ticket-1", "--run", "ticket-2", "--memory-key", "email"}, "exactly one --run"},
		{[]string{"--run", "ticket-9", "--memory-key", "email"}, "no such run"},
	} {
		args := append([]string{"erase", dir, "--keyring", k1}, c.args...)
		if code, out, errOut := runCLI(args...); code != cli.ExitUsage || !strings.Contains(errOut, c.want) {
			t.Fatalf("%v: exit %d, want %d and %q: %s %s", c.args, code, cli.ExitUsage, c.want, out, errOut)
		}
	}

	code, out, errOut := runCLI("erase", dir, "--keyring", k1, "--run", "ticket-1", "--memory-key", "email", "--reason", "GDPR request 7", "--json")
	var got eraseJSON
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &got) != nil || len(got.Erased) != 0 || len(got.ErasedKeys) != 1 {
		t.Fatalf("erase --memory-key: exit %d, %s %s", code, out, errOut)
	}
	ek := got.ErasedKeys[0]
	if ek.Run != "ticket-1" || ek.Key != "email" || ek.Seq != 4 || len(ek.KeyNos) != 1 || ek.Reason != "GDPR request 7" || ek.At.IsZero() {
		t.Fatalf("erase --memory-key: %+v", ek)
	}
	if code, out, errOut := runCLI("erase", dir, "--keyring", k1, "--run", "ticket-1", "--memory-key", "email"); code != cli.ExitUsage ||
		!strings.Contains(errOut, "nothing to erase") {
		t.Fatalf("a second erasure: exit %d, %s %s", code, out, errOut)
	}

	// Every view of the run: the other values in plain text, the key
	// erased, no value of it and no sealed bytes.
	views := []struct {
		args []string
		want []string
	}{
		{[]string{"inspect", dir, "ticket-1"}, []string{"memory: 2 keys, 1 erased", "plan = gold", "note = called back", "email: erased"}},
		{[]string{"inspect", dir, "ticket-1", "--json"}, []string{`"plan": "gold"`, `"erased_keys": [` + "\n" + `      "email"`}},
		{[]string{"inspect", dir, "ticket-1", "--seq", "1"}, []string{`set_sealed key="email" erased`, `set key="plan" value="gold"`, "email: erased"}},
		{[]string{"inspect", dir, "ticket-1", "--seq", "2", "--json"}, []string{`"key": "email",` + "\n" + `        "erased": true`, `"called back"`}},
		{[]string{"inspect", dir, "ticket-1", "--seq", "4"}, []string{`replace_frame erased="email"`, "email: erased"}},
		{[]string{"export", dir, "--run", "ticket-1"}, []string{`{"op":"set_sealed","key":"email","erased":true}`, `{"op":"set","key":"plan","value":"gold"}`,
			`{"op":"set","key":"note","value":"called back"}`, `"erased_keys":["email"]}`}},
		{[]string{"diff", dir, "ticket-1", "0", "last"}, []string{`set_sealed key="email" erased`, `set key="note" value="called back"`}},
		{[]string{"diff", dir, "ticket-1", "0", "last", "--json"}, []string{`"erased": true`, `"value": "gold"`}},
	}
	for _, v := range views {
		args := append(v.args, "--keyring", k1)
		code, out, errOut := runCLI(args...)
		if code != cli.ExitOK {
			t.Fatalf("%v: exit %d, %s", v.args, code, errOut)
		}
		for _, w := range v.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: no %q in\n%s", v.args, w, out)
			}
		}
		if strings.Contains(out, "alice") || strings.Contains(out, "sealed_base64") || strings.Contains(out, "sealed=") {
			t.Errorf("%v: the erased values or their sealed bytes are shown:\n%s", v.args, out)
		}
	}
	if code, out, errOut := runCLI("inspect", dir, "ticket-2", "--keyring", k1); code != cli.ExitOK ||
		!strings.Contains(out, "email = bob@example.com") || strings.Contains(out, "erased") {
		t.Fatalf("inspect of the other run: exit %d, %s %s", code, out, errOut)
	}

	for _, args := range [][]string{{"verify", dir}, {"verify", dir, "--deep", "--keyring", k1}} {
		code, out, errOut := runCLI(args...)
		if code != cli.ExitOK || !strings.Contains(out, `run "ticket-1" memory key "email": erased by policy`) ||
			!strings.Contains(out, "GDPR request 7") || !strings.Contains(out, fmt.Sprintf("data key %d destroyed", ek.KeyNos[0])) {
			t.Fatalf("%v: exit %d, %s %s", args, code, out, errOut)
		}
	}
	code, out, errOut = runCLI("verify", dir, "--json")
	var rep struct {
		OK         bool `json:"ok"`
		ErasedKeys []struct {
			Run    string   `json:"run"`
			Key    string   `json:"key"`
			Seq    uint64   `json:"seq"`
			KeyNos []uint64 `json:"key_nos"`
			Reason string   `json:"reason"`
		} `json:"erased_keys"`
	}
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK || len(rep.ErasedKeys) != 1 {
		t.Fatalf("verify --json: exit %d, %s %s", code, out, errOut)
	}
	if e := rep.ErasedKeys[0]; e.Run != "ticket-1" || e.Key != "email" || e.Seq != ek.Seq || !slices.Equal(e.KeyNos, ek.KeyNos) || e.Reason != ek.Reason {
		t.Fatalf("verify --json erased_keys: %+v, the erasure was %+v", e, ek)
	}
}

// TestEraseActionsThenRead: in an encrypted store, a run that made actions
// (whose intent and certificate records are sealed with the run's data
// key) is erased; inspect, stats, export and diff with the keyring then
// read the other run instead of failing on the records that no longer
// open.
func TestEraseActionsThenRead(t *testing.T) {
	ctx := context.Background()
	dir, k1, ring := encryptedStore(t, []string{"gone", "kept"})
	db, err := engine.Open(dir, &engine.Options{Keyring: ring})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"gone", "kept"} {
		r, _ := db.Run(ctx, id)
		a, err := r.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Do(ctx, ledger.Action{Tool: "lookup", Args: []byte(`{"q":"` + id + `"}`)},
			func(context.Context, string) ([]byte, error) { return []byte(`"found for ` + id + `"`), nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Commit(ctx, new(frame.Delta).Set("found", res)); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := db.Run(ctx, "gone")
	if err := r.End(ctx, engine.StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Erase(ctx, "gone", "request 3"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"inspect", dir, "--keyring", k1},
		{"inspect", dir, "kept", "--seq", "2", "--keyring", k1},
		{"inspect", dir, "kept", "--seq", "2", "--keyring", k1, "--json"},
		{"stats", dir, "--keyring", k1},
		{"export", dir, "--run", "kept", "--keyring", k1},
		{"diff", dir, "kept", "1", "2", "--keyring", k1},
		{"verify", dir, "--deep", "--keyring", k1},
	} {
		code, out, errOut := runCLI(args...)
		if code != cli.ExitOK || strings.Contains(out, "found for gone") {
			t.Errorf("%v: exit %d, %s %s", args[:2], code, out, errOut)
		}
	}
	if code, out, errOut := runCLI("inspect", dir, "kept", "--seq", "2", "--keyring", k1); !strings.Contains(out, "found for kept") {
		t.Errorf("inspect kept 2: exit %d, %s %s", code, out, errOut)
	}
}
