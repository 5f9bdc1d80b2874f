package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// TestWaitsCommands: a store with waits, events and a timeout verifies
// (also --deep), inspect shows the run's waits and its kept events in
// text and JSON, export carries the wait an atom took, and stats counts
// the records' kinds.
func TestWaitsCommands(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "s")
	db, err := engine.Open(dir, storeOptions())
	if err != nil {
		t.Fatal(err)
	}
	r, _ := db.Run(ctx, "agent")
	if _, err := r.Wait(ctx, "approval", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SendEvent(ctx, "agent", "approval", "alice", []byte(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	a, _ := r.Begin(ctx)
	if _, err := a.WaitOutcome(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("approved", []byte("yes"))); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Sleep(ctx, time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SendEvent(ctx, "agent", "later", "bob", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if ws, err := db.Ready(ctx, 0); err != nil || len(ws) != 1 {
		t.Fatalf("ready %v %v", ws, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", dir}, "result: INTACT"},
		{[]string{"verify", "--deep", dir}, "result: INTACT"},
		{[]string{"verify", dir}, "waits: 2 wait records, 2 event records and 1 wake record checked"},
		{[]string{"verify", "--json", dir}, "\"waits\": {\n    \"waits\": 2,\n    \"events\": 2,\n    \"wakes\": 1\n  }"},
		{[]string{"inspect", dir, "agent"}, `wait after seq 0 for event "approval"`},
		{[]string{"inspect", dir, "agent"}, `delivered at`},
		{[]string{"inspect", dir, "agent"}, `wait after seq 1 for the clock (a sleep)`},
		{[]string{"inspect", dir, "agent"}, `event "later" of sender "bob"`},
		{[]string{"inspect", dir, "agent", "--json"}, `"outcome": "timed out"`},
		{[]string{"inspect", dir, "agent", "--json"}, `"pending_events": [`},
		{[]string{"export", dir, "--run", "agent"}, `"waited":{"seq":0,"name":"approval"`},
		{[]string{"stats", dir}, "wake"},
	} {
		code, out, errOut := runCLI(c.args...)
		if code != cli.ExitOK || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, stderr %q; output lacks %q:\n%s", c.args, code, errOut, c.want, out)
		}
	}
}
