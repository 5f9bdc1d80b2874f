package erasure

import (
	"context"
	"errors"
	"testing"

	"github.com/continuumdb/continuum/chain"
)

// table is a Runs over one Eraser: the run's target as set, what EraseRun
// asked of it, and the locks and tracking it held.
type table struct {
	e        *Eraser
	seq      uint64
	done     bool
	refuse   error
	locked   bool
	tracked  int
	restored bool
	recorded *Erased
	finished int
	unclean  bool
	events   []string
}

func (t *table) Ready(context.Context) error { return nil }
func (t *table) Lock()                       { t.locked = true }
func (t *table) Unlock()                     { t.locked = false }
func (t *table) Erased(string) bool          { return t.recorded != nil }
func (t *table) Track() func() {
	t.tracked++
	return func() { t.tracked--; t.events = append(t.events, "untrack") }
}

func (t *table) Target(string) (uint64, chain.Hash, bool, error) {
	if !t.locked || t.tracked != 1 {
		return 0, chain.Hash{}, false, errors.New("Target outside the lock or untracked")
	}
	return t.seq, chain.Hash{9}, t.done, t.refuse
}

func (t *table) Restore(string) { t.restored = true }
func (t *table) Recorded(_ string, er Erased) {
	t.recorded = &er
	t.events = append(t.events, "recorded")
}
func (t *table) Unclean(string, error) { t.unclean = true }

func (t *table) Finish(_ context.Context, run string) error {
	t.finished++
	t.events = append(t.events, "finish")
	return t.e.DropRun(run)
}

// TestEraseRun: the steps in their order (the record durable and
// recorded before the replay position is let go, then the engine's
// steps), a refusal that changes nothing, a failed record that puts the
// run back, and an erased run finished only while KEYS holds its key.
func TestEraseRun(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, true)
	e := newEraser(s, "m")
	runWith(t, s, e, "r", "m", []byte("v"))

	refused := errors.New("has forks")
	tb := &table{e: e, seq: 5, refuse: refused}
	if err := e.EraseRun(ctx, tb, "r", "why"); !errors.Is(err, refused) || len(s.recs) != 0 || tb.restored || !e.Live("r") {
		t.Fatalf("a refused erasure: %v, %d records, restored %v", err, len(s.recs), tb.restored)
	}

	s.failLog = errors.New("log failed")
	tb = &table{e: e, seq: 5}
	if err := e.EraseRun(ctx, tb, "r", "why"); !errors.Is(err, s.failLog) || !tb.restored || tb.recorded != nil || tb.finished != 0 || !e.Live("r") {
		t.Fatalf("a failed record: %v, restored %v, recorded %v, finished %d", err, tb.restored, tb.recorded, tb.finished)
	}
	s.failLog = nil

	tb = &table{e: e, seq: 5}
	if err := e.EraseRun(ctx, tb, "r", "why"); err != nil {
		t.Fatal(err)
	}
	if tb.recorded == nil || tb.recorded.Seq != 5 || len(s.recs) != 1 || e.Live("r") || tb.locked || tb.tracked != 0 {
		t.Fatalf("erased: recorded %+v, %d records, live %v, locked %v, tracked %d", tb.recorded, len(s.recs), e.Live("r"), tb.locked, tb.tracked)
	}
	if want := []string{"recorded", "untrack", "finish"}; len(tb.events) != 3 || tb.events[0] != want[0] || tb.events[1] != want[1] || tb.events[2] != want[2] {
		t.Fatalf("steps %v, want %v", tb.events, want)
	}

	// Erased already, KEYS without the key: nothing to do.
	tb = &table{e: e, done: true}
	if err := e.EraseRun(ctx, tb, "r", "why"); err != nil || tb.finished != 0 || len(s.recs) != 1 {
		t.Fatalf("erased again: %v, finished %d, %d records", err, tb.finished, len(s.recs))
	}
	// Erased already, but KEYS holds a key of the run again (older KEYS):
	// finished, no second record.
	runWith(t, s, e, "r", "m", []byte("v"))
	tb = &table{e: e, done: true}
	if err := e.EraseRun(ctx, tb, "r", "why"); err != nil || tb.finished != 1 || len(s.recs) != 1 || e.Live("r") {
		t.Fatalf("an erased run whose key is back: %v, finished %d, %d records, live %v", err, tb.finished, len(s.recs), e.Live("r"))
	}
}
