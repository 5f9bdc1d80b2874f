package wait

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// fakeCore is a Core of runs in memory and a log that counts its batches.
type fakeCore struct {
	t        *testing.T
	runs     map[string]*fakeRun
	batches  []int // records per appended batch
	pending  int   // batches appended and not yet done
	failNext error // the next Append's error
	recorded []string
	next     int64
	deleted  map[string]bool // Run: a deleted run
	runErr   error           // Run's error
}

type fakeRun struct {
	c      *fakeCore
	id     string
	last   uint64
	ended  bool
	held   bool
	refuse error // Hold refuses with it
}

func (r *fakeRun) ID() string { return r.id }

func (r *fakeRun) Hold(_ context.Context, declare bool) (uint64, chain.Hash, error, error) {
	if r.refuse != nil {
		return 0, chain.Hash{}, r.refuse, nil
	}
	if r.held {
		r.c.t.Fatalf("run %q held twice", r.id)
	}
	r.held = true
	return r.last, chain.Hash{byte(r.last)}, nil, nil
}

func (r *fakeRun) Release() {
	if !r.held {
		r.c.t.Fatalf("run %q released and not held", r.id)
	}
	r.held = false
}

func (r *fakeRun) Last() (uint64, bool) { return r.last, r.ended }

var errLookup = errors.New("the table of runs is unreadable")

func (c *fakeCore) Open() error { return nil }

func (c *fakeCore) Run(id string) (Run, bool, error) {
	if c.runErr != nil {
		return nil, false, c.runErr
	}
	if r := c.runs[id]; r != nil {
		return r, false, nil
	}
	if c.deleted[id] {
		return nil, true, nil
	}
	return nil, false, nil
}

func (c *fakeCore) Append(_ context.Context, raws [][]byte) ([]wal.Pos, func(), error) {
	if err := c.failNext; err != nil {
		c.failNext = nil
		return nil, nil, err
	}
	poss := make([]wal.Pos, len(raws))
	for i := range raws {
		c.next += 100
		poss[i] = wal.Pos{Segment: 1, Offset: c.next}
	}
	c.batches = append(c.batches, len(raws))
	c.pending++
	return poss, func() { c.pending-- }, nil
}

func (c *fakeCore) Link(run string, seq uint64, head chain.Hash, payload []byte) chain.Hash {
	return chain.Hash{byte(len(run)), byte(seq), head[0], byte(len(payload))}
}

func (c *fakeCore) Source() LogSource { return LogSource{} }

func (c *fakeCore) Recorded(k record.Kind, run string, seq uint64) {
	c.recorded = append(c.recorded, fmt.Sprintf("%s %s/%d", k, run, seq))
}

func (c *fakeCore) Checking() bool  { return false }
func (c *fakeCore) CheckLog() error { return nil }

var testErrs = Errors{Closed: errors.New("closed"), Invalid: errors.New("invalid"), TooLarge: errors.New("too large"),
	WaitExists: errors.New("wait exists"), NoWait: errors.New("no wait"), NotEnded: errors.New("not ended"), Mismatch: errors.New("mismatch"),
	NoRun: errors.New("no such run"), Deleted: errors.New("run deleted")}

// newWaits returns Waits over a fakeCore of runs ids, loaded from an
// empty log, and the clock it reads (set *now).
func newWaits(t *testing.T, ids ...string) (*Waits, *fakeCore, *int64) {
	c := &fakeCore{t: t, runs: map[string]*fakeRun{}}
	for _, id := range ids {
		c.runs[id] = &fakeRun{c: c, id: id}
	}
	now := new(int64)
	*now = 1000
	w := new(Waits).Bind(c, func() time.Time { return time.Unix(0, *now) }, &testErrs)
	w.load.Do(func() {
		w.err = w.idx.Load(listSource(nil))
		w.ready.Store(w.idx)
	})
	return w, c, now
}

// TestWaitsConduct: a wait declared, repeated, refused for another name;
// an event delivered, repeated, mismatched; the ready list; the outcome;
// each record appended once, applied, observed and done.
func TestWaitsConduct(t *testing.T) {
	ctx := context.Background()
	w, c, _ := newWaits(t, "a")
	a := c.runs["a"]
	got, err := w.Declare(ctx, a, "approve", time.Time{})
	if err != nil || got.Run != "a" || got.Name != "approve" || got.Outcome != Open {
		t.Fatalf("Declare: %+v, %v", got, err)
	}
	if again, err := w.Declare(ctx, a, "approve", time.Time{}); err != nil || again != got {
		t.Fatalf("Declare again: %+v, %v; want %+v", again, err, got)
	}
	if _, err := w.Declare(ctx, a, "other", time.Time{}); !errors.Is(err, testErrs.WaitExists) {
		t.Fatalf("Declare of another name: %v", err)
	}
	if _, err := w.Declare(ctx, a, string(make([]byte, record.MaxWaitName+1)), time.Time{}); !errors.Is(err, testErrs.Invalid) {
		t.Fatalf("Declare of a long name: %v", err)
	}
	if _, err := w.Outcome(ctx, "a", 0); !errors.Is(err, testErrs.NotEnded) {
		t.Fatalf("Outcome of an open wait: %v", err)
	}
	dup, delivered, err := w.Send(ctx, "a", "approve", "s1", []byte("yes"))
	if err != nil || dup || !delivered {
		t.Fatalf("Send: dup %v delivered %v, %v", dup, delivered, err)
	}
	if dup, delivered, err := w.Send(ctx, "a", "approve", "s1", []byte("yes")); err != nil || !dup || delivered {
		t.Fatalf("Send again: dup %v delivered %v, %v", dup, delivered, err)
	}
	if _, _, err := w.Send(ctx, "a", "approve", "s1", []byte("no")); !errors.Is(err, testErrs.Mismatch) {
		t.Fatalf("Send of another payload: %v", err)
	}
	if _, _, err := w.Send(ctx, "a", "approve", "s2", make([]byte, MaxEventSize+1)); !errors.Is(err, testErrs.TooLarge) {
		t.Fatalf("Send of a large payload: %v", err)
	}
	if _, _, err := w.Send(ctx, "b", "approve", "s2", nil); !errors.Is(err, testErrs.NoRun) {
		t.Fatalf("Send to no run: %v", err)
	}
	c.deleted = map[string]bool{"b": true}
	if _, _, err := w.Send(ctx, "b", "approve", "s2", nil); !errors.Is(err, testErrs.Deleted) || errors.Is(err, testErrs.NoRun) {
		t.Fatalf("Send to a deleted run: %v", err)
	}
	c.runErr = errLookup
	if _, _, err := w.Send(ctx, "b", "approve", "s2", nil); !errors.Is(err, errLookup) {
		t.Fatalf("Send with the table of runs unreadable: %v", err)
	}
	c.deleted, c.runErr = nil, nil
	out, err := w.Outcome(ctx, "a", 0)
	if err != nil || out.Outcome != Delivered || out.Event == nil || string(out.Event.Payload) != "yes" {
		t.Fatalf("Outcome: %+v, %v", out, err)
	}
	ready, err := w.Ready(ctx, 0)
	if err != nil || len(ready) != 1 || ready[0].Run != "a" || ready[0].Outcome != Delivered {
		t.Fatalf("Ready: %+v, %v", ready, err)
	}
	if fmt.Sprint(c.batches) != "[1 1]" || c.pending != 0 || a.held {
		t.Fatalf("batches %v, %d not done, held %v", c.batches, c.pending, a.held)
	}
	if want := "[wait a/0 event a/0]"; fmt.Sprint(c.recorded) != want {
		t.Fatalf("recorded %v, want %s", c.recorded, want)
	}
	// An atom took it: Ready drops it (stale), and there is no wait.
	a.last = 1
	if ready, err := w.Ready(ctx, 0); err != nil || len(ready) != 0 {
		t.Fatalf("Ready after an atom: %+v, %v", ready, err)
	}
	if _, err := w.Cancel(ctx, a); !errors.Is(err, testErrs.NoWait) {
		t.Fatalf("Cancel of no wait: %v", err)
	}
}

// TestSendFailed: an event whose record the log refused reports neither
// delivered nor duplicate, and leaves the wait open for the same event
// sent again.
func TestSendFailed(t *testing.T) {
	ctx := context.Background()
	w, c, _ := newWaits(t, "a")
	if _, err := w.Declare(ctx, c.runs["a"], "approve", time.Time{}); err != nil {
		t.Fatal(err)
	}
	c.failNext = errors.New("disk full")
	dup, delivered, err := w.Send(ctx, "a", "approve", "s1", []byte("yes"))
	if err == nil || dup || delivered {
		t.Fatalf("Send with a failing log: dup %v delivered %v, %v", dup, delivered, err)
	}
	if dup, delivered, err := w.Send(ctx, "a", "approve", "s1", []byte("yes")); err != nil || dup || !delivered {
		t.Fatalf("Send again: dup %v delivered %v, %v", dup, delivered, err)
	}
}

// TestWaitsFireDue: the due timeouts recorded in one batch, a refused
// run's and a gone run's waits dropped, a wait an atom took left alone;
// a failed append releases every run and records nothing.
func TestWaitsFireDue(t *testing.T) {
	ctx := context.Background()
	w, c, now := newWaits(t, "a", "b", "c", "d", "e")
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		if _, err := w.Declare(ctx, c.runs[id], "", time.Unix(0, 2000)); err != nil {
			t.Fatal(err)
		}
	}
	c.batches = nil
	*now = 3000
	c.failNext = errors.New("disk full")
	if _, err := w.Ready(ctx, 0); err == nil || err.Error() != "engine: record 5 timeouts: disk full" {
		t.Fatalf("Ready with a failing log: %v", err)
	}
	for id, r := range c.runs {
		if r.held {
			t.Fatalf("run %q still held after a failed append", id)
		}
	}
	if s := w.idx.Stats(); s.Open != 5 || s.Ready != 0 {
		t.Fatalf("after a failed append: %+v", s)
	}
	c.runs["b"].refuse = errors.New("ended")
	delete(c.runs, "c")
	c.runs["d"].last = 1 // an atom went on after the wait
	ready, err := w.Ready(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range ready {
		got = append(got, fmt.Sprintf("%s %v", r.Run, r.Outcome))
	}
	if want := "[a timed out e timed out]"; fmt.Sprint(got) != want {
		t.Fatalf("Ready %v, want %s", got, want)
	}
	if fmt.Sprint(c.batches) != "[2]" || c.pending != 0 {
		t.Fatalf("batches %v, %d not done", c.batches, c.pending)
	}
	if s := w.idx.Stats(); s.Open != 0 {
		t.Fatalf("open waits left: %+v", s)
	}
	for id, r := range c.runs {
		if r.held {
			t.Fatalf("run %q still held", id)
		}
	}
}
