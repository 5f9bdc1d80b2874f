package enginebench

import (
	"bytes"
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
	"github.com/continuumdb/continuum/seal"
)

// BenchmarkSealCost measures encryption at rest (Options.Keyring) beside
// the same store without it, in one process: R = 16 agents at once, one
// run each, strict durability with fsync on (default options otherwise),
// b.N atoms in all, each one Do and one delta (the workload of
// BenchmarkConcurrentRuns); then both again with NoSync, so that CPU alone
// is measured. Run each round in its own process, so that the stores
// alternate and a change of the machine's load falls on all of them:
//
//	go test -c -o /tmp/enginebench.test ./bench/engine
//	for i in 1 2 3 4 5 6; do /tmp/enginebench.test -test.run '^$' -test.bench SealCost -test.benchtime 9600x; done
//
// atoms/s is the store's throughput, cpu-µs/atom the process's CPU per
// atom (background work included).
func BenchmarkSealCost(b *testing.B) {
	const runs = 16
	atoms := script()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	ring, err := seal.NewKeyring(map[string][]byte{"bench": bytes.Repeat([]byte{7}, seal.KeySize)}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ sealed, nosync bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		name := "plain-16"
		opts := &engine.Options{Logger: quiet, NoSync: c.nosync}
		if c.sealed {
			name, opts.Keyring = "sealed-16", ring
		}
		if c.nosync {
			name += "-nosync" // CPU alone: no fsync waits
		}
		b.Run(name, func(b *testing.B) {
			db, err := engine.Open(filepath.Join(b.TempDir(), "s"), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
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
			wall, cpu := time.Since(t0), cpuTime()-c0
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			n := float64(per * runs)
			b.ReportMetric(n/wall.Seconds(), "atoms/s")
			b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/atom")
		})
	}
}
