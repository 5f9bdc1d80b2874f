package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

// TestInspectRetries: the run's summary lists an attempt in doubt after a
// failed one with its retries (attempt 2 of 2), and verify --deep accepts
// a store with an action given up and one in doubt.
func TestInspectRetries(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pol := &ledger.RetryPolicy{MaxAttempts: 2, Initial: 1}
	fail := func(context.Context, string) ([]byte, error) { return nil, errors.New("503") }
	if _, err := a.Do(ctx, ledger.Action{Tool: "http.post", Args: []byte(`{"u":1}`), Idempotent: true, Retry: pol}, fail); !errors.Is(err, ledger.ErrGaveUp) {
		t.Fatalf("Do = %v", err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("posted", []byte("no"))); err != nil {
		t.Fatal(err)
	}
	a, err = run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, err = a.Do(ctx, ledger.Action{Tool: "http.post", Args: []byte(`{"u":2}`), Idempotent: true, Retry: pol}, func(context.Context, string) ([]byte, error) {
		if calls++; calls == 1 {
			return nil, errors.New("503")
		}
		return nil, ledger.ErrUncertified
	})
	if !errors.Is(err, ledger.ErrInDoubt) {
		t.Fatalf("Do = %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("inspect", dir, "r")
	if code != cli.ExitOK || !strings.Contains(out, "in-doubt actions: 1") || !strings.Contains(out, "retry:  attempt 2 of 2") {
		t.Fatalf("inspect: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = runCLI("verify", "--deep", dir); code != cli.ExitOK {
		t.Fatalf("verify --deep: exit %d\n%s%s", code, out, errOut)
	}
}
