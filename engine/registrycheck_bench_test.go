package engine

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
)

// BenchmarkRegistryCheck measures the check a moment after Open (the one
// read of the log before CHECKPOINT's replay position: CHECKPOINT's runs,
// and WAITS where the engine has it) on a store with a long history:
// 1,000 runs of 40 atoms, each run waiting for an event after every
// fourth atom, the event sent, and a last wait open, with a deadline;
// then an engine checkpoint. Each iteration opens the store and runs the
// check at once (checkRegistry: Open to check done, less Open).
//
//	go test ./engine -run '^$' -bench RegistryCheck -benchtime 5x -count 5
func BenchmarkRegistryCheck(b *testing.B) {
	fs := vfs.NewMem()
	clock := func() time.Time { return time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC) }
	opts := func() *Options {
		return &Options{FS: fs, NoSync: true, DictSamples: -1, Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	}
	db, err := Open("s", opts())
	if err != nil {
		b.Fatal(err)
	}
	const runs, atoms = 1000, 40
	deadline := clock().Add(time.Hour)
	for i := range runs {
		id := fmt.Sprintf("run-%04d", i)
		r, err := db.Run(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		for k := range atoms {
			a, err := r.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte(fmt.Sprint(k)))); err != nil {
				b.Fatal(err)
			}
			if k%4 == 3 || k == atoms-1 {
				if _, err := r.Wait(ctx, "go", deadline); err != nil {
					b.Fatal(err)
				}
				if k != atoms-1 {
					if _, err := db.SendEvent(ctx, id, "go", fmt.Sprintf("s%d", k), []byte("yes")); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	if err := db.checkpoint(false); err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		db, err := Open("s", opts())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := db.checkRegistry(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if m := db.registryMismatch(); m != "" {
			b.Fatal(m)
		}
		db.Close()
		b.StartTimer()
	}
}
