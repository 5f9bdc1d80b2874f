package engine

// Fencing: the writer's epoch reaches every exec (internal/fence;
// docs/DESIGN.md, the write path's fencing).

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
// lease (package replicate's): the DB asks it for its Fence once, at
// Open, after ReplicateFile. Any other Replicator leaves the DB fenced as
// a local store is.
type FencedReplicator interface {
	Replicator
	Fence() Fence
}

// ErrCallBound is matched by the error of a Do whose exec ran past
// Fence.CallBound: its context was cancelled, and what it returned was
// not certified (the error also matches ledger.ErrInDoubt).
var ErrCallBound = fence.ErrCallBound

// ErrLeaseLost is matched by the error of a Do whose writer lost its
// lease (or could not prove it held it) before or while its exec ran: the
// exec's context was cancelled and what it returned was not certified (in
// doubt, unless exec was never called). A writer another node replaced
// gets ErrFenced next; one whose renewal was only late may hold it again.
var ErrLeaseLost = fence.ErrLeaseLost

// FencingToken returns the fencing token of the writer that called exec
// with ctx (or a context derived from it), and whether ctx carries one,
// to pass downstream with the idempotency key: a downstream that refuses
// a token smaller than the largest it saw never acts for a replaced
// writer. A replicated store's token is its writer's lease epoch; a
// local store's, the log's end at Open (segment << 32 | offset). Tokens
// are not comparable across a store's change from local to replicated.
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

func (db *DB) fencedExec(ctx context.Context, in *ledger.Intent, prior bool, key string, exec ledger.Exec) ([]byte, error) {
	return fence.Guarded(ctx, &db.fence, in, prior, key, exec)
}

func (db *DB) priorIntent(in *ledger.Intent) bool { return fence.Prior(db.ledger, in) }

func (db *DB) waitInDoubt(ctx context.Context, in *ledger.Intent) error {
	return fence.WaitLedger(ctx, &db.fence, in, db.ledger)
}
