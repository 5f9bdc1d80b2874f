package enginebench

// A process that has used many runs (issue 16, goal 6: 10,000 runs held in
// <= 100 MB of heap, Close <= 100 ms):
//
//	go test -run '^$' -bench ManyRuns -benchtime 1x -count 5 ./bench/engine
//
// The store holds 10,000 runs of 10 atoms of the agent workload (written
// with fsync off). Each iteration opens it with default options (fsync
// on), uses every run once (State(), then one more atom: Begin, one Do,
// Commit, from 16 goroutines), and reports the heap the process holds
// after a GC beyond what it held before the Open, right after the use
// (heap-MB) and once idle (idle-heap-MB: polled every second until at most
// 100 MB, for up to 90 s, settle-s), the time of Runs() (runs-ms) and of
// Close (close-ms), which writes the frame file of every run that moved
// since the last engine checkpoint.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/agent"
)

func BenchmarkManyRuns(b *testing.B) {
	const runs, perRun, workers = 10000, 10, 16
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	atoms := script()
	dir := filepath.Join(b.TempDir(), "s")
	build, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	commit := func(db *engine.DB, run string, i int) error {
		r, err := db.Run(ctx, run)
		if err != nil {
			return err
		}
		a := atoms[i%scriptLen]
		a.Key = fmt.Sprint(run, "/", i)
		atom, err := r.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := atom.Do(ctx, agent.Action(a), func(context.Context, string) ([]byte, error) { return a.Result, nil }); err != nil {
			return err
		}
		return atom.Commit(ctx, agent.Delta(a))
	}
	each := func(db *engine.DB, f func(run string, i int) error) {
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < runs; i += workers {
					if err := f(fmt.Sprint("run-", i), i); err != nil {
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
	}
	for k := range perRun {
		each(build, func(run string, i int) error { return commit(build, run, i*perRun+k) })
	}
	if err := build.Close(); err != nil {
		b.Fatal(err)
	}
	var runsTime, closeTime, settle time.Duration
	var heapBytes, idleBytes uint64
	b.ResetTimer()
	for n := range b.N {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.HeapAlloc
		db, err := engine.Open(dir, &engine.Options{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		each(db, func(run string, i int) error {
			r, err := db.Run(ctx, run)
			if err != nil {
				return err
			}
			if _, err := r.StateE(); err != nil {
				return err
			}
			return commit(db, run, i*perRun+perRun+n) // the run's next atom of the script
		})
		t0 := time.Now()
		if infos, err := db.Runs(); err != nil || len(infos) != runs {
			b.Fatalf("Runs: %d, %v", len(infos), err)
		}
		runsTime += time.Since(t0)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heapBytes += ms.HeapAlloc - min(before, ms.HeapAlloc)
		// Idle: the frame cache drops what an engine checkpoint has
		// written, and has one written for the rest (within about
		// 10 s of the last one).
		t0 = time.Now()
		for time.Since(t0) < 90*time.Second {
			time.Sleep(time.Second)
			runtime.GC()
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc-min(before, ms.HeapAlloc) <= 100<<20 && db.Stats().FramesDropped > 0 {
				break
			}
		}
		idleBytes += ms.HeapAlloc - min(before, ms.HeapAlloc)
		settle += time.Since(t0)
		t0 = time.Now()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		closeTime += time.Since(t0)
	}
	b.ReportMetric(float64(heapBytes)/float64(b.N)/(1<<20), "heap-MB")
	b.ReportMetric(float64(idleBytes)/float64(b.N)/(1<<20), "idle-heap-MB")
	b.ReportMetric(settle.Seconds()/float64(b.N), "settle-s")
	b.ReportMetric(float64(runsTime.Microseconds())/float64(b.N)/1000, "runs-ms")
	b.ReportMetric(float64(closeTime.Microseconds())/float64(b.N)/1000, "close-ms")
}
