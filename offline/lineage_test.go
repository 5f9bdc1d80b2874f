package offline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/record"
	"github.com/google/go-cmp/cmp"
)

// A store's lineages as their run summaries describe them:
//
//	r (10 atoms)
//	├─ f1 at 5 (own atoms 6..8)
//	│  ├─ f2 at 7 (own atoms 8..12)    a fork of a fork past its fork point
//	│  └─ f3 at 3 (own atoms 4..6)     a fork of a seq f1 inherited from r
//	│                                  (DB.Fork makes it a fork of r; a log
//	│                                  may still say so)
//	├─ g at 0 (own atoms 1..2)
//	└─ e at 10 (no atom of its own)
//	other (4 atoms)                    another lineage
//
// and fork records that contradict each other: orphan (its parent is not
// in the store), past (forked past its parent's last seq), c1 and c2
// (forked from each other).
var testRuns = map[string]RunSummary{
	"r":      {ID: "r", LastSeq: 10},
	"f1":     {ID: "f1", LastSeq: 8, Parent: "r", ForkedAt: 5},
	"f2":     {ID: "f2", LastSeq: 12, Parent: "f1", ForkedAt: 7},
	"f3":     {ID: "f3", LastSeq: 6, Parent: "f1", ForkedAt: 3},
	"g":      {ID: "g", LastSeq: 2, Parent: "r", ForkedAt: 0},
	"e":      {ID: "e", Parent: "r", ForkedAt: 10},
	"other":  {ID: "other", LastSeq: 4},
	"orphan": {ID: "orphan", LastSeq: 5, Parent: "gone", ForkedAt: 2},
	"past":   {ID: "past", LastSeq: 11, Parent: "other", ForkedAt: 9},
	"c1":     {ID: "c1", LastSeq: 5, Parent: "c2", ForkedAt: 2},
	"c2":     {ID: "c2", LastSeq: 5, Parent: "c1", ForkedAt: 2},
}

func testLineage() lineage {
	return lineage{dir: "/store", file: "/store/wal", run: func(id string) (RunSummary, bool) {
		s, ok := testRuns[id]
		return s, ok
	}}
}

// TestLineageDiff pins the common state and the spans of atoms of diffs
// within one run, across forks, forks of forks and forks at 0 and at a
// run's last seq, and the errors of bad points and contradicting fork
// records.
func TestLineageDiff(t *testing.T) {
	for _, tc := range []struct {
		a, b   Point
		base   Point
		sa, sb []Span
		err    error  // errors.Is
		errRun string // the run a corruption error names
	}{
		{a: Point{"r", 3}, b: Point{"r", 7}, base: Point{"r", 3}, sb: []Span{{"r", 4, 7}}},
		{a: Point{"r", 7}, b: Point{"r", 3}, base: Point{"r", 3}, sa: []Span{{"r", 4, 7}}},
		{a: Point{"r", 4}, b: Point{"r", 4}, base: Point{"r", 4}},
		{a: Point{"r", 0}, b: Point{"r", 10}, base: Point{"r", 0}, sb: []Span{{"r", 1, 10}}},
		{a: Point{"r", 10}, b: Point{"f1", 8}, base: Point{"r", 5}, sa: []Span{{"r", 6, 10}}, sb: []Span{{"f1", 6, 8}}},
		{a: Point{"f1", 8}, b: Point{"r", 3}, base: Point{"r", 3}, sa: []Span{{"r", 4, 5}, {"f1", 6, 8}}},
		{a: Point{"f1", 5}, b: Point{"f1", 8}, base: Point{"r", 5}, sb: []Span{{"f1", 6, 8}}},
		{a: Point{"f1", 4}, b: Point{"r", 9}, base: Point{"r", 4}, sb: []Span{{"r", 5, 9}}},
		{a: Point{"f2", 12}, b: Point{"r", 10}, base: Point{"r", 5}, sa: []Span{{"f1", 6, 7}, {"f2", 8, 12}}, sb: []Span{{"r", 6, 10}}},
		{a: Point{"f2", 12}, b: Point{"f1", 8}, base: Point{"f1", 7}, sa: []Span{{"f2", 8, 12}}, sb: []Span{{"f1", 8, 8}}},
		{a: Point{"f2", 12}, b: Point{"f3", 6}, base: Point{"r", 3},
			sa: []Span{{"r", 4, 5}, {"f1", 6, 7}, {"f2", 8, 12}}, sb: []Span{{"f3", 4, 6}}},
		{a: Point{"f3", 2}, b: Point{"f1", 2}, base: Point{"r", 2}},
		{a: Point{"g", 2}, b: Point{"f1", 8}, base: Point{"r", 0}, sa: []Span{{"g", 1, 2}}, sb: []Span{{"r", 1, 5}, {"f1", 6, 8}}},
		{a: Point{"e", 10}, b: Point{"r", 10}, base: Point{"r", 10}},
		{a: Point{"e", 10}, b: Point{"f1", 6}, base: Point{"r", 5}, sa: []Span{{"r", 6, 10}}, sb: []Span{{"f1", 6, 6}}},

		{a: Point{"e", 11}, b: Point{"r", 1}, err: ErrSeqOutOfRange},
		{a: Point{"r", 1}, b: Point{"r", 11}, err: ErrSeqOutOfRange},
		{a: Point{"r", 1}, b: Point{"other", 1}, err: ErrUnrelatedRuns},
		{a: Point{"g", 1}, b: Point{"other", 4}, err: ErrUnrelatedRuns},
		{a: Point{"orphan", 5}, b: Point{"r", 1}, err: record.ErrCorrupt, errRun: "orphan"},
		{a: Point{"r", 1}, b: Point{"orphan", 1}, err: record.ErrCorrupt, errRun: "orphan"},
		{a: Point{"past", 11}, b: Point{"other", 1}, err: record.ErrCorrupt, errRun: "past"},
		{a: Point{"c1", 4}, b: Point{"r", 1}, err: record.ErrCorrupt, errRun: "c2"},
		{a: Point{"c2", 1}, b: Point{"c2", 1}, err: record.ErrCorrupt, errRun: "c2"},
	} {
		t.Run(fmt.Sprintf("%s@%d-%s@%d", tc.a.Run, tc.a.Seq, tc.b.Run, tc.b.Seq), func(t *testing.T) {
			d, err := testLineage().diff(tc.a, tc.b)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want one matching %v", err, tc.err)
				}
				var ce *CorruptionError
				if tc.errRun != "" && (!errors.As(err, &ce) || ce.Run != tc.errRun) {
					t.Errorf("error %v does not name run %q", err, tc.errRun)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := &Diff{Base: tc.base, A: DiffSide{Point: tc.a, Spans: tc.sa}, B: DiffSide{Point: tc.b, Spans: tc.sb}}
			if diff := cmp.Diff(want, d); diff != "" {
				t.Errorf("diff (-want +got):\n%s", diff)
			}
		})
	}
	for _, tc := range []struct {
		a, b Point
		want string
	}{
		{Point{"nope", 1}, Point{"r", 1}, `offline: diff: store /store has no run "nope"`},
		{Point{"r", 11}, Point{"r", 1}, `continuum: seq out of range: offline: diff: run "r" has seqs 0..10, not 11`},
		{Point{"r", 1}, Point{"other", 1}, `continuum: runs of different lineages: offline: diff: run "r" (lineage of "r") and run "other" (lineage of "other") share no state`},
		{Point{"orphan", 3}, Point{"r", 1}, `continuum: corrupt store: /store/wal: run "orphan": forked from run "gone", which the store does not have`},
		{Point{"past", 11}, Point{"r", 1}, `continuum: corrupt store: /store/wal: run "past" seq 9: forked from run "other" at seq 9, past that run's last seq 4`},
		{Point{"c1", 4}, Point{"r", 1}, `continuum: corrupt store: /store/wal: run "c2": its fork records form a cycle: "c2" forked from "c1" forked from "c2"`},
	} {
		_, err := testLineage().diff(tc.a, tc.b)
		if err == nil || err.Error() != tc.want {
			t.Errorf("diff %v %v: error\n  %v\nwant\n  %s", tc.a, tc.b, err, tc.want)
		}
	}
}

// TestLineageDiffAllPairs checks every pair of points of the sound runs
// of testRuns against the definition: a run's history is the atom (the
// run that wrote it, and its seq) at each of its seqs, a fork's the
// parent's up to its fork point and its own after; Base is the end of the
// longest prefix both histories share, and each side's spans spell out the
// rest of its history. Points of r's lineage and other's share nothing.
func TestLineageDiffAllPairs(t *testing.T) {
	var history func(run string, seq uint64) []Point
	history = func(run string, seq uint64) []Point {
		s := testRuns[run]
		if s.Parent == "" || seq <= s.ForkedAt {
			if s.Parent == "" {
				h := make([]Point, 0, seq)
				for k := uint64(1); k <= seq; k++ {
					h = append(h, Point{run, k})
				}
				return h
			}
			return history(s.Parent, seq)
		}
		h := history(s.Parent, s.ForkedAt)
		for k := s.ForkedAt + 1; k <= seq; k++ {
			h = append(h, Point{run, k})
		}
		return h
	}
	var points []Point
	for _, id := range []string{"r", "f1", "f2", "f3", "g", "e", "other"} {
		for k := uint64(0); k <= lastSeq(testRuns[id]); k++ {
			points = append(points, Point{id, k})
		}
	}
	expand := func(spans []Span) []Point {
		var out []Point
		for _, s := range spans {
			if s.From > s.To {
				t.Errorf("empty span %v", s)
			}
			for k := s.From; k <= s.To; k++ {
				out = append(out, Point{s.Run, k})
			}
		}
		return out
	}
	for _, a := range points {
		for _, b := range points {
			ha, hb := history(a.Run, a.Seq), history(b.Run, b.Seq)
			d, err := testLineage().diff(a, b)
			if (a.Run == "other") != (b.Run == "other") {
				// Two lineages, even at seq 0 where both frames are empty.
				if !errors.Is(err, ErrUnrelatedRuns) {
					t.Errorf("%v %v: error %v, want ErrUnrelatedRuns", a, b, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%v %v: %v", a, b, err)
				continue
			}
			n := 0
			for n < len(ha) && n < len(hb) && ha[n] == hb[n] {
				n++
			}
			if d.Base.Seq != uint64(n) {
				t.Errorf("%v %v: base %v, want seq %d", a, b, d.Base, n)
			}
			if n > 0 && d.Base != ha[n-1] {
				t.Errorf("%v %v: base %v, want the run that wrote seq %d, %v", a, b, d.Base, n, ha[n-1])
			}
			if got := expand(d.A.Spans); !slices.Equal(got, ha[n:]) {
				t.Errorf("%v %v: side a %v, want %v", a, b, got, ha[n:])
			}
			if got := expand(d.B.Spans); !slices.Equal(got, hb[n:]) {
				t.Errorf("%v %v: side b %v, want %v", a, b, got, hb[n:])
			}
			if d.A.Point != a || d.B.Point != b {
				t.Errorf("%v %v: points %v %v", a, b, d.A.Point, d.B.Point)
			}
		}
	}
}

// TestStateAtForkCycle: fork records that name each other as parents (a
// damaged log) make StateAt fail with a corruption error naming a run of
// the cycle, not recurse without end.
func TestStateAtForkCycle(t *testing.T) {
	in := &Inspector{st: &readOnlyStore{db: &store{fs: vfs.NewMem(), dir: "/store"}}, runs: map[string]*inspectRun{
		"c1": {sum: RunSummary{ID: "c1", LastSeq: 5, Parent: "c2", ForkedAt: 2}, base: 2},
		"c2": {sum: RunSummary{ID: "c2", LastSeq: 5, Parent: "c1", ForkedAt: 2}, base: 2},
	}}
	for _, seq := range []uint64{0, 2, 5} {
		_, err := in.StateAt(context.Background(), "c1", seq)
		var ce *CorruptionError
		if !errors.As(err, &ce) || (ce.Run != "c1" && ce.Run != "c2") || !strings.Contains(ce.Reason, "cycle") {
			t.Errorf("StateAt(c1, %d) in a cycle of forks: %v", seq, err)
		}
	}
}
