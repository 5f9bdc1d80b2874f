package enginebench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/workload"
)

// BenchmarkConcurrentRuns runs 64 agents at once, one run each, on one
// store with fsync on (default options otherwise): b.N atoms in all, each
// one Do and one delta. atoms/s is the store's throughput, cpu-µs/atom the
// process's CPU per atom (background work included), snapshots/katom the
// background snapshots written per 1,000 atoms, snapshots-B/atom the
// snapshot store's files after Close.
//
//	go test -run '^$' -bench ConcurrentRuns -benchtime 19200x -count 5 ./bench/engine
func BenchmarkConcurrentRuns(b *testing.B) {
	const runs = 64
	atoms := script()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, mode := range []engine.Durability{engine.Strict, engine.Relaxed} {
		b.Run(fmt.Sprintf("%v-%d", mode, runs), func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "s")
			db, err := engine.Open(dir, &engine.Options{Durability: mode, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			n, wall, cpu := agentAtoms(b, db, runs, atoms)
			b.ReportMetric(n/wall.Seconds(), "atoms/s")
			b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/atom")
			b.ReportMetric(float64(db.Stats().Snapshots)*1000/n, "snapshots/katom")
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(dirBytes(b, filepath.Join(dir, "snapshots")))/n, "snapshots-B/atom")
		})
	}
}

// agentAtoms commits about b.N atoms of the agent workload from runs
// goroutines (each one Do and one Commit; a new run every scriptLen atoms,
// so the script does not repeat within a run), with the benchmark timer
// running, and returns how many it committed, the wall time and the
// process CPU time they took.
func agentAtoms(b *testing.B, db *engine.DB, runs int, atoms []workload.Atom) (n float64, wall, cpu time.Duration) {
	b.Helper()
	ctx := context.Background()
	per := (b.N + runs - 1) / runs
	errs := make(chan error, runs)
	var wg sync.WaitGroup
	b.ResetTimer()
	c0, t0 := cpuTime(), time.Now()
	for r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				// A new run every scriptLen atoms: the script does
				// not repeat within a run.
				run, err := db.Run(ctx, fmt.Sprintf("run-%d-%d", r, i/scriptLen))
				if err != nil {
					errs <- err
					return
				}
				a := atoms[i%scriptLen]
				a.Key = fmt.Sprint("k", r, "-", i)
				atom, err := run.Begin(ctx)
				if err != nil {
					errs <- err
					return
				}
				res, err := atom.Do(ctx, agent.Action(a), func(context.Context, string) ([]byte, error) { return a.Result, nil })
				if err != nil {
					errs <- err
					return
				}
				a.Result = res
				if err := atom.Commit(ctx, agent.Delta(a)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	wall, cpu = time.Since(t0), cpuTime()-c0
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return float64(per * runs), wall, cpu
}
