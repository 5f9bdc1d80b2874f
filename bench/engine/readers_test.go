package enginebench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/agent"
)

// BenchmarkReadDuringCommit measures the readers of a run (Head, State)
// while an agent commits atoms to it with fsync on (default options, a
// store under the test's TempDir): how long a reader waits behind the
// agent's commits. The reader calls once every readPace, as a monitor
// would, so ns/op is mostly that pace; mean-ns, p50-ns, p99-ns and max-ns
// are the latencies of the calls themselves, atoms/s what the agent
// committed meanwhile.
//
//	go test -run '^$' -bench ReadDuringCommit -benchtime 2000x -count 5 ./bench/engine
func BenchmarkReadDuringCommit(b *testing.B) {
	const readPace = 100 * time.Microsecond
	atoms := script()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	for _, read := range []struct {
		name string
		call func(*engine.Run)
	}{
		{"None", func(*engine.Run) {}}, // the agent's atoms/s with a reader that reads nothing
		{"Head", func(r *engine.Run) { r.Head() }},
		{"State", func(r *engine.Run) { r.State() }},
	} {
		b.Run(read.name, func(b *testing.B) {
			db, err := engine.Open(filepath.Join(b.TempDir(), "s"), &engine.Options{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			// The agent moves to a new run every scriptLen atoms (the script
			// does not repeat within a run); the reader reads the current one.
			var cur atomic.Pointer[engine.Run]
			var committed atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var agentErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					run, err := db.Run(ctx, fmt.Sprint("run-", i/scriptLen))
					if err != nil {
						agentErr = err
						return
					}
					cur.Store(run)
					a := atoms[i%scriptLen]
					a.Key = fmt.Sprint("k", i)
					atom, err := run.Begin(ctx)
					if err != nil {
						agentErr = err
						return
					}
					res, err := atom.Do(ctx, agent.Action(a), func(context.Context, string) ([]byte, error) { return a.Result, nil })
					if err != nil {
						agentErr = err
						return
					}
					a.Result = res
					if err := atom.Commit(ctx, agent.Delta(a)); err != nil {
						agentErr = err
						return
					}
					committed.Add(1)
				}
			}()
			for committed.Load() < 20 { // the agent under way
				time.Sleep(time.Millisecond)
			}
			lat := make([]time.Duration, b.N)
			n0 := committed.Load()
			b.ResetTimer()
			t0 := time.Now()
			var sum time.Duration
			for i := range lat {
				run := cur.Load()
				s := time.Now()
				read.call(run)
				lat[i] = time.Since(s)
				sum += lat[i]
				time.Sleep(readPace)
			}
			wall := time.Since(t0)
			b.StopTimer()
			n1 := committed.Load()
			close(stop)
			wg.Wait()
			if agentErr != nil {
				b.Fatal(agentErr)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(sum.Nanoseconds())/float64(len(lat)), "mean-ns")
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
			b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
			b.ReportMetric(float64(n1-n0)/wall.Seconds(), "atoms/s")
		})
	}
}
