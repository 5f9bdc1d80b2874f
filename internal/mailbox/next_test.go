package mailbox

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// rcv is a Receiver over a mutex, refusing once refuse is set.
type rcv struct {
	mu     sync.Mutex
	refuse error
	locks  int
	stop   chan struct{}
}

func (r *rcv) Lock(ctx context.Context) error {
	r.mu.Lock()
	r.locks++
	if r.refuse != nil {
		r.mu.Unlock()
		return r.refuse
	}
	return nil
}
func (r *rcv) Unlock()                            { r.mu.Unlock() }
func (r *rcv) Stopping() (<-chan struct{}, error) { return r.stop, errClosed }

var errClosed = errors.New("closed")

// TestNext: without wait an empty inbox says so; with wait a message
// published later wakes the receive, which takes the lock again; the
// Receiver's refusal, ctx's end and the store's close end it.
func TestNext(t *testing.T) {
	ctx := context.Background()
	l := newFakeLog()
	var b Box
	b.Reset(l, nil, wal.Pos{})
	rc := &rcv{stop: make(chan struct{})}
	var d Draft
	if _, ok, err := b.Next(ctx, rc, "r", "", &d, false); ok || err != nil {
		t.Fatalf("Next without wait on an empty inbox: %v, %v", ok, err)
	}
	got := make(chan Message)
	go func() {
		m, _, err := b.Next(ctx, rc, "r", "", &d, true)
		if err != nil {
			t.Error(err)
		}
		got <- m
	}()
	publish(l, &b, "a", 1, msgs("r", "hello"))
	if m := <-got; string(m.Payload) != "hello" {
		t.Fatalf("Next gave %q", m.Payload)
	}
	rc.mu.Lock()
	locks := rc.locks
	rc.mu.Unlock()
	if locks < 2 {
		t.Fatalf("%d locks, want the receive to lock at least once more after its wait", locks)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := b.Next(cctx, rc, "r", "", &d, true); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with ctx ended: %v", err)
	}
	close(rc.stop)
	if _, _, err := b.Next(ctx, rc, "r", "", &d, true); err != errClosed {
		t.Fatalf("Next with the store closed: %v", err)
	}
	rc.refuse = errors.New("done")
	if _, _, err := b.Next(ctx, rc, "r", "", &d, true); err != rc.refuse {
		t.Fatalf("Next refused: %v", err)
	}
}

func TestCheckSend(t *testing.T) {
	big := errors.New("big")
	if err := CheckSend("a", 1, "b", record.MaxMessageSize, big); err != nil {
		t.Fatal(err)
	}
	if err := CheckSend("a", 1, "b", record.MaxMessageSize+1, big); !errors.Is(err, big) {
		t.Fatalf("an oversized payload: %v", err)
	}
	if err := CheckSend("a", 1, "", 1, big); err == nil || errors.Is(err, big) {
		t.Fatalf("an invalid run id: %v", err)
	}
}

func TestTakes(t *testing.T) {
	gone, ended := errors.New("gone"), errors.New("ended")
	if err := Takes("b", false, nil, gone, ended); err != nil {
		t.Fatalf("an active run (or none yet): %v", err)
	}
	if err := Takes("b", true, "completed", gone, ended); !errors.Is(err, gone) || err.Error() != `gone: run "b"` {
		t.Fatalf("a deleted run: %v", err)
	}
	if err := Takes("b", false, "completed", gone, ended); !errors.Is(err, ended) || err.Error() != `ended: run "b" is completed: it takes no messages` {
		t.Fatalf("an ended run: %v", err)
	}
}
