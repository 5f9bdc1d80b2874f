package wait

import (
	"fmt"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

// sleepersFile is WAITS of n runs, each asleep until a time of its own
// (1 s .. n s after t0, in an order unlike the ids), as bench/waits
// builds them.
func sleepersFile(n int) []byte {
	const t0 = int64(1_796_000_000_000_000_000)
	f := &layout.Waits{Gen: 7, Replay: wal.Pos{Segment: 3, Offset: 4096}, High: t0, Runs: make([]layout.WaitsRun, n)}
	for i := range n {
		k := int64((i*7919)%n + 1)
		f.Runs[i] = layout.WaitsRun{ID: fmt.Sprintf("run-%06d", i), Mark: wal.Pos{Segment: 2, Offset: int64(100 * i)},
			Wait: &layout.WaitsWait{Seq: 1, Declared: t0 - 1, Deadline: t0 + k*1e9}}
	}
	return f.Marshal()
}

// BenchmarkLoadWaits: the load of the index from WAITS of 100,000
// sleeping runs and an empty tail, what the first Ready after a restart
// pays for the index.
func BenchmarkLoadWaits(b *testing.B) {
	file := sleepersFile(100000)
	var ids []string // the store's strings, as the engine hands them out
	for i := range 100000 {
		ids = append(ids, fmt.Sprintf("run-%06d", i))
	}
	var why string
	b.ReportAllocs()
	for b.Loop() {
		x := New(nil)
		x.From(7, wal.Pos{Segment: 3, Offset: 4096})
		if err := x.Load(idSource{fileSource{nil, file, &why}, ids, new(int)}); err != nil || x.Rebuilt() != "" {
			b.Fatal(err, x.Rebuilt())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100000, "ns/run")
}

// idSource is fileSource with the store's strings of the run ids
// (sorted), handed out as the engine does with SortedIDs: by a
// cursor that moves forward with WAITS's sorted runs, back to the start
// for the next load.
type idSource struct {
	fileSource
	ids []string
	at  *int
}

func (s idSource) RunID(id []byte) string {
	i := *s.at
	if i > 0 && i <= len(s.ids) && s.ids[i-1] >= string(id) {
		i = 0 // a new load
	}
	for i < len(s.ids) && s.ids[i] < string(id) {
		i++
	}
	*s.at = i
	if i < len(s.ids) && s.ids[i] == string(id) {
		*s.at = i + 1
		return s.ids[i]
	}
	return string(id)
}

// TestLoadSharesRunIDs: a load of WAITS holds the Source's strings of the
// run ids, allocates no entry of its own per run (slabs), and is the
// same index as a load that copies them.
func TestLoadSharesRunIDs(t *testing.T) {
	const n = 2000
	file := sleepersFile(n)
	if got := layout.WaitsRunCount(file); got != n {
		t.Fatalf("WaitsRunCount: %d, want %d", got, n)
	}
	if got := layout.WaitsRunCount(file[:12]); got != 0 {
		t.Fatalf("WaitsRunCount of a cut file: %d, want 0", got)
	}
	var runs []string
	for i := range n {
		runs = append(runs, fmt.Sprintf("run-%06d", i))
	}
	ids := runs
	var why string
	load := func(src Source) *Index {
		x := New(func() time.Time { return time.Unix(0, 1_796_000_000_000_000_000) })
		x.From(7, wal.Pos{Segment: 3, Offset: 4096})
		if err := x.Load(src); err != nil || x.Rebuilt() != "" {
			t.Fatalf("load: %v, rebuilt: %q", err, x.Rebuilt())
		}
		return x
	}
	shared := load(idSource{fileSource{nil, file, &why}, ids, new(int)})
	copied := load(fileSource{nil, file, &why})
	if a, b := dump(shared, runs, nil), dump(copied, runs, nil); a != b {
		t.Fatalf("the two loads differ (%d and %d bytes of dump)", len(a), len(b))
	}
	for id, rw := range shared.mu.runs {
		i, _ := slices.BinarySearch(ids, id)
		if unsafe.StringData(id) != unsafe.StringData(ids[i]) || unsafe.StringData(rw.w.Run) != unsafe.StringData(ids[i]) {
			t.Fatalf("run %q: the index holds a string of its own", id)
		}
	}
	if d, ok := shared.NextDeadline(); !ok || d != 1_796_000_000_000_000_000+1e9 {
		t.Fatalf("the earliest deadline: %d %v", d, ok)
	}
	allocs := testing.AllocsPerRun(3, func() { load(idSource{fileSource{nil, file, &why}, ids, new(int)}) })
	if allocs > n/8 {
		t.Fatalf("a load of %d runs made %.0f allocations: more than one per 8 runs", n, allocs)
	}
	t.Logf("a load of %d sleeping runs: %.0f allocations", n, allocs)
}

// TestSortedIDs: the cursor hands out the rows' own strings for ids asked
// in order, and answers false (a copy is made) for an id not in the rows
// or asked out of order.
func TestSortedIDs(t *testing.T) {
	if SortedIDs(nil) != nil {
		t.Fatal("SortedIDs of no rows: want nil (copy every id)")
	}
	rows := []layout.CheckpointRun{{ID: "a"}, {ID: "c"}, {ID: "e"}}
	ids := SortedIDs(rows)
	for _, c := range []struct {
		id   string
		want bool
	}{{"a", true}, {"b", false}, {"c", true}, {"a", false}, {"e", true}, {"f", false}} {
		got, ok := ids([]byte(c.id))
		if ok != c.want || (ok && got != c.id) {
			t.Fatalf("SortedIDs(%q) = %q, %v; want found %v", c.id, got, ok, c.want)
		}
		if ok && unsafe.StringData(got) != unsafe.StringData(rowID(rows, c.id)) {
			t.Fatalf("SortedIDs(%q) is a copy, want the row's string", c.id)
		}
	}
}

func rowID(rows []layout.CheckpointRun, id string) string {
	for _, r := range rows {
		if r.ID == id {
			return r.ID
		}
	}
	return ""
}
