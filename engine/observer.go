package engine

// The observation hook (docs/DESIGN.md, "Observation"): Options.Observer
// is told what the engine does as it does it; internal/observe decides
// how an action ended.

import (
	"context"
	"time"

	"github.com/continuumdb/continuum/internal/checkpoint"
	"github.com/continuumdb/continuum/internal/observe"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
)

// Observer receives the engine's events, for metrics and traces (the
// nested module otel implements it on OpenTelemetry). A DB calls it
// synchronously from the goroutine doing the work, once the work is done:
// its methods must return quickly, must not block and must not call the
// DB; they may be called concurrently. docs/DESIGN.md, "Observation", has
// when each is called.
type Observer interface {
	// Opened: Open succeeded; what DB.Stats().Open then returns.
	Opened(OpenInfo)
	// AtomBegun: Begin returns an atom (ctx is Begin's); the AtomObserver
	// returned receives its events (nil: none).
	AtomBegun(ctx context.Context, ev AtomEvent) AtomObserver
	// GroupCommitted: a group commit of the log, on its writer goroutine.
	GroupCommitted(wal.GroupCommit)
	// SnapshotWritten: a background snapshot of a run is stored.
	SnapshotWritten(SnapshotEvent)
}

// AtomObserver receives the events of one atom.
type AtomObserver interface {
	// ActionStarted: a Do or Resolve of the atom goes to the ledger. The
	// context returned (ctx or one derived from it, never nil) is the one
	// the call and its exec go on with; the ActionObserver is told the
	// call's outcome (nil: it is not).
	ActionStarted(ctx context.Context, ev ActionEvent) (context.Context, ActionObserver)
	// Committed: Commit made the atom durable, before Commit returns.
	Committed(CommitEvent)
	// Failed: Fail recorded the atom's failure durably, with the reason
	// as recorded.
	Failed(reason string)
}

// ActionObserver is told how one Do or Resolve call ended.
type ActionObserver interface {
	// ActionEnded is called once, before the call returns, with its
	// outcome and the error it returns.
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

// ActionEvent names the action of a Do or Resolve call as the ledger
// records it (the default key filled in; no args).
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
	// ActionCached: Do returned a certified result without calling exec.
	ActionCached
	// ActionInDoubt: Do returned ledger.ErrInDoubt.
	ActionInDoubt
	// ActionFailed: the call returned any other error.
	ActionFailed
	// ActionResolved: Resolve or ResolveInDoubt certified a result.
	ActionResolved
	// ActionResolvedFailed: ResolveFailed or ResolveInDoubtFailed closed
	// the action as not done.
	ActionResolvedFailed
	// ActionGaveUp: the action's retry policy gave it up: Do returned a
	// *ledger.GaveUpError.
	ActionGaveUp
)

// The values are internal/observe's (a compile error if they part).
var _ = [1]struct{}{}[ActionGaveUp-ActionOutcome(observe.GaveUp)+ActionExecuted-ActionOutcome(observe.Executed)]

func (o ActionOutcome) String() string { return observe.Outcome(o).String() }

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
	// Previous is the seq of the run's previous snapshot (0: none), Head
	// the run's last seq once this one was stored.
	Previous uint64
	Head     uint64
}

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

// observeBegin gives a just-begun atom its AtomObserver (under the run's
// lock).
func (db *DB) observeBegin(ctx context.Context, a *Atom) {
	if o := db.opts.Observer; o != nil {
		a.obs = o.AtomBegun(ctx, AtomEvent{Run: a.run.id, Seq: a.seq, Interrupted: a.resumed})
	}
}

// observeAction reports a Do (resolve false) or Resolve of in going to the
// ledger: the context to go on with, and the call's ActionObserver.
func (a *Atom) observeAction(ctx context.Context, in *ledger.Intent, idempotent, resolve bool) (context.Context, ActionObserver) {
	if a.obs == nil {
		return ctx, nil
	}
	return a.obs.ActionStarted(ctx, ActionEvent{Tool: in.Tool, Key: in.Key, Index: in.Index,
		Fingerprint: in.Fingerprint, Idempotent: idempotent, Resolve: resolve, Retry: in.Retry})
}

// doEnded reports how a Do ended: ran says whether exec was called.
func doEnded(o ActionObserver, ran bool, err error) {
	if o != nil {
		o.ActionEnded(ActionOutcome(observe.OfDo(ran, err)), err)
	}
}

// resolveEnded reports how a Resolve ended: outcome, or ActionFailed.
func resolveEnded(o ActionObserver, outcome ActionOutcome, err error) {
	if o != nil {
		o.ActionEnded(ActionOutcome(observe.OfResolve(observe.Outcome(outcome), err)), err)
	}
}

// commitStart is a Commit's start time when the atom is observed.
func (a *Atom) commitStart() time.Time {
	if a.obs == nil {
		return time.Time{}
	}
	return time.Now()
}

func (a *Atom) observeCommit(start time.Time, recBytes, deltaBytes, actions int) {
	if a.obs != nil {
		a.obs.Committed(CommitEvent{Duration: time.Since(start), Bytes: recBytes, DeltaBytes: deltaBytes, Actions: actions})
	}
}

func (a *Atom) observeFail(reason string) {
	if a.obs != nil {
		a.obs.Failed(reason)
	}
}

// observeSnapshot reports the snapshot c of r before it is recorded as
// the run's latest; the run's lock is not held while the Observer runs.
func (db *DB) observeSnapshot(r *Run, c *checkpoint.Capture) {
	o := db.opts.Observer
	if o == nil || !c.Snapshot {
		return
	}
	r.mu.Lock()
	ev := SnapshotEvent{Run: r.id, Seq: c.Seq, Previous: r.mu.book.SnapSeq, Head: r.mu.lastSeq}
	r.mu.Unlock()
	o.SnapshotWritten(ev)
}
