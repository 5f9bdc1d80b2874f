package offline_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
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
