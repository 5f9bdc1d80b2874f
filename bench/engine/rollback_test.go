package enginebench

// A rollback of a run against the forward work it undoes:
//
//	go test -run '^$' -bench 'Rollback' -benchtime 5x -count 5 ./bench/engine
//
// ms/rollback: Run.Rollback of a run whose last n atoms each performed one
// certified action with a compensation, to the seq before them: the plan
// (the n atoms read back with their intents and certificates), the
// rollback record and its fsync, n compensations through the ledger
// (durable intent and certificate each: 2n fsync waits in strict mode)
// and the completing atom (replace_frame of the frame at the target).
//
// ms/baseline: one atom that performs n certified
// actions through Do and commits, the same ledger work (n intents, n
// certificates) and one commit, on a run of the same history, timed in
// the same iteration right after the rollback (so load changes hit both).
// ratio is rollback over baseline: what a rollback costs beyond the
// compensations themselves. ns/op is the two together.
//
// The snapshot store is open before the first rollback (a StateAt in the
// setup): its lazy creation, 10-20 ms once per process, would otherwise
// fall in the first rollback's time.
//
// Strict durability on a real directory (b.TempDir), fsync on (the
// measure) and off (the CPU and the rest of the work alone); the setup
// (the run's history) is outside the timer.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

func rollbackHistory(b *testing.B, run *engine.Run, n int) {
	b.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		a, err := run.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		act := ledger.Action{Tool: "pay", Args: []byte(fmt.Sprintf(`{"invoice":%d,"cents":1200}`, i)),
			Compensate: &ledger.Action{Tool: "refund", Args: []byte(fmt.Sprintf(`{"invoice":%d,"cents":1200}`, i)), Idempotent: true}}
		if _, err := a.Do(ctx, act, func(context.Context, string) ([]byte, error) { return []byte(`{"status":"paid"}`), nil }); err != nil {
			b.Fatal(err)
		}
		d := new(frame.Delta).Set(fmt.Sprint("k", i%64), []byte(fmt.Sprintf("value of step %d, some state an agent keeps", i))).
			AppendMessage(frame.Message{Role: frame.RoleTool, Content: `{"status":"paid"}`, CallID: fmt.Sprint("c", i)})
		if err := a.Commit(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRollback(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	refund := func(engine.Undo) ledger.Exec {
		return func(context.Context, string) ([]byte, error) { return []byte(`{"status":"refunded"}`), nil }
	}
	for _, sync := range []bool{true, false} {
		for _, n := range []int{10, 100} {
			benchRollback(b, ctx, quiet, refund, sync, n)
		}
	}
}

func benchRollback(b *testing.B, ctx context.Context, quiet *slog.Logger, refund func(engine.Undo) ledger.Exec, sync bool, n int) {
	b.Run(fmt.Sprintf("fsync=%v/actions=%d", sync, n), func(b *testing.B) {
		db, err := engine.Open(filepath.Join(b.TempDir(), "s"), &engine.Options{NoSync: !sync, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		var rollback, baseline time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			runs := [2]*engine.Run{}
			for j := range runs {
				if runs[j], err = db.Run(ctx, fmt.Sprint("run-", i, "-", j)); err != nil {
					b.Fatal(err)
				}
				history(b, db, runs[j].ID(), 20) // a prefix the rollback keeps
				rollbackHistory(b, runs[j], n)
			}
			if i == 0 {
				// The first StateAt of a past seq creates the snapshot store
				// (Pebble, opened lazily): once per process, not per
				// rollback, so outside the timer.
				if _, err := runs[1].StateAt(ctx, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			// Side by side, in turn: the rollback, then its baseline.
			start := time.Now()
			res, err := runs[0].Rollback(ctx, 20, engine.RollbackOptions{Exec: refund})
			if err != nil || len(res.Undone) != n {
				b.Fatalf("rollback: %v", err)
			}
			mid := time.Now()
			a, err := runs[1].Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			for j := 0; j < n; j++ {
				act := ledger.Action{Tool: "refund", Args: []byte(fmt.Sprintf(`{"invoice":%d,"cents":1200}`, j)), Idempotent: true}
				if _, err := a.Do(ctx, act, refund(engine.Undo{})); err != nil {
					b.Fatal(err)
				}
			}
			if err := a.Commit(ctx, new(frame.Delta).Set("k0", []byte("x"))); err != nil {
				b.Fatal(err)
			}
			rollback += mid.Sub(start)
			baseline += time.Since(mid)
		}
		b.ReportMetric(float64(rollback.Microseconds())/1e3/float64(b.N), "ms/rollback")
		b.ReportMetric(float64(baseline.Microseconds())/1e3/float64(b.N), "ms/baseline")
		b.ReportMetric(float64(rollback)/float64(baseline), "ratio")
	})
}
