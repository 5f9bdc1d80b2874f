package enginebench

// Fork and End, against the history of the run they start from or end:
//
//	go test -run '^$' -bench 'Fork|End' -benchtime 200x -count 5 ./bench/engine
//
// A fork of a run with n atoms (a frame of constant size: what grows is the
// history) at its last seq (the frame in memory) and at its middle seq
// (StateAt: the nearest snapshot and the deltas after it),
// fsync on (the fork record is durable when Fork returns) and off (CPU and
// the rest of the work alone). Fork builds the fork's state on its first
// use, so the op=fork+state rows add the fork's first State: what a fork
// that is read costs, the source's StateAt(at) included. End of a run with
// n atoms, likewise.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

var _ = frame.RoleAssistant

func history(b *testing.B, db *engine.DB, id string, n int) *engine.Run {
	b.Helper()
	ctx := context.Background()
	run, err := db.Run(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		a, err := run.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		// The frame stays the same size (64 keys overwritten in turn), so
		// what grows is the history alone.
		d := new(frame.Delta).Set(fmt.Sprint("k", i%64), []byte(fmt.Sprintf("value of step %d, some state an agent keeps", i)))
		if err := a.Commit(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
	return run
}

func BenchmarkFork(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	for _, sync := range []bool{true, false} {
		for _, n := range []int{100, 1000, 10000} {
			for _, c := range []struct{ where, op string }{{"last", "fork"}, {"middle", "fork"}, {"last", "fork+state"}, {"middle", "fork+state"}} {
				where := c.where
				b.Run(fmt.Sprintf("fsync=%v/atoms=%d/at=%s/op=%s", sync, n, where, c.op), func(b *testing.B) {
					db, err := engine.Open(filepath.Join(b.TempDir(), "s"), &engine.Options{NoSync: !sync, Logger: quiet})
					if err != nil {
						b.Fatal(err)
					}
					defer db.Close()
					src := history(b, db, "src", n)
					at := src.LastSeq()
					if where == "middle" {
						at /= 2
					}
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						f, err := db.Fork(ctx, "src", at, fmt.Sprint("fork-", i))
						if err != nil {
							b.Fatal(err)
						}
						if c.op == "fork+state" {
							if _, err := f.StateE(); err != nil {
								b.Fatal(err)
							}
						}
					}
					b.StopTimer() // not the deferred Close
				})
			}
		}
	}
}

func BenchmarkEnd(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	for _, sync := range []bool{true, false} {
		for _, n := range []int{10, 1000} {
			b.Run(fmt.Sprintf("fsync=%v/atoms=%d", sync, n), func(b *testing.B) {
				db, err := engine.Open(filepath.Join(b.TempDir(), "s"), &engine.Options{NoSync: !sync, Logger: quiet})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				runs := make([]*engine.Run, b.N)
				for i := range runs {
					runs[i] = history(b, db, fmt.Sprint("r", i), n/10+1)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := runs[i].End(ctx, engine.StatusCompleted, []byte("done")); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
			})
		}
	}
}
