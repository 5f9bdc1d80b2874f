package saga

import (
	"errors"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

var errPending = errors.New("rollback pending")

// TestSlot follows a run's pending rollback through its life: empty,
// pended, refused, left by another seq's atom, completed by its own.
func TestSlot(t *testing.T) {
	var s Slot
	if s.Pending() != nil || s.Refuse("r", Errors{RollbackPending: errPending}) != nil {
		t.Fatal("the zero Slot is not empty")
	}
	if to, ok := s.Target(); ok || to != 0 {
		t.Fatalf("Target of the zero Slot: %d %v", to, ok)
	}
	if _, ok := s.Complete(6); ok {
		t.Fatal("Complete of the zero Slot")
	}
	p := &Pending{Seq: 6, To: 2, Pin: 9}
	s.Pend(p)
	if s.Pending() != p {
		t.Fatal("Pend did not keep p")
	}
	if to, ok := s.Target(); !ok || to != 2 {
		t.Fatalf("Target: %d %v", to, ok)
	}
	err := s.Refuse("r", Errors{RollbackPending: errPending})
	want := `rollback pending: run "r": the rollback to seq 2 is not finished; Rollback(ctx, 2, opts) finishes it`
	if !errors.Is(err, errPending) || err.Error() != want {
		t.Fatalf("Refuse: %v, want %s", err, want)
	}
	if _, ok := s.Complete(5); ok || s.Pending() != p {
		t.Fatal("an atom of another seq completed the rollback")
	}
	if pin, ok := s.Complete(6); !ok || pin != 9 || s.Pending() != nil {
		t.Fatalf("Complete(6): pin %d %v, left %+v", pin, ok, s.Pending())
	}
}

func TestSlotReplay(t *testing.T) {
	head := chain.Hash{7}
	raw, err := Record(nil, "r", 6, 2, head, 99, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &record.Record{Kind: record.KindRollback, Run: "r", Seq: 6, To: 2, Head: head, Raw: raw}
	pins := 0
	pin := func() uint64 { pins++; return 41 }

	var s Slot
	if why := s.Replay(rec, 6, head, pin); why != "" || s.Pending() != nil || pins != 0 {
		t.Fatalf("a completed rollback: %q, %+v, %d pins", why, s.Pending(), pins)
	}
	if why := s.Replay(rec, 4, head, pin); why == "" || s.Pending() != nil || pins != 0 {
		t.Fatalf("a record that contradicts the run: %q, %+v, %d pins", why, s.Pending(), pins)
	}
	if why := s.Replay(rec, 5, head, pin); why != "" || pins != 1 {
		t.Fatalf("the next seq's record: %q, %d pins", why, pins)
	}
	p := s.Pending()
	if p == nil || p.Seq != 6 || p.To != 2 || p.Pin != 41 || p.Seal != record.RollbackSeal(raw) {
		t.Fatalf("the replayed rollback: %+v", p)
	}
	if why := s.Replay(rec, 5, head, pin); why == "" || s.Pending() != p || pins != 1 {
		t.Fatalf("a second record: %q, %+v, %d pins", why, s.Pending(), pins)
	}
}
