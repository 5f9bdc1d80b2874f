package lifecycle

import (
	"errors"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

var errTooLarge, errEnded, errInProgress, errPending = errors.New("too large"), errors.New("ended"), errors.New("in progress"), errors.New("pending")

func TestCheck(t *testing.T) {
	for s := Active; s <= Cancelled+1; s++ {
		err := Check("r", s, 0, errTooLarge)
		if final := s >= Completed && s <= Cancelled; final != (err == nil) {
			t.Errorf("status %s: %v", StatusName(s), err)
		}
	}
	if err := Check("r", Completed, MaxResult, errTooLarge); err != nil {
		t.Fatal(err)
	}
	if err := Check("r", Completed, MaxResult+1, errTooLarge); !errors.Is(err, errTooLarge) {
		t.Fatalf("a result past MaxResult: %v", err)
	}
	if got := StatusName(9); got != "status-9" {
		t.Fatalf("StatusName(9) = %q", got)
	}
}

func TestEndable(t *testing.T) {
	e := Errors{RunEnded: errEnded, AtomInProgress: errInProgress, RollbackPending: errPending}
	broken := errors.New("broken")
	for _, c := range []struct {
		st   State
		want error
	}{
		{State{Run: "r"}, nil},
		{State{Run: "r", Broken: broken, Ended: "failed"}, broken},
		{State{Run: "r", Ended: "completed", Running: 3}, errEnded},
		{State{Run: "r", Ending: true}, errEnded},
		{State{Run: "r", Running: 3, Rollback: true}, errInProgress},
		{State{Run: "r", Rollback: true, To: 2, Branches: true}, errPending},
		{State{Run: "r", Branches: true}, errInProgress},
	} {
		if err := Endable(c.st, e); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%+v: %v, want %v", c.st, err, c.want)
		}
	}
}

func TestRecordLinksStoredResult(t *testing.T) {
	h, err := chain.NewHasher(nil)
	if err != nil {
		t.Fatal(err)
	}
	prev := chain.Hash{1}
	rec, head, stored, err := Record(h, nil, "run", 4, prev, Completed, 77, []byte("done"))
	if err != nil || stored != nil {
		t.Fatalf("plaintext: %v, stored %q", err, stored)
	}
	if want := h.Link("run", 4, prev, record.AppendEndPayload(nil, Completed, 77, []byte("done"))); head != want {
		t.Fatal("the link is not over the end's payload")
	}
	if !strings.Contains(string(rec), "done") {
		t.Fatal("the record lacks the result")
	}
}
