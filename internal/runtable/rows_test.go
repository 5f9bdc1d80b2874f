package runtable

import (
	"slices"
	"testing"
	"time"

	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/layout"
)

func rowsOf(ids ...string) []layout.CheckpointRun {
	rows := make([]layout.CheckpointRun, len(ids))
	for i, id := range ids {
		rows[i].ID = id
	}
	return rows
}

func TestRowsTake(t *testing.T) {
	var l Rows
	at := time.Unix(5, 0)
	l.Load(rowsOf("a", "b", "c", "d"), at)
	var deleted retention.Registry
	deleted.Mark("d", nil)
	if l.At() != at || l.Left() != 4 {
		t.Fatalf("At %v Left %d", l.At(), l.Left())
	}
	if c := l.Take("b", &deleted); c == nil || c.ID != "b" || l.Left() != 3 {
		t.Fatalf("Take(b) = %v, left %d", c, l.Left())
	}
	if c := l.Take("x", &deleted); c != nil {
		t.Fatalf("Take(x) = %v, a row of no run", c)
	}
	if c := l.Take("d", &deleted); c != nil || l.Left() != 3 {
		t.Fatalf("Take(d) = %v (left %d): d is deleted", c, l.Left())
	}
	l.Drop("c")
	l.Drop("c") // counted once
	if c := l.Take("c", &deleted); c != nil || l.Left() != 2 {
		t.Fatalf("Take(c) = %v (left %d): c is dropped", c, l.Left())
	}
	if got := slices.Collect(l.IDs()); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("IDs = %v", got)
	}
	if c := l.Take("a", &deleted); c == nil || l.Left() != 1 {
		t.Fatalf("Take(a) = %v, left %d", c, l.Left())
	}
	deleted.Unmark("d")
	if c := l.Take("d", &deleted); c == nil || c.ID != "d" || l.Left() != 0 || l.Rows() != nil {
		t.Fatalf("Take(d) = %v, left %d, rows %v: the last row lets the slice go", c, l.Left(), l.Rows())
	}
	if c := l.Take("a", &deleted); c != nil {
		t.Fatal("a row taken twice")
	}
}

func TestRowsTakeAll(t *testing.T) {
	var l Rows
	l.Load(rowsOf("a", "b", "c", "d", "e"), time.Time{})
	var deleted retention.Registry
	deleted.Mark("e", nil)
	l.Drop("d")
	built := map[string]bool{}
	idx := map[string]int{}
	l.TakeAll(&deleted, func(id string) bool { return built[id] }, func(i int, c *layout.CheckpointRun) {
		idx[c.ID] = i
		built[c.ID] = true
		if c.ID == "a" { // a's parent c, taken while a is built
			if p := l.Take("c", &deleted); p == nil {
				t.Fatal("Take(c) inside TakeAll: nil")
			}
			built["c"] = true
		}
	})
	if len(idx) != 2 || idx["a"] != 0 || idx["b"] != 2 {
		t.Fatalf("TakeAll built %v, want a at 0 and b at 2 (c taken inside, d dropped, e deleted)", idx)
	}
	if l.Rows() != nil || l.Take("e", &deleted) != nil {
		t.Fatalf("after TakeAll: rows %v", l.Rows())
	}
	l.Load(rowsOf("a"), time.Time{})
	l.Reset()
	if l.Left() != 0 || l.Take("a", &deleted) != nil {
		t.Fatal("Reset left a row")
	}
}

func TestRowsInterrupted(t *testing.T) {
	var l Rows
	rows := rowsOf("a", "b", "c")
	rows[0].Inflight = []layout.InflightAction{{Index: 1}}
	rows[2].Inflight = []layout.InflightAction{{Index: 2}}
	l.Load(rows, time.Time{})
	if n := l.Interrupted(func(id string) bool { return id == "c" }); n != 1 {
		t.Fatalf("Interrupted = %d, want 1 (a; c is built, b has none in flight)", n)
	}
}

func TestFromRow(t *testing.T) {
	c := &layout.CheckpointRun{ID: "r", LastSeq: 7, FrameSeq: 7, IndexedSeq: 5, SnapSeq: 4, Inflight: []layout.InflightAction{{Index: 3}}}
	c.Head[0] = 9
	s := FromRow(c)
	if s.Empty || s.Last != 7 || s.Head != c.Head || s.FrameHead != c.Head || s.IndexedSeq != 5 || s.SnapSeq != 4 || s.Interrupted != 8 || len(s.Inflight) != 1 {
		t.Fatalf("FromRow = %+v", s)
	}
	c.FrameSeq, c.Inflight = 6, nil
	if s := FromRow(c); s.FrameHead != ([32]byte{}) || s.Interrupted != 0 || s.Inflight != nil {
		t.Fatalf("a frame file below the last seq, nothing in flight: %+v", s)
	}
	if s := FromRow(&layout.CheckpointRun{ID: "e"}); !s.Empty {
		t.Fatal("a run without atoms: not Empty")
	}
	if s := FromRow(&layout.CheckpointRun{ID: "f", Parent: "p", ForkedAt: 3, LastSeq: 0}); s.Empty {
		t.Fatal("a fork: Empty")
	}
}

func TestRowsLastSeqs(t *testing.T) {
	var l Rows
	rows := rowsOf("a", "b")
	rows[0].LastSeq, rows[1].LastSeq = 3, 5
	l.Load(rows, time.Time{})
	l.Take("a", &retention.Registry{})
	m := map[string]uint64{"c": 1}
	l.LastSeqs(m)
	if len(m) != 3 || m["a"] != 3 || m["b"] != 5 || m["c"] != 1 {
		t.Fatalf("LastSeqs = %v", m)
	}
}

func TestNoteInflight(t *testing.T) {
	var in []layout.InflightAction
	in, added := NoteInflight(in, 0, [32]byte{1})
	if !added || len(in) != 1 {
		t.Fatalf("first action: %v %v", in, added)
	}
	if in, added = NoteInflight(in, 0, [32]byte{1}); added || len(in) != 1 {
		t.Fatalf("its certificate, the same fingerprint: %v %v", in, added)
	}
	if in, added = NoteInflight(in, 1, [32]byte{2}); !added || len(in) != 2 || in[1].Index != 1 {
		t.Fatalf("a second action: %v %v", in, added)
	}
}
