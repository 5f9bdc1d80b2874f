package enginebench

import (
	"fmt"
	"testing"
	"time"

	"github.com/continuumdb/continuum/internal/wait"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

// BenchmarkWaitTaken: what the commit path's applied hook (engine/hooks.go,
// the waits entry) costs each atom once the wait index is loaded:
// wait.Index.Taken of a run that commits with no wait of its
// own, beside 0 and 100,000 runs that wait (WAITS version 2, read in
// place as Open loads it), and of runs that do wait (each call takes one
// run's wait, as the atom after a wait does).
//
//	go test -run '^$' -bench WaitTaken -benchtime 1000000x ./bench/engine
func BenchmarkWaitTaken(b *testing.B) {
	const t0 = int64(1_796_000_000_000_000_000)
	for _, n := range []int{0, 100000} {
		f := &layout.Waits{Version: 2, Gen: 7, Replay: wal.Pos{Segment: 3, Offset: 4096}, High: t0, Runs: make([]layout.WaitsRun, n)}
		for i := range n {
			k := int64((i*7919)%n + 1)
			f.Runs[i] = layout.WaitsRun{ID: fmt.Sprintf("run-%06d", i), Mark: wal.Pos{Segment: 2, Offset: int64(100 * i)},
				Wait: &layout.WaitsWait{Seq: 1, Declared: t0 - 1, Deadline: t0 + k*1e9}}
		}
		file := f.Marshal()
		load := func(b *testing.B) *wait.Index {
			x := wait.New(func() time.Time { return time.Unix(0, t0) })
			x.From(7, wal.Pos{Segment: 3, Offset: 4096})
			var why string
			if err := x.Load(wait.RecordSource{Name: "WAITS", File: file, Rebuilt: func(s string) { why = s }}); err != nil || why != "" {
				b.Fatalf("load: %v, rebuilt: %q", err, why)
			}
			return x
		}
		b.Run(fmt.Sprintf("waiting=%d/nowait", n), func(b *testing.B) {
			x := load(b)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				x.Taken("agent-run", uint64(i+2))
			}
		})
		if n == 0 {
			continue
		}
		b.Run(fmt.Sprintf("waiting=%d/taken", n), func(b *testing.B) {
			x := load(b)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				x.Taken(fmt.Sprintf("run-%06d", i%n), 2)
			}
		})
	}
}
