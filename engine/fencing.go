package engine

// Fencing: the writer's epoch reaches every exec. A store is written by
// one process at a time (the store's lock; for a replicated store, the
// lease of package replicate and the stream's fence), but that stops a
// stale writer's log writes, not a tool call it has already started. The
// context an exec receives therefore carries a fencing token, a number
// that only grows from one writer of the store to the next, for the exec
// to pass to downstreams that can check it (Kleppmann's fencing token,
// Chubby's sequencer); it is cancelled the moment the writer loses its
// lease, or reaches the writer's bound on a call's duration; and what an
// exec returns after either is never certified.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/ledger"
)

// Fence is what a writer holds the store by, as a FencedReplicator
// describes it to the DB at Open.
type Fence struct {
	// Token is the writer's fencing token: larger than the token of every
	// earlier writer of the store (package replicate: its lease epoch).
	Token uint64
	// Lost, if not nil, returns a channel that is closed once the writer
	// loses the lease it holds now, or can no longer prove that it holds
	// it (its last renewal expired). The DB takes one for each exec: it
	// cancels the exec's context when it is closed, starts no exec while
	// the lease is not held, and certifies nothing an exec returns after
	// it lost it. A writer whose renewal goes through again (nobody took
	// the lease meanwhile) holds it again: later calls return a new
	// channel.
	Lost func() <-chan struct{}
	// Held, if not nil, reports whether the writer can prove now that it
	// holds its lease, by the clock rather than by a timer: after a pause
	// of the process (SIGSTOP) it answers false at once, before the timer
	// that closes Lost's channel ran. Err of an exec's context calls it.
	Held func() bool
	// CallBound, if positive, bounds an exec's duration: the DB cancels
	// the exec's context CallBound after it called exec, and certifies
	// nothing the exec returns after that (the action stays in doubt).
	// The next writer of the store waits for it (InDoubtAfter).
	CallBound time.Duration
	// InDoubtAfter is the earliest time at which an action that an
	// earlier writer left in doubt may be executed again: when every exec
	// that writer (or any before it) could have started has ended, by the
	// bound it enforced. An exec of an action whose intent is already in
	// the ledger (an idempotent action in doubt, or one resolved as
	// failed) waits until then; zero: no wait.
	InDoubtAfter time.Time
}

// FencedReplicator is a Replicator whose writer holds the store by a
// lease (package replicate's Replicator): the DB asks it for its Fence
// once, at Open, after ReplicateFile. A Replicator that is not a
// FencedReplicator leaves the DB fenced as a local store is (see
// FencingToken).
type FencedReplicator interface {
	Replicator
	Fence() Fence
}

// ErrCallBound is matched by the error of a Do whose exec ran past the
// writer's bound on a call's duration (Fence.CallBound): its context was
// cancelled at the bound, and what it returned was not certified: the
// action is in doubt (the error also matches ledger.ErrInDoubt).
var ErrCallBound = errors.New("engine: the call ran past the writer's bound on a call's duration")

// ErrLeaseLost is matched by the error of a Do whose writer lost its
// lease (or could no longer prove that it held it) before or while its
// exec ran: the context exec received was cancelled, and what it returned
// was not certified (the action is in doubt, unless exec was never
// called). A writer whose lease another node took is fenced: its next
// write fails with ErrFenced. One whose renewal was only late (the lease
// bucket electing a leader) may hold it again, and a later Do runs.
var ErrLeaseLost = errors.New("engine: the writer does not hold its lease")

type fenceKey struct{}

// FencingToken returns the fencing token of the writer that called exec
// with ctx (or a context derived from it), and whether ctx carries one.
// Pass it with the idempotency key to a downstream that can check it: one
// that remembers the largest token it has seen, and refuses a request
// that carries a smaller one, can never act on a request of a writer
// that another has replaced, however late the request arrives.
//
// For a replicated store (Options.Replicator a FencedReplicator, such as
// package replicate's), the token is the writer's lease epoch. For a
// local store it is the position of the log's end when the DB was opened
// (segment << 32 | offset): a process that opens the store after another
// has a larger token as soon as the other wrote anything, and every
// exec's intent is written before exec is called. Tokens of a store that
// was local and then replicated are not comparable across that change.
func FencingToken(ctx context.Context) (uint64, bool) {
	t, ok := ctx.Value(fenceKey{}).(uint64)
	return t, ok
}

// FencingToken is the DB's own fencing token (see the function
// FencingToken).
func (db *DB) FencingToken() uint64 { return db.fence.Token }

// openFence is the DB's Fence: its FencedReplicator's, or a local
// store's, whose token is the log's end at Open.
func (db *DB) openFence() Fence {
	if fr, ok := db.opts.Replicator.(FencedReplicator); ok {
		return fr.Fence()
	}
	end := db.log.End()
	return Fence{Token: end.Segment<<32 | uint64(end.Offset)}
}

// execCtx is the context an exec receives: ctx with the fencing token,
// cancelled when the writer loses its lease or at the call's bound, and
// whose Err checks both by the clock.
type execCtx struct {
	context.Context
	f     *Fence
	lost  <-chan struct{} // Fence.Lost's when exec was called; nil: none
	bound time.Time       // zero: none
}

func (c *execCtx) Value(k any) any {
	if _, ok := k.(fenceKey); ok {
		return c.f.Token
	}
	return c.Context.Value(k)
}

// Deadline is the call's bound, if it comes before the parent's deadline.
func (c *execCtx) Deadline() (time.Time, bool) {
	d, ok := c.Context.Deadline()
	if !c.bound.IsZero() && (!ok || c.bound.Before(d)) {
		return c.bound, true
	}
	return d, ok
}

func (c *execCtx) Err() error {
	if err := c.late(); err != nil {
		return err
	}
	return c.Context.Err()
}

// late says why the exec may no longer act or be certified: the lease is
// lost, or the bound passed; nil if neither.
func (c *execCtx) late() error {
	if !c.f.held(c.lost) {
		return ErrLeaseLost
	}
	if !c.bound.IsZero() && !time.Now().Before(c.bound) {
		return ErrCallBound
	}
	return nil
}

// held reports whether the writer still holds the lease whose Lost
// channel is lost (nil: none).
func (f *Fence) held(lost <-chan struct{}) bool {
	if lost != nil {
		select {
		case <-lost:
			return false
		default:
		}
	}
	return f.Held == nil || f.Held()
}

// fenced reports whether execs run under a lease or wait for an earlier
// writer (a FencedReplicator's fence): otherwise whether an action was
// in the ledger before its exec changes nothing.
func (f *Fence) fenced() bool {
	return f.Lost != nil || f.Held != nil || f.CallBound > 0 || !f.InDoubtAfter.IsZero()
}

// lost is the Lost channel of the lease held now, or nil.
func (f *Fence) lost() <-chan struct{} {
	if f.Lost == nil {
		return nil
	}
	return f.Lost()
}

// fencedExec runs exec for in under the DB's fence: it waits for
// Fence.InDoubtAfter if prior (the action's intent was in the ledger
// before this Do), refuses to start exec once the lease is lost, gives
// exec an execCtx, and turns what exec returns after the lease was lost
// or the bound passed into an error that leaves the action in doubt
// (ledger.ErrUncertified). A refusal before exec is called certifies a
// failure, unless the action was already in doubt.
func (db *DB) fencedExec(ctx context.Context, in *ledger.Intent, prior bool, key string, exec ledger.Exec) ([]byte, error) {
	f := &db.fence
	lost := f.lost()
	refuse := func(err error) ([]byte, error) {
		if prior {
			return nil, fmt.Errorf("%w: %w", ledger.ErrUncertified, err)
		}
		return nil, err
	}
	if prior && !f.InDoubtAfter.IsZero() {
		if wait := time.Until(f.InDoubtAfter); wait > 0 {
			// The previous writer may still be executing this action.
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return refuse(fmt.Errorf("engine: run %q seq %d: %q was left in doubt by the previous writer, which may be executing it until %s: %w",
					in.RunID, in.Seq, in.Tool, f.InDoubtAfter.UTC().Format(time.RFC3339Nano), context.Cause(ctx)))
			case <-lost:
				t.Stop()
			}
			lost = f.lost()
		}
	}
	if !f.held(lost) {
		return refuse(fmt.Errorf("engine: run %q seq %d: %q not executed: %w", in.RunID, in.Seq, in.Tool, ErrLeaseLost))
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ec := &execCtx{Context: cctx, f: f, lost: lost}
	if f.CallBound > 0 {
		ec.bound = time.Now().Add(f.CallBound)
		t := time.AfterFunc(f.CallBound, func() { cancel(ErrCallBound) })
		defer t.Stop()
	}
	if lost != nil {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			select {
			case <-lost:
				cancel(ErrLeaseLost)
			case <-stop:
			}
		}()
	}
	res, err := exec(ec, key)
	if late := ec.late(); late != nil {
		// Whatever the exec did, it may have done it after the next
		// writer started: never certified, in doubt.
		return nil, fmt.Errorf("%w: run %q seq %d: %q returned after %w (its outcome, %s, is not recorded)",
			ledger.ErrUncertified, in.RunID, in.Seq, in.Tool, late, outcomeText(err))
	}
	return res, err
}

func outcomeText(err error) string {
	if err != nil {
		return "an error: " + err.Error()
	}
	return "a result"
}

// priorIntent reports whether in's action has a record in the ledger that
// is not a certificate of its outcome: an intent (in doubt) or a failure.
func (db *DB) priorIntent(in *ledger.Intent) bool {
	e, ok := db.ledger.Lookup(in.Fingerprint)
	return ok && (e.Status == ledger.StatusIntent || e.Status == ledger.StatusFailed)
}

// waitInDoubt waits, if in's action is in doubt (an intent without a
// certificate), until Fence.InDoubtAfter: an earlier writer may still be
// executing it, and neither an exec again nor a report that it is in
// doubt (on which the agent asks the downstream) may come before its
// call is over. If ctx ends first it returns an error that matches
// ledger.ErrInDoubt and ctx's.
func (db *DB) waitInDoubt(ctx context.Context, in *ledger.Intent) error {
	after := db.fence.InDoubtAfter
	if after.IsZero() {
		return nil
	}
	wait := time.Until(after)
	if wait <= 0 {
		return nil
	}
	if e, ok := db.ledger.Lookup(in.Fingerprint); !ok || e.Status != ledger.StatusIntent {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("engine: %q was left in doubt by an earlier writer, which may be executing it until %s: %w: %w",
			in.Tool, after.UTC().Format(time.RFC3339Nano), context.Cause(ctx),
			&ledger.InDoubtError{Key: in.Key, Tool: in.Tool, RunID: in.RunID, Seq: in.Seq, Index: in.Index, Fingerprint: in.Fingerprint})
	}
}
