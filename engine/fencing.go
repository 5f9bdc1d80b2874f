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

	"github.com/continuumdb/continuum/internal/fence"
	"github.com/continuumdb/continuum/ledger"
)

// Fence is what a writer holds the store by, as a FencedReplicator
// describes it to the DB at Open (package internal/fence documents each
// field: Token, Lost, Held, CallBound, InDoubtAfter).
type Fence = fence.Fence

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
var ErrCallBound = fence.ErrCallBound

// ErrLeaseLost is matched by the error of a Do whose writer lost its
// lease (or could no longer prove that it held it) before or while its
// exec ran: the context exec received was cancelled, and what it returned
// was not certified (the action is in doubt, unless exec was never
// called). A writer whose lease another node took is fenced: its next
// write fails with ErrFenced. One whose renewal was only late (the lease
// bucket electing a leader) may hold it again, and a later Do runs.
var ErrLeaseLost = fence.ErrLeaseLost

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
	return fence.Token(ctx)
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

// fencedExec runs exec for in under the DB's fence (fence.Guarded).
func (db *DB) fencedExec(ctx context.Context, in *ledger.Intent, prior bool, key string, exec ledger.Exec) ([]byte, error) {
	return fence.Guarded(ctx, &db.fence, in, prior, key, exec)
}

// priorIntent reports whether in's action has a record in the ledger that
// is not a certificate of its outcome: an intent (in doubt) or a failure.
func (db *DB) priorIntent(in *ledger.Intent) bool {
	e, ok := db.ledger.Lookup(in.Fingerprint)
	return ok && (e.Status == ledger.StatusIntent || e.Status == ledger.StatusFailed)
}

// waitInDoubt waits, if in's action is in doubt (an intent without a
// certificate), until Fence.InDoubtAfter (fence.WaitInDoubt).
func (db *DB) waitInDoubt(ctx context.Context, in *ledger.Intent) error {
	return fence.WaitInDoubt(ctx, &db.fence, in, func() bool {
		e, ok := db.ledger.Lookup(in.Fingerprint)
		return ok && e.Status == ledger.StatusIntent
	})
}
