package engine

// Fencing (internal/fence; docs/DESIGN.md, the write path's fencing).

import (
	"context"

	"github.com/continuumdb/continuum/internal/fence"
	"github.com/continuumdb/continuum/ledger"
)

// Fence is what a writer holds the store by, as a FencedReplicator
// describes it at Open (internal/fence documents its fields).
type Fence = fence.Fence

// FencedReplicator is a Replicator whose writer holds the store by a
// lease: the DB asks it for its Fence once, at Open, after ReplicateFile.
type FencedReplicator interface {
	Replicator
	Fence() Fence
}

var _ fence.Holder = FencedReplicator(nil)

// ErrCallBound is matched by the error of a Do whose exec ran past
// Fence.CallBound: not certified (it also matches ledger.ErrInDoubt).
var ErrCallBound = fence.ErrCallBound

// ErrLeaseLost is matched by the error of a Do whose writer lost its
// lease (or could not prove it held it) before or while its exec ran:
// not certified (in doubt, unless exec was never called).
var ErrLeaseLost = fence.ErrLeaseLost

// FencingToken returns the fencing token of the writer that called exec
// with ctx (or a context derived from it), and whether ctx carries one, to
// pass downstream with the idempotency key (docs/DESIGN.md, the write
// path's fencing, has what a token is).
func FencingToken(ctx context.Context) (uint64, bool) {
	return fence.Token(ctx)
}

// FencingToken is the DB's own fencing token (see the function
// FencingToken).
func (db *DB) FencingToken() uint64 { return db.fence.Token }

// openFence is the FencedReplicator's Fence, or a local store's (the
// log's end at Open): fence.Open.
func (db *DB) openFence() Fence {
	end := db.log.End()
	return fence.Open(db.opts.Replicator, end.Segment, end.Offset)
}

func (db *DB) fencedExec(ctx context.Context, in *ledger.Intent, prior bool, key string, exec ledger.Exec) ([]byte, error) {
	return fence.Guarded(ctx, &db.fence, in, prior, key, exec)
}

func (db *DB) priorIntent(in *ledger.Intent) bool { return fence.Prior(db.ledger, in) }

func (db *DB) waitInDoubt(ctx context.Context, in *ledger.Intent) error {
	return fence.WaitLedger(ctx, &db.fence, in, db.ledger)
}
