package engine

// The store's table of runs (db.mu.runs, internal/runtable) as runs enter
// and leave it: the one path that creates a run (Run, Fork) and the one
// that withdraws runs (Delete, Erase, the replay of their records, a
// failed creation, the reconciliation of CHECKPOINT with the log). The
// capabilities decide which runs; these keep the table, the registry of
// deleted ids and a handle a caller kept consistent.

import (
	"context"
	"fmt"
	"io"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

// nonceLocked draws the nonce of run id, being created (db.mu held).
func (db *DB) nonceLocked(id string) (chain.Nonce, error) {
	var nonce chain.Nonce
	if _, err := io.ReadFull(db.opts.Nonces, nonce[:]); err != nil {
		return nonce, fmt.Errorf("engine: nonce for run %q: %w", id, err)
	}
	return nonce, nil
}

// publishLocked puts r, being created, in the table before its record is
// durable, so that concurrent callers of its id wait for one creation
// (waitCreated) instead of racing; create then writes its record.
func (db *DB) publishLocked(r *Run) {
	r.created = make(chan struct{})
	db.mu.runs.Publish(r)
}

// create makes rec, the creation record of r (published), durable: r's
// data key first (keys.go: durable before the run exists), then the
// record, holding the engine checkpoint's replay position below it. A
// failure withdraws r; what names the call in the error.
func (db *DB) create(ctx context.Context, r *Run, rec []byte, what string) (*Run, error) {
	var err error
	if db.keys != nil {
		err = db.addRunKey(r.id)
	}
	if err == nil {
		tok := db.track()
		_, err = db.append(ctx, rec)
		db.untrack(tok)
	}
	if err != nil {
		r.createErr = fmt.Errorf("engine: %s: %w", what, err)
		db.mu.Lock()
		db.withdrawLocked(false, r)
		db.mu.Unlock()
	}
	close(r.created)
	return r, r.createErr
}

// withdrawLocked removes runs from the table (db.mu held): Run, Runs and
// Fork no longer find them. For a deletion or an erasure whose record is
// not durable yet (deleting), their ids are marked being deleted, so that
// no run of that id is created and no fork of them appears meanwhile;
// restoreRuns puts them back if the record fails, withdrawn finishes it
// once it is durable.
func (db *DB) withdrawLocked(deleting bool, runs ...*Run) {
	db.mu.runs.Withdraw(&db.mu.deleted, deleting, runs...)
}

// deletedLocked reports whether id names a deleted run, or one being
// deleted (db.mu held).
func (db *DB) deletedLocked(id string) bool { return db.mu.deleted.Has(id) }

// restoreRuns puts back runs withdrawn by a deletion that failed.
func (db *DB) restoreRuns(runs ...*Run) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.mu.runs.Restore(&db.mu.deleted, runs...)
}

// withdrawn finishes the withdrawal of runs whose deletion or erasure
// (kind) is durable and in db.mu.deleted: a handle a caller kept serves
// nothing more (errors matching gone), and their messages not consumed
// are withdrawn.
func (db *DB) withdrawn(kind record.Kind, gone error, runs ...*Run) {
	for _, r := range runs {
		r.markGone(fmt.Errorf("%w: run %q", gone, r.id))
		db.publishRunGone(kind, r.id)
	}
}

// markGone makes r, whose deletion or erasure is durable, serve nothing
// more through a handle a caller kept (err, from every read of its
// state), and drops its frame from memory.
func (r *Run) markGone(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.gone = err
	r.mu.frame = nil
	r.mu.sizes.Drop()
	r.mu.pending = nil
}
