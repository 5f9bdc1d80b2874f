package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
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
