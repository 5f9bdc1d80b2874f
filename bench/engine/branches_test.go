package enginebench

// Branch throughput: 8 branches of one run against 8 separate runs, each
// worker committing atoms as fast as it can, Strict durability, fsync on,
// a real temporary directory (goal: branches >= 0.8x runs):
//
//	go test -run '^$' -bench Branches -benchtime 3x -count 5 ./bench/engine
//
// Each iteration runs both, in one process, on stores alike (a fresh store
// each), the order alternating between iterations; an iteration's figures
// are the atoms both made over their wall times, and ratio the median over
// the iterations of each pair's ratio (runs' time over branches': above 1,
// branches are faster). The workers' writes are
// disjoint (no conflict): what is measured is the cost of branches (the
// conflict check, the chained commit pipeline of one run) against
// independent runs, which share group commits as branches of one run do.
// Variants: no action per atom (the commit alone: one fsync wait), and one
// action (intent, certificate and commit: three). cpu-µs/atom is the
// process's user+system CPU time per atom (getrusage), background work
// included.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

const (
	branchWorkers = 8
	// branchAtoms per worker and iteration: a multiple of the snapshot and
	// chain checkpoint intervals (50, 100), so that one run of 800 atoms
	// and eight of 100 take as many of each (16 snapshots, 8 checkpoints).
	branchAtoms = 100
)

// branchWork runs the workers on a fresh store in dir: with branches of
// run "r" (branches) or each on its run (!branches). It returns the wall
// time and the log's fsyncs.
func branchWork(b *testing.B, dir string, branches bool, actions int) (took, cpu time.Duration, syncs int64) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := engine.Open(dir, &engine.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	runs := make([]*engine.Run, branchWorkers)
	for w := range runs {
		id := "r"
		if !branches {
			id = fmt.Sprint("r", w)
		}
		if runs[w], err = db.Run(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	val := make([]byte, 200)
	syncs = db.Stats().Log.Syncs
	start, cpu0 := time.Now(), cpuTime()
	var wg sync.WaitGroup
	errs := make([]error, branchWorkers)
	for w := range branchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range branchAtoms {
				var a *engine.Atom
				var err error
				if branches {
					a, err = runs[w].Branch(ctx, fmt.Sprintf("w%d-%d", w, i))
				} else {
					a, err = runs[w].Begin(ctx)
				}
				if err != nil {
					errs[w] = err
					return
				}
				d := new(frame.Delta)
				for j := range actions {
					act := ledger.Action{Tool: "fetch", Args: fmt.Appendf(nil, `{"w":%d,"i":%d,"j":%d}`, w, i, j)}
					out, err := a.Do(ctx, act, func(context.Context, string) ([]byte, error) { return []byte("ok"), nil })
					if err != nil {
						errs[w] = err
						return
					}
					d.Set(fmt.Sprintf("out-%d-%d", w, j), out)
				}
				if err := a.Commit(ctx, d.Set(fmt.Sprintf("w%d", w), val)); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	took, cpu = time.Since(start), cpuTime()-cpu0
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return took, cpu, db.Stats().Log.Syncs - syncs
}

func BenchmarkBranches(b *testing.B) {
	for _, actions := range []int{0, 1} {
		b.Run(fmt.Sprintf("actions=%d", actions), func(b *testing.B) {
			var tBr, tRuns, cBr, cRuns time.Duration
			var sBr, sRuns int64
			var ratios []float64 // per iteration: runs' time over branches'
			for i := 0; i < b.N; i++ {
				dir := b.TempDir()
				order := []bool{true, false}
				if i%2 == 1 {
					order = []bool{false, true}
				}
				var pair [2]time.Duration
				for _, br := range order {
					t, c, s := branchWork(b, filepath.Join(dir, fmt.Sprint(br)), br, actions)
					if br {
						tBr, cBr, sBr, pair[0] = tBr+t, cBr+c, sBr+s, t
					} else {
						tRuns, cRuns, sRuns, pair[1] = tRuns+t, cRuns+c, sRuns+s, t
					}
				}
				ratios = append(ratios, pair[1].Seconds()/pair[0].Seconds())
			}
			slices.Sort(ratios)
			atoms := float64(b.N * branchWorkers * branchAtoms)
			b.ReportMetric(atoms/tBr.Seconds(), "branch-atoms/s")
			b.ReportMetric(atoms/tRuns.Seconds(), "runs-atoms/s")
			b.ReportMetric(ratios[len(ratios)/2], "ratio")
			b.ReportMetric(float64(sBr)/atoms, "branch-fsyncs/atom")
			b.ReportMetric(float64(sRuns)/atoms, "runs-fsyncs/atom")
			b.ReportMetric(float64(cBr.Microseconds())/atoms, "branch-cpu-µs/atom")
			b.ReportMetric(float64(cRuns.Microseconds())/atoms, "runs-cpu-µs/atom")
		})
	}
}
