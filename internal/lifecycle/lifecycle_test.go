package lifecycle

import (
	"errors"
	"strings"
	"testing"
	"time"

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
	at := time.Unix(0, 77)
	result := []byte("done")
	rec, end, err := Record(h, nil, "run", 4, prev, Completed, at, result)
	if err != nil || end.Stored != nil {
		t.Fatalf("plaintext: %v, stored %q", err, end.Stored)
	}
	if want := h.Link("run", 4, prev, record.AppendEndPayload(nil, Completed, 77, []byte("done"))); end.Head != want {
		t.Fatal("the link is not over the end's payload")
	}
	if !strings.Contains(string(rec), "done") {
		t.Fatal("the record lacks the result")
	}
	if end.Status != Completed || !end.At.Equal(at) || string(end.Result) != "done" || end.StatusName() != "completed" {
		t.Fatalf("end %+v", end)
	}
	result[0] = 'X'
	if string(end.Result) != "done" || string(end.RowResult()) != "done" {
		t.Fatal("the End shares the caller's result")
	}
}

func TestEndRowResultAndChainHead(t *testing.T) {
	head, endHead := chain.Hash{1}, chain.Hash{2}
	if seq, h, final := ChainHead(nil, 5, head); seq != 5 || h != head || final {
		t.Fatalf("active: %d %x %v", seq, h, final)
	}
	e := &End{Status: Failed, Result: []byte("plain"), Head: endHead}
	if seq, h, final := ChainHead(e, 5, head); seq != 6 || h != endHead || !final {
		t.Fatalf("ended: %d %x %v", seq, h, final)
	}
	if string(e.RowResult()) != "plain" {
		t.Fatal("a plaintext store's row holds the result")
	}
	e.Stored = []byte("sealed")
	if string(e.RowResult()) != "sealed" {
		t.Fatal("an encrypted store's row holds the stored result")
	}
}
