package engine

// Waits and timers: the API (engine/doc.go, "Waits and timers";
// docs/DESIGN.md, "Waits and timers"), over package internal/wait, which
// holds the index; this file is also the index's Source over the DB.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/internal/wait"
	"github.com/continuumdb/continuum/record"
)

// WaitOutcome says how a run's wait stands.
type WaitOutcome = wait.Outcome

// The outcomes of a wait.
const (
	// WaitOpen: the wait has not ended.
	WaitOpen = wait.Open
	// WaitDelivered: an event of the wait's name ended it (Wait.Event).
	WaitDelivered = wait.Delivered
	// WaitTimedOut: its deadline passed before an event came.
	WaitTimedOut = wait.TimedOut
	// WaitCancelled: the run cancelled it (Run.CancelWait).
	WaitCancelled = wait.Cancelled
)

// Wait is a run's wait, as the log holds it. A wait follows an atom: it
// is named by its run and Seq, the run's last seq when it was declared
// (0: before the run's first atom), and a run declares at most one wait
// after each atom.
type Wait struct {
	Run      string
	Seq      uint64
	Name     string    // the event it waits for; "" for a timer (Run.Sleep)
	Declared time.Time // the clock reading recorded when it was declared
	Deadline time.Time // zero: none
	Outcome  WaitOutcome
	// Event is the event that ended it (WaitDelivered), nil otherwise.
	Event *Event
	// Ended is the recorded reading of its end: the event's Sent (or the
	// wait's Declared, when it took an event sent before it), or the clock
	// reading the timeout or cancel recorded (at least Deadline, for a
	// timeout). Zero while open.
	Ended time.Time
}

// Event is an event sent to a run (DB.SendEvent). Payload is the caller's
// to keep.
type Event struct {
	Run    string
	Name   string
	Sender string    // the sender's id: a run takes one event per sender id
	Seq    uint64    // the run's last seq when it was sent
	Sent   time.Time // the clock reading recorded with it
	// Payload is the event's payload (opened, in an encrypted store).
	Payload []byte
}

// SendResult is what SendEvent did.
type SendResult struct {
	// Duplicate: the run has this sender's event already, with the same
	// name and payload; nothing was written.
	Duplicate bool
	// Delivered: the event ended the run's open wait of its name. False:
	// it is kept for the next wait of its name the run declares (or it
	// was a Duplicate).
	Delivered bool
}

var (
	// ErrEventMismatch is returned by SendEvent for a sender id the run has
	// an event of already, with another name or payload.
	ErrEventMismatch = errors.New("engine: the sender id has sent the run another event")
	// ErrWaitExists is returned by Run.Wait when the run waits after its
	// last atom already, for another event.
	ErrWaitExists = errors.New("engine: the run has a wait after its last atom already")
	// ErrNoWait is returned when the run has no wait after its last atom
	// (Run.CancelWait, Run.WaitEnded, Atom.WaitOutcome).
	ErrNoWait = errors.New("engine: the run has no wait after its last atom")
	// ErrWaitNotEnded is returned by Atom.WaitOutcome for a wait still open.
	ErrWaitNotEnded = errors.New("engine: the run's wait has not ended")
)

const (
	// MaxWaitName bounds the name of a wait or an event, in bytes.
	MaxWaitName = record.MaxWaitName
	// MaxSenderID bounds an event's sender id, in bytes.
	MaxSenderID = record.MaxSenderID
	// MaxEventSize bounds an event's payload, in bytes.
	MaxEventSize = 1 << 20
)

// Wait declares that the run waits for an event named name (SendEvent),
// until deadline (zero: no deadline). The wait follows the run's last
// atom: it is durable, as a wait record of the log, when Wait returns,
// and it ends once, by the first event of its name sent to the run after
// the run's previous wait of that name ended (an event sent before this
// wait, and that no wait took, ends it at once), or by its deadline
// passing first, which a wake record of the log then says, once. No
// atom may be running, nor a branch (ErrAtomInProgress); a run waiting
// holds no goroutine, and, in memory, only its entry in the store's
// index of waits.
//
// The run learns the outcome in its next atom (Atom.WaitOutcome); that
// atom's commit takes it: until then, across restarts and crashes, the
// wait and its outcome are the run's, and DB.Ready lists the run. A commit
// while the wait is open withdraws it (an event of its name sent later is
// kept for a later wait).
//
// Wait is idempotent after the same atom: a second Wait with the same
// name returns the wait the run has (with its own deadline and outcome),
// so a host that restarts between an atom and its wait declares it again
// safely. Another name fails with ErrWaitExists.
func (r *Run) Wait(ctx context.Context, name string, deadline time.Time) (Wait, error) {
	if err := r.db.waitsTrusted(); err != nil {
		return Wait{}, err
	}
	return r.declareWait(ctx, name, deadline)
}

// Sleep is a wait for the clock only, until t: a timer. It ends, as
// WaitTimedOut, once the store's clock (Options.Clock) reads t or later.
func (r *Run) Sleep(ctx context.Context, until time.Time) (Wait, error) {
	if until.IsZero() {
		return Wait{}, fmt.Errorf("%w: run %q: a sleep needs a time", ErrInvalidOptions, r.id)
	}
	if err := r.db.waitsTrusted(); err != nil {
		return Wait{}, err
	}
	return r.declareWait(ctx, "", until)
}

// CurrentWait returns the run's wait after its last atom, if it has one
// (a run that ended has none).
func (r *Run) CurrentWait(ctx context.Context) (Wait, bool, error) {
	db := r.db
	if err := db.waitsReady(ctx); err != nil {
		return Wait{}, false, err
	}
	w, ok := r.currentWait()
	if !ok {
		return Wait{}, false, nil
	}
	return exportWait(&w), true, nil
}

// CancelWait ends the run's open wait as WaitCancelled (a wake record):
// the run then goes on without it. A wait that ended already is returned
// as it is.
func (r *Run) CancelWait(ctx context.Context) (Wait, error) {
	if err := r.db.waitsTrusted(); err != nil {
		return Wait{}, err
	}
	return r.wake(ctx, record.WakeCancel, false)
}

// WaitEnded blocks until the run's wait after its last atom has ended (it
// ends a timed-out wait itself, as Ready does), or ctx ends, and returns
// it. It is for a caller that holds a goroutine per run anyway; a host of
// many runs uses Ready and ReadyChanged.
func (r *Run) WaitEnded(ctx context.Context) (Wait, error) {
	db := r.db
	if err := db.waitsTrusted(); err != nil {
		return Wait{}, err
	}
	for {
		if err := db.waitsReady(ctx); err != nil {
			return Wait{}, err
		}
		changed := db.ReadyChanged()
		w, ok := r.currentWait()
		switch {
		case !ok:
			return Wait{}, fmt.Errorf("%w: run %q", ErrNoWait, r.id)
		case w.Outcome != WaitOpen:
			return exportWait(&w), nil
		case w.Deadline != 0 && w.Deadline <= db.waits.idx.Now():
			if _, err := r.wake(ctx, record.WakeTimeout, true); err != nil {
				return Wait{}, err
			}
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Wait{}, ctx.Err()
		case <-db.bg.stop:
			return Wait{}, ErrClosed
		}
	}
}

// WaitOutcome returns the wait the atom follows (the run's wait after
// seq a.Seq()-1) once it has ended: the atom acts on it, and its commit
// takes it. Before that commit, after a crash or a Fail, the next attempt
// gets the same wait and outcome: an event is delivered to one wait, and
// acted on by the one atom that commits after it. A wait still open
// returns ErrWaitNotEnded; none, ErrNoWait.
func (a *Atom) WaitOutcome(ctx context.Context) (Wait, error) {
	db := a.run.db
	if err := db.waitsReady(ctx); err != nil {
		return Wait{}, err
	}
	if err := db.waitsTrusted(); err != nil {
		return Wait{}, err
	}
	w, ok := db.waits.idx.Current(a.run.id, a.seq-1)
	switch {
	case !ok || w.Seq != a.seq-1:
		return Wait{}, fmt.Errorf("%w: run %q seq %d", ErrNoWait, a.run.id, a.seq-1)
	case w.Outcome == WaitOpen:
		return exportWait(&w), fmt.Errorf("%w: run %q: the wait for %q after seq %d", ErrWaitNotEnded, a.run.id, w.Name, w.Seq)
	}
	return exportWait(&w), nil
}

// SendEvent sends an event named name, with payload, to run: durably (an
// event record of the log, linked beside the run's chain) when it
// returns. It ends the run's open wait of that name, or is kept for the
// run's next wait of that name (events of one name are taken in the order
// sent). A wait whose deadline has passed takes no event: SendEvent then
// records its timeout first.
//
// sender is the sender's id for the event, unique per run: a second
// SendEvent of the same sender id to the same run writes nothing and says
// Duplicate (the same name and payload) or fails with ErrEventMismatch
// (another). A run that ended, or was deleted, takes no event
// (ErrRunEnded, ErrRunDeleted); one that does not exist fails with
// ErrNoRun. The payload is copied.
func (db *DB) SendEvent(ctx context.Context, run, name, sender string, payload []byte) (SendResult, error) {
	if err := db.checkOpen(); err != nil {
		return SendResult{}, err
	}
	w := &record.WaitFields{Name: name, Sender: sender, Payload: payload}
	if len(payload) > MaxEventSize {
		return SendResult{}, fmt.Errorf("%w: run %q: an event payload of %d bytes, the limit is %d (engine.MaxEventSize)", ErrTooLarge, run, len(payload), MaxEventSize)
	}
	if err := record.CheckWaitFields(record.KindEvent, w); err != nil {
		return SendResult{}, fmt.Errorf("%w: run %q: event: %v", ErrInvalidOptions, run, err)
	}
	if err := record.CheckRunID(run); err != nil {
		return SendResult{}, err
	}
	if err := db.waitsReady(ctx); err != nil {
		return SendResult{}, err
	}
	if err := db.waitsTrusted(); err != nil {
		return SendResult{}, err
	}
	r, err := db.waitRun(run)
	if err != nil {
		return SendResult{}, err
	}
	digest := wait.Digest(name, payload)
	var res SendResult
	plain := append([]byte(nil), payload...)
	err = r.writeWaits(ctx, nil, func(seq uint64, head chain.Hash, now int64) ([]waitRec, error) {
		recs, dup, delivered, err := db.waits.idx.EventRecords(db.hasher.Link, run, seq, head, now, *w, digest, func(seq uint64) ([]byte, error) {
			if db.sealer == nil {
				return plain, nil
			}
			sealed, err := db.sealer.Seal(nil, plain, record.KindEvent, run, seq)
			if err != nil {
				return nil, fmt.Errorf("engine: event to run %q: %w", run, err)
			}
			return sealed, nil
		})
		if errors.Is(err, wait.ErrMismatch) {
			return nil, fmt.Errorf("%w: run %q, sender %q", ErrEventMismatch, run, sender)
		}
		res.Duplicate, res.Delivered = dup, delivered
		return waitRecs(recs, plain), err
	})
	return res, err
}

// Ready returns up to max waits (max <= 0: all) that ended by an event or
// a timeout and that no atom of their run took yet, in the order they
// ended: the runs to resume. It first records the timeout of every wait
// whose deadline has passed (by the store's clock), earliest first. Its
// cost is that of the due and ready waits, not of the store's runs. A run
// stays listed until an atom of it commits: the host that resumes a run
// is the one that lists it, and one resumption at a time per run is its
// duty (Begin refuses a second running atom).
func (db *DB) Ready(ctx context.Context, max int) ([]Wait, error) {
	if max <= 0 {
		max = int(^uint(0) >> 1)
	}
	if err := db.waitsReady(ctx); err != nil {
		return nil, err
	}
	if x := db.waits.idx; db.waitsUnchecked() {
		// Timeouts to record, and runs to list, on the log's word: the
		// due ones checked one by one against the log (dueInLog); runs
		// WAITS lists ready, or too many due, wait for the check of WAITS.
		// A Ready with nothing due nor ready waits for nothing.
		due := x.Due(x.Now(), maxDueInLog)
		if len(x.Ready(1)) > 0 || len(due) == maxDueInLog || !db.dueInLog(due) {
			if err := db.waitsTrusted(); err != nil {
				return nil, err
			}
		}
	}
	if err := db.fireDue(ctx); err != nil {
		return nil, err
	}
	var out []Wait
	seen := map[string]bool{}
	for len(out) < max {
		// Stale waits (an atom took them, or their run ended) leave the
		// index as they are met; the next round reads past them.
		ws := db.waits.idx.Ready(len(out) + min(max-len(out), 1<<16) + 16)
		stale := 0
		for i := range ws {
			w := &ws[i]
			if len(out) == max {
				break
			}
			if seen[w.Run] {
				continue
			}
			if db.waitStale(w) {
				stale++
				continue
			}
			seen[w.Run] = true
			out = append(out, exportWait(w))
		}
		if stale == 0 {
			break
		}
	}
	return out, nil
}

// ReadyChanged returns a channel closed when Ready may list more: a wait
// ended, or the earliest deadline of an open wait came (by the wall
// clock's timer: with Options.Clock injected, the caller drives Ready).
// Take the channel before calling Ready, then block on it.
func (db *DB) ReadyChanged() <-chan struct{} {
	s := &db.waits
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.changed == nil {
		s.mu.changed = make(chan struct{})
	}
	db.armWaitTimerLocked()
	return s.mu.changed
}

// NextDeadline returns the earliest deadline of an open wait.
func (db *DB) NextDeadline(ctx context.Context) (time.Time, bool, error) {
	if err := db.waitsReady(ctx); err != nil {
		return time.Time{}, false, err
	}
	at, ok := db.waits.idx.NextDeadline()
	if !ok {
		return time.Time{}, false, nil
	}
	return time.Unix(0, at), true, nil
}

// WaitStats are the counts of the store's index of waits.
type WaitStats struct {
	Runs    int // runs the index holds something of
	Open    int // open waits
	Ready   int // ended waits no atom took (some may be taken already: Ready drops those)
	Pending int // events no wait took yet
}

// WaitStats returns the counts of the store's index of waits.
func (db *DB) WaitStats(ctx context.Context) (WaitStats, error) {
	if err := db.waitsReady(ctx); err != nil {
		return WaitStats{}, err
	}
	s := db.waits.idx.Stats()
	return WaitStats{Runs: s.Runs, Open: s.Open, Ready: s.Ready, Pending: s.Pending}, nil
}

// WaitObserver, if the Observer of Options implements it, is told of each
// wait, event and wake record once it is durable: kind is
// record.KindWait, KindEvent or KindWake, w the run's wait after the
// record (for an event kept for a later wait, the run's wait as it is,
// if any). Like Observer's methods it must return quickly and not call
// the DB.
type WaitObserver interface {
	WaitRecorded(kind record.Kind, run string, seq uint64, w Wait)
}

// waitState is the DB's state of waits (capabilityState.waits).
type waitState struct {
	made  sync.Once
	load  sync.Once
	idx   *wait.Index                // made on first need (index), loaded by waitsLoad
	err   error                      // the load's, sticky
	ready atomic.Pointer[wait.Index] // idx once loaded: nil before
	mu    struct {
		sync.Mutex
		changed chan struct{} // closed when a wait ends or the earliest deadline comes
		timer   *time.Timer
		timerAt int64 // the deadline the timer is armed for
	}
}
