package wait

// Waits: the conduct of the index for the engine's API (engine/waits.go):
// the load on first use, the records of waits written under their run's
// write mark, the list of ready runs, the wake-ups of ReadyChanged (the
// check of WAITS against the log is check.go's).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Errors are the engine's sentinels the errors of Waits wrap.
type Errors struct {
	Closed     error // Ended: the store closed while it blocked
	Invalid    error // a bad name, sender id or deadline
	TooLarge   error // Send: a payload over MaxEventSize
	WaitExists error // Declare: the run waits for another event
	NoWait     error // no wait after the run's last atom
	NotEnded   error // Outcome: the wait is still open
	Mismatch   error // Send: the sender id sent the run another event
	RunEnded   error // Run.Hold: the run ended or is ending
	InProgress error // Run.Hold (declare): an atom or a branch of the run runs
	NoRun      error // Send: the store has no such run
	Deleted    error // Send: the run was deleted
}

// MaxEventSize bounds an event's payload, in bytes (engine.MaxEventSize).
const MaxEventSize = 1 << 20

// Waits is the store's index of waits and its conduct. The zero value is
// bound to its Core by Bind before any other use (the engine binds it as
// Open makes the DB); Loaded, Taken, Close and ReadyChanged, which touch
// only a loaded index, would need no Bind. Lock
// order: a run's write mark, then mu, then the index's mutex.
type Waits struct {
	made  sync.Once
	core  Core
	errs  *Errors
	idx   *Index // made by Bind, loaded by Load
	load  sync.Once
	err   error                 // the load's, sticky
	ready atomic.Pointer[Index] // idx once loaded: nil before
	mu    struct {
		sync.Mutex
		changed chan struct{} // closed when a wait ends or the earliest deadline comes
		timer   *time.Timer
		timerAt int64 // the deadline the timer is armed for
	}
}

// Bind binds w to core, its index to clock (New) and its errors to errs
// on its first call; later calls change nothing. It returns w.
func (w *Waits) Bind(core Core, clock func() time.Time, errs *Errors) *Waits {
	w.made.Do(func() { w.core, w.errs, w.idx = core, errs, New(clock) })
	return w
}

// Index returns the index, loaded or not.
func (w *Waits) Index() *Index { return w.idx }

// Loaded returns the index once it is loaded, else nil.
func (w *Waits) Loaded() *Index { return w.ready.Load() }

// Load loads the index once (Index.Load, over the Core's Source), even
// while the store closes (the final checkpoint captures it). Its error is
// sticky.
func (w *Waits) Load() error {
	w.load.Do(func() {
		w.err = w.idx.Load(w.core.Source())
		w.ready.Store(w.idx)
	})
	return w.err
}

// Use makes the index usable: the store open, ctx live, the index loaded
// and sound (the load's error, or a rebuild's after damage met late).
func (w *Waits) Use(ctx context.Context) error {
	if err := w.core.Open(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := w.Load(); err != nil {
		return err
	}
	return w.idx.Err()
}

// run returns run id as the Core holds it, or why it takes nothing: the
// store has no such run (Errors.NoRun), or it was deleted (Errors.Deleted).
func (w *Waits) run(id string) (Run, error) {
	r, deleted, err := w.core.Run(id)
	switch {
	case err != nil:
		return nil, err
	case deleted:
		return nil, fmt.Errorf("%w: run %q", w.errs.Deleted, id)
	case r == nil:
		return nil, fmt.Errorf("%w: run %q", w.errs.NoRun, id)
	}
	return r, nil
}

// Close lets go of the index's table (WAITS, mapped), if it was loaded.
func (w *Waits) Close() {
	if x := w.Loaded(); x != nil {
		x.Close()
	}
}

// Gone: nothing of run waits any more, its end or deletion (k) durable.
// Before the load only a deletion is noted (an erased run's kept events
// must not reach WAITS); an end is left to the next capture, which drops
// a run its row says ended, so that ends do not pile up in memory in a
// store whose waits are never used.
func (w *Waits) Gone(k record.Kind, run string) {
	if k == record.KindEnd && w.Loaded() == nil {
		return
	}
	w.idx.Gone(run)
}

// Taken: an atom at seq of run committed, so the wait before it is taken.
func (w *Waits) Taken(run string, seq uint64) {
	if x := w.Loaded(); x != nil {
		x.Taken(run, seq)
	}
}

// WriteFile loads the index if it is not, and writes it as WAITS
// (Index.WriteFile, at the Source's path, sealed with its Sealer).
func (w *Waits) WriteFile(gen uint64, replay wal.Pos, row Row, noSync, install bool) error {
	if err := w.Load(); err != nil {
		return fmt.Errorf("engine: checkpoint: waits: %w", err)
	}
	src := w.core.Source()
	return w.idx.WriteFile(src.FS, src.Waits, src.Sealer, gen, replay, row, noSync, install)
}

// Current returns r's wait after its last atom, if it has one and r has
// not ended.
func (w *Waits) Current(ctx context.Context, r Run) (Wait, bool, error) {
	if err := w.Use(ctx); err != nil {
		return Wait{}, false, err
	}
	cur, ok := w.current(r)
	return cur, ok, nil
}

func (w *Waits) current(r Run) (Wait, bool) {
	last, ended := r.Last()
	if ended {
		w.idx.Gone(r.ID())
		return Wait{}, false
	}
	return w.idx.Current(r.ID(), last)
}

// write writes the records build returns for r, durably, under the run's
// write mark (so that they and the run's atoms and end are in the log,
// and applied to the index, in one order), and applies them. declare:
// the run must have no atom or branch running. build gets the run's last
// seq and head and the index's clock reading.
func (w *Waits) write(ctx context.Context, r Run, declare bool, build func(seq uint64, head chain.Hash, now int64) ([]Rec, error)) error {
	x := w.Loaded()
	seq, head, refused, err := r.Hold(ctx, declare)
	if err != nil {
		return err
	}
	if refused != nil {
		return refused
	}
	defer r.Release()
	recs, err := build(seq, head, x.Now())
	if err != nil || len(recs) == 0 {
		return err
	}
	raws := make([][]byte, len(recs))
	for i, rec := range recs {
		raws[i] = rec.Rec.Raw
	}
	// Kept below the checkpoint's replay position until the index
	// reflects them: a checkpoint's WAITS holds every record below it.
	poss, done, err := w.core.Append(ctx, raws)
	if err != nil {
		return fmt.Errorf("engine: run %q: write a %s record: %w", r.ID(), recs[0].Rec.Kind, err)
	}
	defer done()
	for i, rec := range recs {
		rec.Rec.Pos = poss[i]
		x.Apply(rec.Rec, rec.Plain)
		w.core.Recorded(rec.Rec.Kind, r.ID(), seq)
	}
	w.changed()
	return nil
}

// Declare is Run.Wait and Run.Sleep: r waits after its last atom for an
// event named name until deadline (zero: none). It returns the run's
// wait, the one declared before if it has that name.
func (w *Waits) Declare(ctx context.Context, r Run, name string, deadline time.Time) (Wait, error) {
	if err := w.Trusted(); err != nil {
		return Wait{}, err
	}
	f, err := DeclareFields(name, deadline)
	if err != nil {
		return Wait{}, fmt.Errorf("%w: run %q: %v", w.errs.Invalid, r.ID(), err)
	}
	if err := w.Use(ctx); err != nil {
		return Wait{}, err
	}
	var out Wait
	err = w.write(ctx, r, true, func(seq uint64, head chain.Hash, now int64) ([]Rec, error) {
		cur, recs, err := w.idx.DeclareRecords(w.core.Link, r.ID(), seq, head, now, f)
		if errors.Is(err, ErrOtherWait) {
			return nil, fmt.Errorf("%w: run %q waits after seq %d for %q, not %q", w.errs.WaitExists, r.ID(), seq, cur.Name, name)
		}
		out = cur
		return Recs(recs, nil), err
	})
	return w.written(r, out, err)
}

// written is what Declare and wake return: the run's wait once written.
func (w *Waits) written(r Run, out Wait, err error) (Wait, error) {
	if err != nil {
		return Wait{}, err
	}
	if out.Run == "" {
		last, _ := r.Last()
		out, _ = w.idx.Current(r.ID(), last)
	}
	return out, nil
}

// Cancel is Run.CancelWait: r's open wait ends as Cancelled; a wait that
// ended already is returned as it is.
func (w *Waits) Cancel(ctx context.Context, r Run) (Wait, error) {
	if err := w.Trusted(); err != nil {
		return Wait{}, err
	}
	return w.wake(ctx, r, record.WakeCancel, false)
}

// wake ends r's open wait after its last atom, as a timeout (reason
// WakeTimeout: only once its deadline passed by the index's clock) or a
// cancel, and returns the wait. ifDue: a wait not due, or none, is no
// error (the timeout's caller raced another's).
func (w *Waits) wake(ctx context.Context, r Run, reason uint8, ifDue bool) (Wait, error) {
	if err := w.Use(ctx); err != nil {
		return Wait{}, err
	}
	var out Wait
	err := w.write(ctx, r, false, func(seq uint64, head chain.Hash, now int64) ([]Rec, error) {
		cur, recs, err := w.idx.WakeRecords(w.core.Link, r.ID(), seq, head, now, reason, ifDue)
		if errors.Is(err, ErrNoWait) {
			return nil, fmt.Errorf("%w: run %q", w.errs.NoWait, r.ID())
		}
		out = cur
		return Recs(recs, nil), err
	})
	return w.written(r, out, err)
}

// Ended is Run.WaitEnded: it blocks until r's wait after its last atom
// has ended (ending a timed-out one itself), ctx ends, or stop is closed
// (Errors.Closed).
func (w *Waits) Ended(ctx context.Context, r Run, stop <-chan struct{}) (Wait, error) {
	if err := w.Trusted(); err != nil {
		return Wait{}, err
	}
	for {
		if err := w.Use(ctx); err != nil {
			return Wait{}, err
		}
		changed := w.ReadyChanged()
		cur, ok := w.current(r)
		switch {
		case !ok:
			return Wait{}, fmt.Errorf("%w: run %q", w.errs.NoWait, r.ID())
		case cur.Outcome != Open:
			return cur, nil
		case cur.Deadline != 0 && cur.Deadline <= w.idx.Now():
			if _, err := w.wake(ctx, r, record.WakeTimeout, true); err != nil {
				return Wait{}, err
			}
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Wait{}, ctx.Err()
		case <-stop:
			return Wait{}, w.errs.Closed
		}
	}
}

// Outcome is Atom.WaitOutcome: the wait of run after seq once it ended
// (Errors.NotEnded, with the wait, while it is open; Errors.NoWait).
func (w *Waits) Outcome(ctx context.Context, run string, seq uint64) (Wait, error) {
	if err := w.Use(ctx); err != nil {
		return Wait{}, err
	}
	if err := w.Trusted(); err != nil {
		return Wait{}, err
	}
	cur, ok := w.idx.Current(run, seq)
	switch {
	case !ok || cur.Seq != seq:
		return Wait{}, fmt.Errorf("%w: run %q seq %d", w.errs.NoWait, run, seq)
	case cur.Outcome == Open:
		return cur, fmt.Errorf("%w: run %q: the wait for %q after seq %d", w.errs.NotEnded, run, cur.Name, cur.Seq)
	}
	return cur, nil
}

// Send is DB.SendEvent: an event named name from sender, with payload
// (copied; sealed under the run's key when the Source has a Sealer), to
// run. duplicate: the sender sent it before and nothing was written;
// delivered: it ended the run's open wait of its name. Both are false
// with an error.
func (w *Waits) Send(ctx context.Context, run, name, sender string, payload []byte) (duplicate, delivered bool, err error) {
	if err := w.core.Open(); err != nil {
		return false, false, err
	}
	f := &record.WaitFields{Name: name, Sender: sender, Payload: payload}
	if len(payload) > MaxEventSize {
		return false, false, fmt.Errorf("%w: run %q: an event payload of %d bytes, the limit is %d (engine.MaxEventSize)", w.errs.TooLarge, run, len(payload), MaxEventSize)
	}
	if err := record.CheckWaitFields(record.KindEvent, f); err != nil {
		return false, false, fmt.Errorf("%w: run %q: event: %v", w.errs.Invalid, run, err)
	}
	if err := record.CheckRunID(run); err != nil {
		return false, false, err
	}
	if err := w.Use(ctx); err != nil {
		return false, false, err
	}
	if err := w.Trusted(); err != nil {
		return false, false, err
	}
	r, err := w.run(run)
	if err != nil {
		return false, false, err
	}
	digest := Digest(name, payload)
	plain := append([]byte(nil), payload...)
	sealer := w.core.Source().Sealer
	err = w.write(ctx, r, false, func(seq uint64, head chain.Hash, now int64) ([]Rec, error) {
		recs, dup, dlv, err := w.idx.EventRecords(w.core.Link, run, seq, head, now, *f, digest, func(seq uint64) ([]byte, error) {
			if sealer == nil {
				return plain, nil
			}
			sealed, err := sealer.Seal(nil, plain, record.KindEvent, run, seq)
			if err != nil {
				return nil, fmt.Errorf("engine: event to run %q: %w", run, err)
			}
			return sealed, nil
		})
		if errors.Is(err, ErrMismatch) {
			return nil, fmt.Errorf("%w: run %q, sender %q", w.errs.Mismatch, run, sender)
		}
		duplicate, delivered = dup, dlv
		return Recs(recs, plain), err
	})
	if err != nil {
		// Not delivered: the event's record is not in the log.
		return false, false, err
	}
	return duplicate, delivered, nil
}

// Ready is DB.Ready: up to max waits (max <= 0: all) that ended and that
// no atom of their run took yet, one per run, in the order they ended,
// after every due timeout is recorded.
func (w *Waits) Ready(ctx context.Context, max int) ([]Wait, error) {
	if max <= 0 {
		max = int(^uint(0) >> 1)
	}
	if err := w.Use(ctx); err != nil {
		return nil, err
	}
	if x := w.idx; w.unchecked() {
		// Timeouts to record, and runs to list, on the log's word: the
		// due ones checked one by one against the log (dueInLog); runs
		// WAITS lists ready, or too many due, wait for the check of WAITS.
		// A Ready with nothing due nor ready waits for nothing.
		due := x.Due(x.Now(), maxDueInLog)
		if len(x.Ready(1)) > 0 || len(due) == maxDueInLog || !w.dueInLog(due) {
			if err := w.Trusted(); err != nil {
				return nil, err
			}
		}
	}
	if err := w.fireDue(ctx); err != nil {
		return nil, err
	}
	var out []Wait
	seen := map[string]bool{}
	for len(out) < max {
		// Stale waits (an atom took them, or their run ended) leave the
		// index as they are met; the next round reads past them.
		ws := w.idx.Ready(len(out) + min(max-len(out), 1<<16) + 16)
		stale := 0
		for i := range ws {
			rw := &ws[i]
			if len(out) == max {
				break
			}
			if seen[rw.Run] {
				continue
			}
			if w.stale(rw) {
				stale++
				continue
			}
			seen[rw.Run] = true
			out = append(out, *rw)
		}
		if stale == 0 {
			break
		}
	}
	return out, nil
}

// stale reports whether rw is no wait to act on any more: its run moved
// on (an atom took it) or ended, or is gone; the index then forgets it.
func (w *Waits) stale(rw *Wait) bool {
	r, err := w.run(rw.Run)
	if err != nil {
		return w.idx.Stale(rw, 0, false, true)
	}
	last, ended := r.Last()
	return w.idx.Stale(rw, last, ended, false)
}

// ReadyChanged is DB.ReadyChanged: a channel closed when a wait ends, or
// when the earliest deadline of an open wait comes by the wall clock.
func (w *Waits) ReadyChanged() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.changed == nil {
		w.mu.changed = make(chan struct{})
	}
	w.armLocked()
	return w.mu.changed
}

// changed wakes the callers blocked on ReadyChanged.
func (w *Waits) changed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.changed != nil {
		close(w.mu.changed)
		w.mu.changed = nil
	}
}

// armLocked arms the wall-clock timer for the earliest deadline of an
// open wait (w.mu held).
func (w *Waits) armLocked() {
	x := w.Loaded()
	if x == nil {
		return
	}
	at, ok := x.NextDeadline()
	if !ok || (w.mu.timer != nil && w.mu.timerAt == at) {
		return
	}
	if w.mu.timer != nil {
		w.mu.timer.Stop()
	}
	d := time.Duration(at - x.Now())
	w.mu.timerAt = at
	w.mu.timer = time.AfterFunc(max(d, 0), func() {
		w.mu.Lock()
		if w.mu.timerAt == at {
			w.mu.timer, w.mu.timerAt = nil, 0
		}
		w.mu.Unlock()
		w.changed()
	})
}

// NextDeadline returns the earliest deadline of an open wait.
func (w *Waits) NextDeadline(ctx context.Context) (int64, bool, error) {
	if err := w.Use(ctx); err != nil {
		return 0, false, err
	}
	at, ok := w.idx.NextDeadline()
	return at, ok, nil
}

// Stats returns the index's counts.
func (w *Waits) Stats(ctx context.Context) (Stats, error) {
	if err := w.Use(ctx); err != nil {
		return Stats{}, err
	}
	return w.idx.Stats(), nil
}
