package wait

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

const sleepT0 = int64(1_796_000_000_000_000_000)

// sleepers is WAITS of n runs, each asleep until a time of its own
// (1 s .. n s after sleepT0, in an order unlike the ids), as bench/waits
// builds them, in version v.
func sleepers(n int, v uint16) []byte {
	f := &layout.Waits{Version: v, Gen: 7, Replay: wal.Pos{Segment: 3, Offset: 4096}, High: sleepT0, Runs: make([]layout.WaitsRun, n)}
	for i := range n {
		k := int64((i*7919)%n + 1)
		f.Runs[i] = layout.WaitsRun{ID: fmt.Sprintf("run-%06d", i), Mark: wal.Pos{Segment: 2, Offset: int64(100 * i)},
			Wait: &layout.WaitsWait{Seq: 1, Declared: sleepT0 - 1, Deadline: sleepT0 + k*1e9}}
	}
	return f.Marshal()
}

func loadFile(tb testing.TB, file []byte, clock func() time.Time) *Index {
	var why string
	x := New(clock)
	x.From(7, wal.Pos{Segment: 3, Offset: 4096})
	if err := x.Load(fileSource(nil, file, &why)); err != nil || x.Rebuilt() != "" {
		tb.Fatalf("load: %v, rebuilt: %q", err, x.Rebuilt())
	}
	return x
}

// BenchmarkLoadWaits: the load of the index from WAITS of 100,000
// sleeping runs and an empty tail, then the first Due with none due or
// some: what the first Ready after a restart pays for the index.
func BenchmarkLoadWaits(b *testing.B) {
	file := sleepers(100000, 2)
	for _, due := range []int{0, 10, 1000, 10000} {
		b.Run(fmt.Sprintf("due=%d", due), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				x := loadFile(b, file, nil)
				if got := len(x.Due(sleepT0+int64(due)*1e9, 1<<30)); got != due {
					b.Fatalf("%d due, want %d", got, due)
				}
			}
		})
	}
}

// TestLoadInPlace: a load of WAITS version 2 reads it in place: its
// allocations and the heap it keeps do not grow with the runs, a Due
// decodes the due ones only; and it is the index a load of the same
// content as version 1 (decoded whole) is.
func TestLoadInPlace(t *testing.T) {
	const n = 20000
	clock := func() time.Time { return time.Unix(0, sleepT0) }
	var runs []string
	for i := range n {
		runs = append(runs, fmt.Sprintf("run-%06d", i))
	}
	v1, v2 := loadFile(t, sleepers(n, 1), clock), loadFile(t, sleepers(n, 2), clock)
	if a, b := dump(v1, runs, nil), dump(v2, runs, nil); a != b {
		t.Fatalf("the loads of version 1 and 2 differ (%d and %d bytes of dump)", len(a), len(b))
	}
	file := sleepers(n, 2)
	allocs := testing.AllocsPerRun(3, func() { loadFile(t, file, clock) })
	if allocs > 40 {
		t.Fatalf("a load of %d runs made %.0f allocations, want a few", n, allocs)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := loadFile(t, file, clock)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if per := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n; per > 2 {
		t.Errorf("the index holds %.1f B of heap per waiting run, besides the file's bytes; want under 2", per)
	}
	runtime.KeepAlive(x)
	for _, due := range []int{10, 100} {
		a := testing.AllocsPerRun(3, func() {
			if got := x.Due(sleepT0+int64(due)*1e9, 1<<30); len(got) != due {
				t.Fatalf("%d due, want %d", len(got), due)
			}
		})
		if a > float64(10*due+20) {
			t.Fatalf("a Due of %d made %.0f allocations", due, a)
		}
	}
	if d, ok := x.NextDeadline(); !ok || d != sleepT0+1e9 {
		t.Fatalf("the earliest deadline: %d %v", d, ok)
	}
}
