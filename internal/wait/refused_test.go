package wait

import (
	"errors"
	"testing"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

type status string

func (s status) String() string { return string(s) }

func TestRefused(t *testing.T) {
	errEnded, errBusy, broken := errors.New("ended"), errors.New("busy"), errors.New("broken")
	e := &Errors{RunEnded: errEnded, InProgress: errBusy}
	for _, tc := range []struct {
		h       Holding
		declare bool
		is      error
		msg     string
	}{
		{Holding{}, true, nil, ""},
		{Holding{Atom: true, Branches: true}, false, nil, ""}, // a wake or an event waits for no atom
		{Holding{Broken: broken, Ended: status("completed"), Atom: true}, true, broken, "broken"},
		{Holding{Ended: status("completed"), Ending: true}, false, errEnded, `ended: run "r" is completed`},
		{Holding{Ending: true, Atom: true}, true, errEnded, `ended: run "r" is ending`},
		{Holding{Atom: true, Branches: true}, true, errBusy, `busy: run "r": commit or fail it before the run waits`},
		{Holding{Branches: true}, true, errBusy, `busy: run "r" has branches in flight: commit or fail them before the run waits`},
	} {
		err := e.Refused("r", tc.h, tc.declare)
		if tc.is == nil {
			if err != nil {
				t.Errorf("%+v declare %v: %v, want nil", tc.h, tc.declare, err)
			}
			continue
		}
		if !errors.Is(err, tc.is) || err.Error() != tc.msg {
			t.Errorf("%+v declare %v: %v, want %q matching %v", tc.h, tc.declare, err, tc.msg, tc.is)
		}
	}
}

func TestCheckpointRows(t *testing.T) {
	row := CheckpointRows([]layout.CheckpointRun{{ID: "a", LastSeq: 3}, {ID: "c", LastSeq: 7, Status: 2}})
	for _, tc := range []struct {
		run       string
		last      uint64
		ended, ok bool
	}{{"a", 3, false, true}, {"b", 0, false, false}, {"c", 7, true, true}, {"d", 0, false, false}} {
		last, ended, ok := row(tc.run)
		if last != tc.last || ended != tc.ended || ok != tc.ok {
			t.Errorf("row(%q) = %d %v %v, want %d %v %v", tc.run, last, ended, ok, tc.last, tc.ended, tc.ok)
		}
	}
}

func TestFromCheckpoint(t *testing.T) {
	x := New(nil)
	x.FromCheckpoint(&layout.Checkpoint{Gen: 4}, wal.Pos{Segment: 2, Offset: 9})
	if x.mu.gen != 4 || x.mu.replay != (wal.Pos{Segment: 2, Offset: 9}) {
		t.Fatalf("from a checkpoint: gen %d replay %v", x.mu.gen, x.mu.replay)
	}
	x.FromCheckpoint(nil, wal.Pos{Segment: 2, Offset: 9})
	if x.mu.gen != 0 || x.mu.replay != (wal.Pos{}) {
		t.Fatalf("from none: gen %d replay %v", x.mu.gen, x.mu.replay)
	}
}
