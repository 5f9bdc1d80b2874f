package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
)

// The observation hook: Options.Observer is told what the engine does as
// it does it, for metrics and traces. The engine links no metrics or
// tracing library; the nested module github.com/continuumdb/continuum/otel
// implements Observer on OpenTelemetry. A nil Observer costs a nil check
// per event.

// Observer receives the engine's events. A DB calls it from the goroutine
// that does the work, synchronously: Begin under its run's lock,
// GroupCommitted on the log's writer goroutine (the next group commit
// waits for it). Its methods must therefore return quickly, must not block,
// and must not call the DB. One Observer may serve several DBs; its
// methods may be called concurrently.
//
// Events are reported once the work they describe is done: an atom's
// Committed once its record is durable and applied, before Commit returns;
// GroupCommitted before the appends of the group return.
type Observer interface {
	// Opened is called once, when Open succeeds, with what DB.Stats().Open
	// then returns: Open's wall time and the log records it replayed.
	Opened(OpenInfo)
	// AtomBegun is called when Begin returns an atom. ctx is Begin's. The
	// AtomObserver returned receives the atom's events (nil: none).
	AtomBegun(ctx context.Context, ev AtomEvent) AtomObserver
	// GroupCommitted is called for every group commit of the log: the
	// appends it made durable with one write and its fdatasyncs.
	GroupCommitted(wal.GroupCommit)
	// SnapshotWritten is called when a background snapshot of a run is in
	// the snapshot store.
	SnapshotWritten(SnapshotEvent)
}

// AtomObserver receives the events of one atom, from the goroutines that
// call the atom's methods.
type AtomObserver interface {
	// ActionStarted is called when a Do or a Resolve of the atom goes to
	// the ledger (a call refused before that, an invalid action or a done
	// atom, is not reported). ctx is the call's; the context returned,
	// ctx itself or one derived from it (never nil), is the one the call
	// goes on with, and the one exec is called with: an observer that
	// starts a span returns ctx with it, so that what exec does is traced
	// under the action. The ActionObserver returned is told
	// the call's outcome (nil: it is not).
	ActionStarted(ctx context.Context, ev ActionEvent) (context.Context, ActionObserver)
	// Committed is called when Commit made the atom durable, before Commit
	// returns.
	Committed(CommitEvent)
	// Failed is called when Fail recorded the atom's failure durably, with
	// the reason as recorded (cut to record.MaxFailReason bytes).
	Failed(reason string)
}

// ActionObserver is told how one Do or Resolve call ended.
type ActionObserver interface {
	// ActionEnded is called once, before the call returns, with its
	// outcome and the error it returns (nil for ActionExecuted,
	// ActionCached, ActionResolved and ActionResolvedFailed).
	ActionEnded(outcome ActionOutcome, err error)
}

// AtomEvent names a begun atom.
type AtomEvent struct {
	Run string
	Seq uint64
	// Interrupted: the atom's seq is the one a crash interrupted
	// (Atom.Interrupted).
	Interrupted bool
}

// ActionEvent names the action of a Do or Resolve call, as the ledger
// records it: tool, idempotency key (the default key filled in), its index
// among the atom's default-key calls, and its fingerprint. Its args are not
// given: they may hold what Redact keeps out of the store.
type ActionEvent struct {
	Tool        string
	Key         string
	Index       uint32
	Fingerprint ledger.Fingerprint
	Idempotent  bool // Do of an action declared idempotent
	Resolve     bool // a call of the Resolve family, not Do
	// Retry is the action's retry policy (normalized), nil if none.
	Retry *ledger.RetryPolicy
}

// ActionOutcome is how a Do or Resolve call ended.
type ActionOutcome uint8

const (
	// ActionExecuted: Do called exec and certified its result.
	ActionExecuted ActionOutcome = iota + 1
	// ActionCached: Do returned a certified result without calling exec
	// (an earlier call, before a crash or not, or another goroutine's
	// concurrent call, certified it).
	ActionCached
	// ActionInDoubt: Do found an intent without a certificate for an
	// action not declared idempotent and returned ledger.ErrInDoubt.
	ActionInDoubt
	// ActionFailed: the call returned any other error: exec's (recorded as
	// failed), or the store's.
	ActionFailed
	// ActionResolved: Resolve or ResolveInDoubt certified the result the
	// agent learned from the downstream.
	ActionResolved
	// ActionResolvedFailed: ResolveFailed or ResolveInDoubtFailed closed
	// the action as not done.
	ActionResolvedFailed
	// ActionGaveUp: the action's retry policy gave it up (attempts
	// exhausted, deadline passed, a permanent error), now or in an
	// earlier call: Do returned a *ledger.GaveUpError.
	ActionGaveUp
)

func (o ActionOutcome) String() string {
	switch o {
	case ActionExecuted:
		return "executed"
	case ActionCached:
		return "cached"
	case ActionInDoubt:
		return "in_doubt"
	case ActionFailed:
		return "failed"
	case ActionResolved:
		return "resolved"
	case ActionResolvedFailed:
		return "resolved_failed"
	case ActionGaveUp:
		return "gave_up"
	}
	return fmt.Sprintf("ActionOutcome(%d)", uint8(o))
}

// CommitEvent describes a committed atom.
type CommitEvent struct {
	// Duration is the wall time of the Commit call: encoding, the append,
	// the wait for its group commit's fdatasync, and applying the delta.
	Duration time.Duration
	// Bytes is the size of the atom's log record as appended (compressed,
	// with its header); DeltaBytes is the encoded delta's, uncompressed.
	Bytes      int
	DeltaBytes int
	Actions    int // actions the record covers
}

// SnapshotEvent describes a background snapshot of a run.
type SnapshotEvent struct {
	Run string
	Seq uint64 // the seq whose frame the snapshot holds
	// Previous is the seq of the run's previous snapshot (0: none), and
	// Head the run's last seq once this one was stored: Head - Previous
	// atoms were not covered by a snapshot just before it landed (what a
	// read of the run's state at its head would have replayed).
	Previous uint64
	Head     uint64
}

// observeOpen reports a successful Open.
func (db *DB) observeOpen() {
	if o := db.opts.Observer; o != nil {
		o.Opened(db.openInfo)
	}
}

// groupCommitHook is the log's OnGroupCommit: the Observer's, or nil.
func (db *DB) groupCommitHook() func(wal.GroupCommit) {
	if o := db.opts.Observer; o != nil {
		return o.GroupCommitted
	}
	return nil
}

// observeBegin gives a just-begun atom its AtomObserver (Begin, under the
// run's lock).
func (db *DB) observeBegin(ctx context.Context, a *Atom) {
	if o := db.opts.Observer; o != nil {
		a.obs = o.AtomBegun(ctx, AtomEvent{Run: a.run.id, Seq: a.seq, Interrupted: a.resumed})
	}
}

// observeAction reports that a Do (resolve false) or Resolve of in goes to
// the ledger; it returns the context to go on with and the call's
// ActionObserver.
func (a *Atom) observeAction(ctx context.Context, in *ledger.Intent, idempotent, resolve bool) (context.Context, ActionObserver) {
	if a.obs == nil {
		return ctx, nil
	}
	return a.obs.ActionStarted(ctx, ActionEvent{Tool: in.Tool, Key: in.Key, Index: in.Index,
		Fingerprint: in.Fingerprint, Idempotent: idempotent, Resolve: resolve, Retry: in.Retry})
}

// doEnded reports how a Do ended: ran says whether exec was called, err is
// the ledger's error.
func doEnded(o ActionObserver, ran bool, err error) {
	if o == nil {
		return
	}
	switch {
	case err == nil && ran:
		o.ActionEnded(ActionExecuted, nil)
	case err == nil:
		o.ActionEnded(ActionCached, nil)
	case errors.Is(err, ledger.ErrInDoubt):
		o.ActionEnded(ActionInDoubt, err)
	case gaveUp(err):
		o.ActionEnded(ActionGaveUp, err)
	default:
		o.ActionEnded(ActionFailed, err)
	}
}

// resolveEnded reports how a Resolve ended: outcome if err is nil,
// ActionFailed otherwise.
func resolveEnded(o ActionObserver, outcome ActionOutcome, err error) {
	if o == nil {
		return
	}
	if err != nil {
		outcome = ActionFailed
	}
	o.ActionEnded(outcome, err)
}

// commitStart is the start time of a Commit when the atom is observed.
func (a *Atom) commitStart() time.Time {
	if a.obs == nil {
		return time.Time{}
	}
	return time.Now()
}

// observeCommit reports a committed atom whose Commit started at start.
func (a *Atom) observeCommit(start time.Time, recBytes, deltaBytes, actions int) {
	if a.obs != nil {
		a.obs.Committed(CommitEvent{Duration: time.Since(start), Bytes: recBytes, DeltaBytes: deltaBytes, Actions: actions})
	}
}

// observeFail reports a failed atom.
func (a *Atom) observeFail(reason string) {
	if a.obs != nil {
		a.obs.Failed(reason)
	}
}

// observeSnapshot reports the snapshot c of r, about to be recorded as the
// run's latest (runSnapshot, before captured). The run's lock is held only
// to read its seqs, never while the Observer runs.
func (db *DB) observeSnapshot(r *Run, c *capturedRun) {
	o := db.opts.Observer
	if o == nil || !c.Snapshot {
		return
	}
	r.mu.Lock()
	ev := SnapshotEvent{Run: r.id, Seq: c.Seq, Previous: r.mu.snapSeq, Head: r.mu.lastSeq}
	r.mu.Unlock()
	o.SnapshotWritten(ev)
}
