package mailbox

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// rcv is an Atom (run "r", seq 1) over a mutex, refusing once refuse is
// set; peers says how the store holds other runs.
type rcv struct {
	mu     sync.Mutex
	refuse error
	locks  int
	stop   chan struct{}
	d      Draft
	peers  map[string]peer
}

type peer struct {
	deleted bool
	ended   any
	err     error
}

func (r *rcv) ID() (string, uint64) { return "r", 1 }
func (r *rcv) Draft() *Draft        { return &r.d }
func (r *rcv) Peer(to string) (bool, any, error) {
	p := r.peers[to]
	return p.deleted, p.ended, p.err
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

var testErrs = Errors{TooLarge: errors.New("too large"), Deleted: errors.New("deleted"), Ended: errors.New("ended")}

// TestNext: without wait an empty inbox says so; with wait a message
// published later wakes the receive, which takes the lock again; the
// Receiver's refusal, ctx's end and the store's close end it.
func TestNext(t *testing.T) {
	ctx := context.Background()
	l := newFakeLog()
	var b Box
	b.Reset(l, nil, wal.Pos{})
	rc := &rcv{stop: make(chan struct{})}
	if _, ok, err := b.Next(ctx, rc, "", false, &testErrs); ok || err != nil {
		t.Fatalf("Next without wait on an empty inbox: %v, %v", ok, err)
	}
	got := make(chan Message)
	go func() {
		m, _, err := b.Next(ctx, rc, "", true, &testErrs)
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
	if _, _, err := b.Next(cctx, rc, "", true, &testErrs); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with ctx ended: %v", err)
	}
	close(rc.stop)
	if _, _, err := b.Next(ctx, rc, "", true, &testErrs); err != errClosed {
		t.Fatalf("Next with the store closed: %v", err)
	}
	rc.refuse = errors.New("done")
	if _, _, err := b.Next(ctx, rc, "", true, &testErrs); err != rc.refuse {
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

// TestNextLimit: an atom that received record.MaxMessagesPerAtom receives
// no more (Errors.TooLarge), with a message waiting, and the lock is let go.
func TestNextLimit(t *testing.T) {
	l := newFakeLog()
	var b Box
	b.Reset(l, nil, wal.Pos{})
	publish(l, &b, "a", 1, msgs("r", "hello"))
	rc := &rcv{stop: make(chan struct{})}
	rc.d.received = make([]*pending, record.MaxMessagesPerAtom)
	if _, _, err := b.Next(context.Background(), rc, "", false, &testErrs); !errors.Is(err, testErrs.TooLarge) {
		t.Fatalf("Next past the limit: %v", err)
	}
	if !rc.mu.TryLock() {
		t.Fatal("Next past the limit kept the run's lock")
	}
	rc.mu.Unlock()
}

// TestSend: Send's refusals in their order (the message's checks before
// the peer, the peer before the atom's lock) and the message added to the
// atom's Draft under its lock.
func TestSend(t *testing.T) {
	ctx := context.Background()
	lookup := errors.New("the table of runs is unreadable")
	rc := &rcv{peers: map[string]peer{"gone": {deleted: true}, "done": {ended: "completed"}, "bad": {err: lookup}}}
	for _, tc := range []struct {
		to      string
		n       int
		refuse  error
		want    error
		invalid bool
	}{
		{to: "", n: 1, invalid: true},
		{to: "b", n: record.MaxMessageSize + 1, want: testErrs.TooLarge},
		{to: "gone", n: 1, want: testErrs.Deleted},
		{to: "done", n: 1, want: testErrs.Ended},
		{to: "bad", n: 1, want: lookup},
		{to: "b", n: 1, refuse: errClosed, want: errClosed},
		{to: "b", n: 1},
	} {
		rc.refuse = tc.refuse
		locks := rc.locks
		err := Send(ctx, rc, tc.to, make([]byte, tc.n), &testErrs)
		switch {
		case tc.invalid:
			if err == nil || errors.Is(err, testErrs.TooLarge) {
				t.Errorf("Send to %q: %v, want an invalid run id", tc.to, err)
			}
		case !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil):
			t.Errorf("Send to %q of %d bytes: %v, want %v", tc.to, tc.n, err, tc.want)
		}
		if tc.refuse == nil && (tc.want != nil || tc.invalid) && rc.locks != locks {
			t.Errorf("Send to %q took the lock before its refusal", tc.to)
		}
		if !rc.mu.TryLock() {
			t.Fatalf("Send to %q kept the run's lock", tc.to)
		}
		rc.mu.Unlock()
	}
	if sent, _ := rc.d.Counts(); sent != 1 {
		t.Fatalf("%d messages in the Draft, want the one Send accepted", sent)
	}
	if s, _ := rc.d.Record(); s[0].To != "b" || len(s[0].Payload) != 1 {
		t.Fatalf("the Draft holds %+v", s)
	}
}
