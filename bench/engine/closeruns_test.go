package enginebench

// Close of a store whose 10,000 runs each moved since the last engine
// checkpoint (issue 34, requirement 7: Close <= 500 ms), and the next Open
// beside it:
//
//	go test -run '^$' -bench CloseChangedRuns -benchtime 1x -count 3 ./bench/engine
//
// Each iteration opens a new store with default options (fsync on, strict),
// commits one atom of the agent workload in each of 10,000 new runs (from
// 32 goroutines, so that the group commit shares the fsyncs), and reports
// the time of Close (close-ms: the chain checkpoints and store head, the
// snapshot batch with the atom index, CHECKPOINT, and the frame files of
// the runs not left to their tails), of the next Open of the store
// (open-ms), of the first State of 100 of its runs after that Open
// (state-us, the mean per run: a run left to its tail is built from the
// log there), and of that DB's Close (close2-ms, nothing moved).

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
)

func BenchmarkCloseChangedRuns(b *testing.B) {
	const runs, workers = 10000, 32
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	atoms := script()
	var closeTime, openTime, stateTime, close2Time time.Duration
	const stated = 100
	for n := range b.N {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), fmt.Sprint("s", n))
		db, err := engine.Open(dir, &engine.Options{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < runs; i += workers {
					if err := func() error {
						r, err := db.Run(ctx, fmt.Sprint("run-", i))
						if err != nil {
							return err
						}
						a := atoms[i%scriptLen]
						a.Key = fmt.Sprint("run-", i, "/0")
						atom, err := r.Begin(ctx)
						if err != nil {
							return err
						}
						if _, err := atom.Do(ctx, agent.Action(a), func(context.Context, string) ([]byte, error) { return a.Result, nil }); err != nil {
							return err
						}
						return atom.Commit(ctx, agent.Delta(a))
					}(); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		closeTime += time.Since(t0)
		t0 = time.Now()
		db, err = engine.Open(dir, &engine.Options{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		openTime += time.Since(t0)
		t0 = time.Now()
		for i := range stated {
			r, err := db.Run(ctx, fmt.Sprint("run-", i*(runs/stated)))
			if err != nil {
				b.Fatal(err)
			}
			if f, err := r.StateE(); err != nil || f == nil || r.LastSeq() != 1 {
				b.Fatalf("run-%d after reopen: seq %d: %v", i*(runs/stated), r.LastSeq(), err)
			}
		}
		stateTime += time.Since(t0)
		t0 = time.Now()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		close2Time += time.Since(t0)
	}
	b.ReportMetric(float64(closeTime.Microseconds())/float64(b.N)/1000, "close-ms")
	b.ReportMetric(float64(openTime.Microseconds())/float64(b.N)/1000, "open-ms")
	b.ReportMetric(float64(stateTime.Microseconds())/float64(b.N)/stated, "state-us")
	b.ReportMetric(float64(close2Time.Microseconds())/float64(b.N)/1000, "close2-ms")
}
