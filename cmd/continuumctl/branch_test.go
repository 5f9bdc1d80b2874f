package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// TestInspectBranch: inspect's atom view and export show a branch's name,
// base and declared reads; an atom of Begin shows none; verify --deep
// passes the store.
func TestInspectBranch(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "s")
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
	if err := a.Commit(ctx, new(frame.Delta).Set("plan", []byte("p"))); err != nil {
		t.Fatal(err)
	}
	x, _ := run.Branch(ctx, "x", engine.MemoryKey("plan"))
	y, _ := run.Branch(ctx, "y")
	for _, b := range []*engine.Atom{y, x} {
		if err := b.Commit(ctx, new(frame.Delta).Set(b.Branch(), nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("inspect", dir, "r", "--seq", "3")
	if code != cli.ExitOK || !strings.Contains(out, `branch "x": read the state at seq 1; reads memory:plan`) {
		t.Fatalf("inspect --seq 3: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ = runCLI("inspect", dir, "r", "--seq", "1"); code != cli.ExitOK || strings.Contains(out, "branch") {
		t.Fatalf("inspect --seq 1: exit %d\n%s", code, out)
	}
	code, out, errOut = runCLI("export", dir, "--run", "r")
	if code != cli.ExitOK || !strings.Contains(out, `"branch":{"name":"y","base":1,"reads":[]}`) || strings.Count(out, `"branch"`) != 2 {
		t.Fatalf("export: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = runCLI("verify", "--deep", dir); code != cli.ExitOK {
		t.Fatalf("verify --deep: exit %d\n%s%s", code, out, errOut)
	}
}
