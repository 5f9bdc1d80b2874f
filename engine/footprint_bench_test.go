//go:build unix

package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/continuumdb/continuum/ledger"
)

// BenchmarkNewStore measures what a new store costs, beside the design it
// replaced, in one process: store by store, alternating which goes first,
// the earlier design ("base": a 1 MiB first log segment, the snapshot store
// created a moment after Open or by Close) and this one ("new": a 64 KiB
// first segment, the snapshot store created on first need). Each store,
// in a new directory of the real disk (os.TempDir: check that it is not a
// tmpfs), is opened (timed: the first Open of a store), given 10 atoms of
// the agent workload (one Do of ~200 B args and ~300 B result, one delta
// of ~500 B, strict mode) and closed (timed), and then measured: the bytes
// its files hold and the bytes allocated to it, directories included.
//
//	go test ./engine -run '^$' -bench NewStore -benchtime 200x -count 5
//
// Metrics, per design: open and close p50 and p99 in ms, size and alloc in
// KiB; the ratios are new over base.
func BenchmarkNewStore(b *testing.B) {
	root, err := os.MkdirTemp("", "continuum-newstore-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(root)
	type design struct {
		name            string
		initialSegment  int64
		snapshotsOnNeed bool
		open, close     []time.Duration
		size, alloc     []int64
	}
	designs := []*design{
		{name: "base", initialSegment: 1 << 20, snapshotsOnNeed: false},
		{name: "new", initialSegment: 0, snapshotsOnNeed: true},
	}
	defer func(seg int64, onNeed bool) { walInitialSegment, snapshotsOnNeed = seg, onNeed }(walInitialSegment, snapshotsOnNeed)
	ctx := context.Background()
	opts := &Options{Logger: quiet()}
	atoms := make([]workload.Atom, 10)
	for i := range atoms {
		atoms[i] = workload.Script("run", uint64(i+1), 1)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		order := designs
		if i%2 == 1 {
			order = []*design{designs[1], designs[0]}
		}
		for _, d := range order {
			walInitialSegment, snapshotsOnNeed = d.initialSegment, d.snapshotsOnNeed
			dir := filepath.Join(root, fmt.Sprintf("%s-%d", d.name, i))
			t0 := time.Now()
			db, err := Open(dir, opts)
			if err != nil {
				b.Fatal(err)
			}
			d.open = append(d.open, time.Since(t0))
			run, err := db.Run(ctx, "run")
			if err != nil {
				b.Fatal(err)
			}
			for _, a := range atoms {
				if err := benchWorkloadAtom(ctx, run, a); err != nil {
					b.Fatal(err)
				}
			}
			t0 = time.Now()
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			d.close = append(d.close, time.Since(t0))
			size, alloc := diskUsage(b, dir)
			d.size, d.alloc = append(d.size, size), append(d.alloc, alloc)
			if err := os.RemoveAll(dir); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	ms := func(ds []time.Duration, q float64) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(q*float64(len(s))))]) / 1e6
	}
	kib := func(xs []int64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return float64(s[len(s)/2]) / 1024
	}
	for _, d := range designs {
		b.ReportMetric(ms(d.open, 0.5), d.name+"-open-p50-ms")
		b.ReportMetric(ms(d.open, 0.99), d.name+"-open-p99-ms")
		b.ReportMetric(ms(d.close, 0.5), d.name+"-close-p50-ms")
		b.ReportMetric(ms(d.close, 0.99), d.name+"-close-p99-ms")
		b.ReportMetric(kib(d.size), d.name+"-size-KiB")
		b.ReportMetric(kib(d.alloc), d.name+"-alloc-KiB")
	}
	base, now := designs[0], designs[1]
	b.ReportMetric(ms(now.open, 0.5)/ms(base.open, 0.5), "open-p50-ratio")
	b.ReportMetric(ms(now.close, 0.5)/ms(base.close, 0.5), "close-p50-ratio")
	b.ReportMetric(kib(now.alloc)/kib(base.alloc), "alloc-ratio")
	b.ReportMetric(0, "ns/op")
}

// benchWorkloadAtom performs atom a of the agent workload in run: Begin,
// one Do, one Commit of its delta.
func benchWorkloadAtom(ctx context.Context, run *Run, a workload.Atom) error {
	atom, err := run.Begin(ctx)
	if err != nil {
		return err
	}
	act := ledger.Action{Tool: a.Tool, Args: a.Args, Key: a.Key, Idempotent: a.Idempotent}
	res, err := atom.Do(ctx, act, func(context.Context, string) ([]byte, error) { return a.Result, nil })
	if err != nil {
		return err
	}
	d := new(frame.Delta)
	if a.Objective != "" {
		d.SetObjective(a.Objective)
	}
	if a.Subgoal != "" {
		d.AddSubgoal(fmt.Sprintf("sg-%d", a.Seq), a.Subgoal)
	}
	d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: a.Thought})
	d.AppendMessage(frame.Message{Role: frame.RoleTool, Content: string(res), Tool: a.Tool, CallID: a.Key})
	d.Set(a.MemKey, a.MemVal)
	return atom.Commit(ctx, d)
}
