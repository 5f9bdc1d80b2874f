package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/workload"
)

// benchStore builds a store of runs x atoms of the scripted agent on disk.
func benchStore(b *testing.B, runs, atoms int) (string, int64) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "store")
	opts := storeOptions()
	opts.SegmentSize = 0 // the default, as users have it
	opts.DictSamples = 0
	ctx := context.Background()
	db, err := engine.Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	w := agent.NewWorld()
	for i := 0; i < runs; i++ {
		r, err := db.Run(ctx, workload.RunID(i))
		if err != nil {
			b.Fatal(err)
		}
		for j := 0; j < atoms; j++ {
			if _, err := agent.Step(ctx, r, testSeed, w); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	var logBytes int64
	if err := engine.Scan(ctx, dir, nil, func(r *engine.LogRecord) error {
		logBytes += int64(r.Size)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return dir, logBytes
}

// BenchmarkCommands runs each read-only command on a store of 4 runs x 500
// atoms, beside engine.Verify called directly: the verify CLI's cost over
// it is flag parsing, key and state files, and printing.
func BenchmarkCommands(b *testing.B) {
	const runs, atoms = 4, 500
	dir, logBytes := benchStore(b, runs, atoms)
	command := func(args ...string) func(b *testing.B) {
		return func(b *testing.B) {
			b.SetBytes(logBytes)
			for b.Loop() {
				if code := run(args, io.Discard, io.Discard); code != cli.ExitOK && code != cli.ExitCorrupt {
					b.Fatalf("%v: exit %d", args, code)
				}
			}
			b.ReportMetric(float64(runs*atoms)*float64(b.N)/b.Elapsed().Seconds(), "atoms/s")
		}
	}
	b.Run("engine.Verify", func(b *testing.B) {
		b.SetBytes(logBytes)
		for b.Loop() {
			rep, err := engine.Verify(context.Background(), dir, nil)
			if err != nil || !rep.OK {
				b.Fatalf("verify: %v", err)
			}
		}
		b.ReportMetric(float64(runs*atoms)*float64(b.N)/b.Elapsed().Seconds(), "atoms/s")
	})
	b.Run("verify", command("verify", dir))
	b.Run("verify-json", command("verify", "--json", dir))
	b.Run("inspect", command("inspect", dir))
	b.Run("stats", command("stats", dir))
	b.Run("export-run", func(b *testing.B) {
		b.SetBytes(logBytes / runs)
		for b.Loop() {
			if code := run([]string{"export", dir, "--run", workload.RunID(0)}, io.Discard, io.Discard); code != cli.ExitOK {
				b.Fatalf("exit %d", code)
			}
		}
		b.ReportMetric(float64(atoms)*float64(b.N)/b.Elapsed().Seconds(), "atoms/s")
	})
}
