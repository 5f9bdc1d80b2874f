package offline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/offline"
	"github.com/google/go-cmp/cmp"
)

// TestDiffOneRun: within one run, Diff's Base is the earlier seq, the
// later side holds every atom after it in order, as Atom reads them, and
// applying its deltas to the frame at Base gives the frame at the later
// seq; the other side is empty.
func TestDiffOneRun(t *testing.T) {
	ctx := context.Background()
	in := inspect(t, exportStore(t))
	const run = "deploy-42"
	for _, tc := range []struct{ a, b uint64 }{{1, 3}, {3, 1}, {0, 4}, {2, 2}, {4, 0}, {0, 0}} {
		d, err := in.Diff(ctx, run, tc.a, run, tc.b)
		if err != nil {
			t.Fatalf("Diff %d %d: %v", tc.a, tc.b, err)
		}
		lo, hi := min(tc.a, tc.b), max(tc.a, tc.b)
		if d.Base != (offline.Point{Run: run, Seq: lo}) {
			t.Errorf("Diff %d %d: base %v, want seq %d", tc.a, tc.b, d.Base, lo)
		}
		var wantHead string
		if lo > 0 {
			a, err := in.Atom(ctx, run, lo)
			if err != nil {
				t.Fatal(err)
			}
			wantHead = a.Head.String()
		}
		if got := d.BaseHead.String(); lo > 0 && got != wantHead || lo == 0 && !d.BaseHead.IsZero() {
			t.Errorf("Diff %d %d: base head %s, want %q", tc.a, tc.b, got, wantHead)
		}
		later, earlier := &d.B, &d.A
		if tc.a > tc.b {
			later, earlier = &d.A, &d.B
		}
		if len(earlier.Spans) != 0 || len(earlier.Atoms) != 0 || earlier.Ops() != 0 {
			t.Errorf("Diff %d %d: the earlier side has %v, %d atoms", tc.a, tc.b, earlier.Spans, len(earlier.Atoms))
		}
		if d.A.Point != (offline.Point{Run: run, Seq: tc.a}) || d.B.Point != (offline.Point{Run: run, Seq: tc.b}) {
			t.Errorf("Diff %d %d: points %v %v", tc.a, tc.b, d.A.Point, d.B.Point)
		}
		var wantSpans []offline.Span
		if hi > lo {
			wantSpans = []offline.Span{{Run: run, From: lo + 1, To: hi}}
		}
		if diff := cmp.Diff(wantSpans, later.Spans); diff != "" {
			t.Errorf("Diff %d %d: spans (-want +got):\n%s", tc.a, tc.b, diff)
		}
		f, err := in.StateAt(ctx, run, lo)
		if err != nil {
			t.Fatal(err)
		}
		ops := 0
		for i, a := range later.Atoms {
			seq := lo + 1 + uint64(i)
			want, err := in.Atom(ctx, run, seq)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(offline.NewExportedAtom(want), offline.NewExportedAtom(a)); diff != "" {
				t.Errorf("Diff %d %d: atom %d (-Atom +Diff):\n%s", tc.a, tc.b, seq, diff)
			}
			if err := f.Apply(a.Delta); err != nil {
				t.Fatal(err)
			}
			ops += len(a.Delta.Ops())
		}
		if uint64(len(later.Atoms)) != hi-lo || later.Ops() != ops {
			t.Errorf("Diff %d %d: %d atoms, %d ops; want %d atoms, %d ops", tc.a, tc.b, len(later.Atoms), later.Ops(), hi-lo, ops)
		}
		want, err := in.StateAt(ctx, run, hi)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, f); diff != "" {
			t.Errorf("Diff %d %d: the frame at the base with the diff applied is not the frame at %d (-want +got):\n%s", tc.a, tc.b, hi, diff)
		}
	}
}

// TestDiffErrors: a seq past the run's last, a run the store does not
// have, and two runs of different lineages fail before anything is read,
// each with its own error.
func TestDiffErrors(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		atom, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := atom.Commit(ctx, new(frame.Delta).SetObjective("objective of "+id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	in := inspect(t, dir)
	if _, err := in.Diff(ctx, "a", 0, "a", 2); !errors.Is(err, offline.ErrSeqOutOfRange) {
		t.Errorf("seq 2 of a run of 1 atom: %v, want ErrSeqOutOfRange", err)
	}
	if _, err := in.Diff(ctx, "a", 1, "b", 1); !errors.Is(err, offline.ErrUnrelatedRuns) {
		t.Errorf("two runs of two lineages: %v, want ErrUnrelatedRuns", err)
	}
	if _, err := in.Diff(ctx, "a", 0, "c", 0); err == nil || errors.Is(err, engine.ErrCorrupt) {
		t.Errorf("a run the store does not have: %v, want an error that is not corruption", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := in.Diff(cctx, "a", 0, "a", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled context: %v", err)
	}
}

// TestDiffFork: across real forks (a fork, a fork of it, a fork at 0, a
// fork with no atom of its own), Diff's base is where the two histories
// part, named by the run that wrote it, each side's atoms are the ones
// Atom reads of the runs its spans name, and applying them to the frame
// at the base gives each side's frame (StateAt, which answers a fork's
// inherited seqs from its parent).
func TestDiffFork(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	step := func(run *engine.Run, n int) {
		for range n {
			atom, err := run.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			v := []byte(fmt.Sprintf("%s %d", run.ID(), atom.Seq()))
			if err := atom.Commit(ctx, new(frame.Delta).Set("last", v).AppendScratch(v)); err != nil {
				t.Fatal(err)
			}
		}
	}
	src, err := db.Run(ctx, "src")
	if err != nil {
		t.Fatal(err)
	}
	step(src, 6)
	fork := func(from string, at uint64, id string, atoms int) {
		r, err := db.Fork(ctx, from, at, id)
		if err != nil {
			t.Fatal(err)
		}
		step(r, atoms)
	}
	fork("src", 3, "f", 2) // f: src 1..3, own 4..5
	fork("f", 4, "ff", 2)  // ff: src 1..3, f 4, own 5..6
	fork("src", 0, "z", 1) // z: own 1
	fork("src", 6, "e", 0) // e: src 1..6, nothing of its own
	fork("f", 3, "f3", 1)  // f3: src 1..3 (f's inherited seqs), own 4
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	in := inspect(t, dir)
	type sp = offline.Span
	for _, tc := range []struct {
		a, b   offline.Point
		base   offline.Point
		sa, sb []offline.Span
	}{
		{offline.Point{Run: "src", Seq: 6}, offline.Point{Run: "ff", Seq: 6}, offline.Point{Run: "src", Seq: 3},
			[]sp{{Run: "src", From: 4, To: 6}}, []sp{{Run: "f", From: 4, To: 4}, {Run: "ff", From: 5, To: 6}}},
		{offline.Point{Run: "ff", Seq: 6}, offline.Point{Run: "f", Seq: 5}, offline.Point{Run: "f", Seq: 4},
			[]sp{{Run: "ff", From: 5, To: 6}}, []sp{{Run: "f", From: 5, To: 5}}},
		{offline.Point{Run: "f", Seq: 2}, offline.Point{Run: "f", Seq: 5}, offline.Point{Run: "src", Seq: 2},
			nil, []sp{{Run: "src", From: 3, To: 3}, {Run: "f", From: 4, To: 5}}},
		{offline.Point{Run: "z", Seq: 1}, offline.Point{Run: "ff", Seq: 5}, offline.Point{Run: "src", Seq: 0},
			[]sp{{Run: "z", From: 1, To: 1}}, []sp{{Run: "src", From: 1, To: 3}, {Run: "f", From: 4, To: 4}, {Run: "ff", From: 5, To: 5}}},
		{offline.Point{Run: "e", Seq: 6}, offline.Point{Run: "src", Seq: 6}, offline.Point{Run: "src", Seq: 6}, nil, nil},
		{offline.Point{Run: "f3", Seq: 4}, offline.Point{Run: "ff", Seq: 6}, offline.Point{Run: "src", Seq: 3},
			[]sp{{Run: "f3", From: 4, To: 4}}, []sp{{Run: "f", From: 4, To: 4}, {Run: "ff", From: 5, To: 6}}},
	} {
		name := fmt.Sprintf("%s@%d-%s@%d", tc.a.Run, tc.a.Seq, tc.b.Run, tc.b.Seq)
		d, err := in.Diff(ctx, tc.a.Run, tc.a.Seq, tc.b.Run, tc.b.Seq)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d.Base != tc.base || !slices.Equal(d.A.Spans, tc.sa) || !slices.Equal(d.B.Spans, tc.sb) {
			t.Errorf("%s: base %v, spans %v and %v; want %v, %v and %v", name, d.Base, d.A.Spans, d.B.Spans, tc.base, tc.sa, tc.sb)
			continue
		}
		if tc.base.Seq > 0 {
			a, err := in.Atom(ctx, tc.base.Run, tc.base.Seq)
			if err != nil {
				t.Fatal(err)
			}
			if d.BaseHead != a.Head {
				t.Errorf("%s: base head %s, want %s", name, d.BaseHead, a.Head)
			}
		}
		for _, side := range []*offline.DiffSide{&d.A, &d.B} {
			f, err := in.StateAt(ctx, d.Base.Run, d.Base.Seq)
			if err != nil {
				t.Fatal(err)
			}
			i := 0
			for _, s := range side.Spans {
				for seq := s.From; seq <= s.To; seq++ {
					want, err := in.Atom(ctx, s.Run, seq)
					if err != nil {
						t.Fatal(err)
					}
					if i >= len(side.Atoms) || side.Atoms[i].Run != s.Run || side.Atoms[i].Seq != seq || side.Atoms[i].Head != want.Head {
						t.Fatalf("%s: atom %d of side %v is not %s seq %d", name, i, side.Point, s.Run, seq)
					}
					if err := f.Apply(side.Atoms[i].Delta); err != nil {
						t.Fatal(err)
					}
					i++
				}
			}
			if i != len(side.Atoms) {
				t.Errorf("%s: side %v has %d atoms, its spans %d", name, side.Point, len(side.Atoms), i)
			}
			want, err := in.StateAt(ctx, side.Point.Run, side.Point.Seq)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, f); diff != "" {
				t.Errorf("%s: the base's frame with side %v applied (-StateAt +applied):\n%s", name, side.Point, diff)
			}
		}
	}
}
