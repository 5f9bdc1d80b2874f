package registry

import (
	"errors"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

func TestReplayChecks(t *testing.T) {
	h1, h2, h3 := chain.Hash{1}, chain.Hash{2}, chain.Hash{3}
	n1, n2 := chain.Nonce{1}, chain.Nonce{2}
	run := &Replayed{Nonce: n1, Last: 4, Head: h1}
	ended := &Replayed{Nonce: n1, Last: 4, Head: h1, Ended: true, Status: 1, EndAt: h2}
	fork := &Replayed{Nonce: n1, Parent: "p", Base: 3, Last: 3, Head: h1}
	at := wal.Pos{Segment: 1, Offset: 64}
	rec := func(k record.Kind, seq uint64, head chain.Hash) *record.Record {
		return &record.Record{Kind: k, Run: "r", Seq: seq, Head: head, Pos: at, Nonce: n1}
	}
	type want struct {
		step     Step
		orphan   bool
		mismatch string // a part of it; "" with why set: damage even from CHECKPOINT
		seq      uint64
		why      string // "": no refusal
	}
	for _, tc := range []struct {
		name  string
		check func() (Step, *Refusal)
		want  want
	}{
		{"atom reflected", func() (Step, *Refusal) { return CheckAtom(rec(record.KindAtom, 3, h3), run) }, want{step: Reflected}},
		{"atom at last, same head", func() (Step, *Refusal) { return CheckAtom(rec(record.KindAtom, 4, h1), run) }, want{step: Reflected}},
		{"atom at last, other head", func() (Step, *Refusal) { return CheckAtom(rec(record.KindAtom, 4, h3), run) },
			want{mismatch: "differs from CHECKPOINT's", seq: 4, why: "the seq is in the log twice"}},
		{"atom next", func() (Step, *Refusal) { return CheckAtom(rec(record.KindAtom, 5, h3), run) }, want{step: Apply}},
		{"atom gap", func() (Step, *Refusal) { return CheckAtom(rec(record.KindAtom, 7, h3), run) },
			want{mismatch: "CHECKPOINT's last seq is 4", seq: 5, why: "seq 7 follows seq 4: the atoms between them are missing"}},
		{"atom after end", func() (Step, *Refusal) { return CheckAtom(rec(record.KindAtom, 5, h3), ended) },
			want{seq: 5, why: "atom after the run ended (completed) at seq 5"}},
		{"atom of no run", func() (Step, *Refusal) { return CheckAtom(rec(record.KindAtom, 1, h3), nil) },
			want{orphan: true, mismatch: "a run it does not list", seq: 1, why: "atom of a run whose creation record is not in the log"}},
		{"end next", func() (Step, *Refusal) { return CheckEnd(rec(record.KindEnd, 5, h2), run) }, want{step: Apply}},
		{"end reflected", func() (Step, *Refusal) { return CheckEnd(rec(record.KindEnd, 5, h2), ended) }, want{step: Reflected}},
		{"end again", func() (Step, *Refusal) { return CheckEnd(rec(record.KindEnd, 5, h3), ended) },
			want{mismatch: "CHECKPOINT says it ended with head", seq: 5, why: "the run ends a second time"}},
		{"end gap", func() (Step, *Refusal) { return CheckEnd(rec(record.KindEnd, 6, h2), run) },
			want{mismatch: "ends it at seq 6", seq: 6, why: "the end at seq 6 does not follow the run's last atom 4"}},
		{"end of no run", func() (Step, *Refusal) { return CheckEnd(rec(record.KindEnd, 1, h2), nil) },
			want{orphan: true, mismatch: "a run it does not list", seq: 1, why: "end of a run whose creation record is not in the log"}},
		{"run again", func() (Step, *Refusal) { return Apply, CheckCreated(rec(record.KindRun, 0, h1), run) }, want{step: Apply}},
		{"run, other nonce", func() (Step, *Refusal) {
			r := rec(record.KindRun, 0, h1)
			r.Nonce = n2
			return Apply, CheckCreated(r, run)
		}, want{mismatch: "has another nonce", why: "the run is created a second time"}},
		{"run over a fork", func() (Step, *Refusal) { return Apply, CheckCreated(rec(record.KindRun, 0, h1), fork) },
			want{mismatch: "has another nonce", why: "the run is created a second time"}},
		{"fork again", func() (Step, *Refusal) {
			r := rec(record.KindFork, 3, h1)
			r.Parent = "p"
			return Apply, CheckCreated(r, fork)
		}, want{step: Apply}},
		{"fork, other point", func() (Step, *Refusal) {
			r := rec(record.KindFork, 2, h1)
			r.Parent = "p"
			return Apply, CheckCreated(r, fork)
		}, want{mismatch: "is forked otherwise", why: "the run is created a second time"}},
		{"fork of no parent", func() (Step, *Refusal) {
			r := rec(record.KindFork, 3, h1)
			r.Parent = "p"
			return Apply, Unlisted(r)
		}, want{orphan: true, mismatch: `from run "p"`, seq: 3, why: `forked from run "p", whose creation record is not before it`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step, no := tc.check()
			w := tc.want
			if w.why == "" {
				if no != nil || step != w.step {
					t.Fatalf("got step %v, refusal %+v; want step %v", step, no, w.step)
				}
				return
			}
			switch {
			case no == nil:
				t.Fatalf("no refusal; want %q", w.why)
			case no.Why != w.why || no.Seq != w.seq || no.Orphan != w.orphan:
				t.Fatalf("refusal %+v; want why %q, seq %d, orphan %v", no, w.why, w.seq, w.orphan)
			case w.mismatch == "" && no.Mismatch != "", w.mismatch != "" && !strings.Contains(no.Mismatch, w.mismatch):
				t.Fatalf("mismatch %q; want it to say %q", no.Mismatch, w.mismatch)
			}
		})
	}
}

func TestMismatchf(t *testing.T) {
	err := Mismatchf("replay position %d", 7)
	var m *Mismatch
	if !errors.As(err, &m) || m.Reason != "replay position 7" || err.Error() != "replay position 7" {
		t.Fatalf("Mismatchf = %v", err)
	}
}

func TestRunState(t *testing.T) {
	lr := &Run{Last: 5, Head: chain.Hash{5}, Parent: "p", Base: 3, Pos: []wal.Pos{{Segment: 1, Offset: 10}, {Segment: 1, Offset: 20}}}
	s := lr.State()
	if s.Empty || s.Last != 5 || s.Head != lr.Head || s.FrameSeq != 0 || s.IndexedSeq != 3 || s.SnapSeq != 3 || len(s.Positions) != 2 {
		t.Fatalf("State = %+v", s)
	}
	s.Positions[0].Offset = 99
	if lr.Pos[0].Offset != 10 {
		t.Fatal("State's positions share the Run's")
	}
	if s := (&Run{Head: chain.Hash{1}}).State(); !s.Empty || s.Positions != nil {
		t.Fatalf("a run without atoms: %+v", s)
	}
}
