package engine

// Waits and timers: the API (engine/doc.go, "Waits and timers";
// docs/DESIGN.md, "Waits and timers"): each a few lines over
// internal/wait's Waits, which holds the index and conducts it
// (waitcore.go adapts the DB to it).

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// Wait declares, durably when it returns, that the run waits after its
// last atom for an event named name (SendEvent) until deadline (zero:
// none); it ends once, by an event or its deadline, and the next atom
// reads how (Atom.WaitOutcome). A second Wait with the same name returns
// the run's wait (docs/DESIGN.md, "Waits, events and timers"). Errors:
// ErrWaitExists (another name), ErrAtomInProgress (an atom or a branch
// is running).
func (r *Run) Wait(ctx context.Context, name string, deadline time.Time) (Wait, error) {
	return exported(r.db.waits.Declare(ctx, waitRun{r}, name, deadline))
}

// Sleep is a wait for the clock only, until t: a timer. It ends, as
// WaitTimedOut, once the store's clock (Options.Clock) reads t or later.
func (r *Run) Sleep(ctx context.Context, until time.Time) (Wait, error) {
	if until.IsZero() {
		return Wait{}, fmt.Errorf("%w: run %q: a sleep needs a time", ErrInvalidOptions, r.id)
	}
	return exported(r.db.waits.Declare(ctx, waitRun{r}, "", until))
}

// CurrentWait returns the run's wait after its last atom, if it has one
// (a run that ended has none).
func (r *Run) CurrentWait(ctx context.Context) (Wait, bool, error) {
	w, ok, err := r.db.waits.Current(ctx, waitRun{r})
	if !ok || err != nil {
		return Wait{}, false, err
	}
	return exportWait(&w), true, nil
}

// CancelWait ends the run's open wait as WaitCancelled (a wake record):
// the run then goes on without it. A wait that ended already is returned
// as it is.
func (r *Run) CancelWait(ctx context.Context) (Wait, error) {
	return exported(r.db.waits.Cancel(ctx, waitRun{r}))
}

// WaitEnded blocks until the run's wait after its last atom has ended (it
// ends a timed-out wait itself, as Ready does), or ctx ends, and returns
// it. It is for a caller that holds a goroutine per run anyway; a host of
// many runs uses Ready and ReadyChanged.
func (r *Run) WaitEnded(ctx context.Context) (Wait, error) {
	return exported(r.db.waits.Ended(ctx, waitRun{r}, r.db.bg.stop))
}

// WaitOutcome returns the wait the atom follows (the run's wait after
// seq a.Seq()-1) once it has ended; the atom's commit takes it, and until
// then every attempt gets the same outcome. Errors: ErrWaitNotEnded (still
// open), ErrNoWait.
func (a *Atom) WaitOutcome(ctx context.Context) (Wait, error) {
	return exported(a.run.db.waits.Outcome(ctx, a.run.id, a.seq-1))
}

// SendEvent sends an event named name, with payload (copied), to run,
// durably when it returns: it ends the run's open wait of that name or is
// kept for its next one (docs/DESIGN.md, "Waits, events and timers").
// sender is the event's id within the run: a repeat writes nothing and
// says Duplicate. Errors: ErrEventMismatch (the sender id sent another
// event), ErrRunEnded, ErrRunDeleted, ErrNoRun, ErrTooLarge (payload over
// MaxEventSize), ErrInvalidOptions (a bad name or sender id); with an
// error the SendResult is zero.
func (db *DB) SendEvent(ctx context.Context, run, name, sender string, payload []byte) (SendResult, error) {
	dup, delivered, err := db.waits.Send(ctx, run, name, sender, payload)
	return SendResult{Duplicate: dup, Delivered: delivered}, err
}

// Ready returns up to max waits (max <= 0: all) that ended and that no
// atom of their run took yet, in the order they ended: the runs to
// resume, each listed until an atom of it commits. It first records every
// due timeout (docs/DESIGN.md, "Waits, events and timers").
func (db *DB) Ready(ctx context.Context, max int) ([]Wait, error) {
	ws, err := db.waits.Ready(ctx, max)
	if err != nil {
		return nil, err
	}
	var out []Wait
	for i := range ws {
		out = append(out, exportWait(&ws[i]))
	}
	return out, nil
}

// ReadyChanged returns a channel closed when Ready may list more: a wait
// ended, or the earliest deadline of an open wait came (by the wall
// clock's timer: with Options.Clock injected, the caller drives Ready).
// Take the channel before calling Ready, then block on it.
func (db *DB) ReadyChanged() <-chan struct{} { return db.waits.ReadyChanged() }

// NextDeadline returns the earliest deadline of an open wait.
func (db *DB) NextDeadline(ctx context.Context) (time.Time, bool, error) {
	at, ok, err := db.waits.NextDeadline(ctx)
	if !ok || err != nil {
		return time.Time{}, false, err
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
	s, err := db.waits.Stats(ctx)
	if err != nil {
		return WaitStats{}, err
	}
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
