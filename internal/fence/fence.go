// Package fence is how a writer's hold on a store reaches the tool calls
// it makes: a fencing token that only grows from one writer to the next,
// a channel closed when the writer loses its lease, a clock check that
// answers at once after a pause of the process, and a bound on a call's
// duration. It knows nothing of runs; package engine conducts it
// (engine/fencing.go): it takes its Fence at Open (Open: the
// Replicator's, a Holder, or the log's end as a local store's token),
// runs each exec through Guarded (over Fence.Exec), and certifies
// nothing an exec returns late.
//
// The interface the engine uses, whole:
//
//	Open(rep, segment, offset) Fence    // at Open: a Holder's Fence, else the log's end as the token
//	Token(ctx) (uint64, bool)           // the token an exec's context carries
//	(*Fence).Fenced() bool              // a lease or a wait to honour at all
//	(*Fence).LostNow() <-chan struct{}  // the lease held now, or nil
//	(*Fence).Holds(lost) bool           // that lease still held, by the clock too
//	(*Fence).Wait(ctx, until, lost)     // wait for a time, a lost lease or ctx
//	(*Fence).Exec(ctx, lost, key, exec) // run exec; late: why it may not count
//	Guarded(ctx, f, in, prior, key, exec) // an action's exec under f, whole: the errors the ledger records
//	WaitInDoubt(ctx, f, in, inDoubt)    // an in-doubt action waits for InDoubtAfter
//	WaitLedger(ctx, f, in, l)           // WaitInDoubt, the ledger telling what is in doubt
//	Prior(l, in) bool                   // an intent or a failure of in in the ledger l
//
// # Caveats
//
// A cancelled context stops only an exec that looks at it; an exec that
// ignores it may act after the bound or after the lease was lost. What it
// returns then is not certified, but only a downstream that checks the
// token can refuse the act itself.
package fence

import (
	"context"
	"errors"
	"time"
)

// Fence is what a writer holds the store by.
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

// ErrCallBound: an exec ran past the writer's bound on a call's duration
// (Fence.CallBound). The text names the engine, whose API returns it.
var ErrCallBound = errors.New("engine: the call ran past the writer's bound on a call's duration")

// ErrLeaseLost: the writer does not hold its lease, or cannot prove that
// it does. The text names the engine, whose API returns it.
var ErrLeaseLost = errors.New("engine: the writer does not hold its lease")

type tokenKey struct{}

// Token returns the fencing token an exec's context (or one derived from
// it) carries, and whether it carries one.
func Token(ctx context.Context) (uint64, bool) {
	t, ok := ctx.Value(tokenKey{}).(uint64)
	return t, ok
}

// Fenced reports whether execs run under a lease or wait for an earlier
// writer; for a Fence that is only a token, Exec and Wait change nothing.
func (f *Fence) Fenced() bool {
	return f.Lost != nil || f.Held != nil || f.CallBound > 0 || !f.InDoubtAfter.IsZero()
}

// LostNow is the Lost channel of the lease held now, or nil.
func (f *Fence) LostNow() <-chan struct{} {
	if f.Lost == nil {
		return nil
	}
	return f.Lost()
}

// Holds reports whether the writer still holds the lease whose Lost
// channel is lost (nil: none), checking the clock too.
func (f *Fence) Holds(lost <-chan struct{}) bool {
	if lost != nil {
		select {
		case <-lost:
			return false
		default:
		}
	}
	return f.Held == nil || f.Held()
}

// Wait waits until the time until, or until lost is closed (then the
// caller finds the lease lost), or ctx ends (then it returns ctx's cause).
// A time past, or zero, does not wait.
func Wait(ctx context.Context, until time.Time, lost <-chan struct{}) error {
	if until.IsZero() {
		return nil
	}
	wait := time.Until(until)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-lost:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Exec calls exec with a context that carries f's token, is cancelled
// when lost is closed (ErrLeaseLost) or CallBound after the call
// (ErrCallBound), and whose Err checks both by the clock. late, when not
// nil, says why what exec returned may not count: the lease was lost or
// the bound passed by the time it returned.
func (f *Fence) Exec(ctx context.Context, lost <-chan struct{}, key string, exec func(context.Context, string) ([]byte, error)) (res []byte, err, late error) {
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
	res, err = exec(ec, key)
	return res, err, ec.late()
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
	if _, ok := k.(tokenKey); ok {
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
	if !c.f.Holds(c.lost) {
		return ErrLeaseLost
	}
	if !c.bound.IsZero() && !time.Now().Before(c.bound) {
		return ErrCallBound
	}
	return nil
}

// Holder is a replicator whose writer holds the store by a lease
// (engine.FencedReplicator): its Fence is asked for once, at Open.
type Holder interface{ Fence() Fence }

// Open returns the Fence a store is written under from Open on: rep's,
// if rep is a Holder, else a local store's, whose token is the log's end
// at Open (segment, offset), which every writer before it left smaller.
func Open(rep any, segment uint64, offset int64) Fence {
	if h, ok := rep.(Holder); ok {
		return h.Fence()
	}
	return Fence{Token: segment<<32 | uint64(offset)}
}
