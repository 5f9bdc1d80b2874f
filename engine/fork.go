package engine

// Forks (docs/DESIGN.md, "Lifecycle and forks"); internal/lineage walks a
// lineage over capView and ledgerView.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/lineage"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
)

// ErrRunExists is returned by Fork for an id that names a run already.
var ErrRunExists = errors.New("engine: run exists")

// Fork creates run id from run src's state at committed seq at, durable
// when it returns; its first atom is at+1. Errors: ErrRunExists,
// ErrRunDeleted, ErrSeqOutOfRange (at past src's LastSeq), an unknown src.
func (db *DB) Fork(ctx context.Context, src string, at uint64, id string) (*Run, error) {
	if err := record.CheckRunID(id); err != nil {
		return nil, err
	}
	if err := db.checkOpen(); err != nil {
		return nil, err
	}
	parent, err := db.existingRun(ctx, src)
	if err != nil {
		return nil, err
	}
	if _, err := db.existingRun(ctx, id); err == nil {
		return nil, fmt.Errorf("%w: fork %q of run %q: %q names a run already", ErrRunExists, id, src, id)
	}
	if last := parent.LastSeq(); at > last {
		return nil, fmt.Errorf("%w: fork of run %q at seq %d, its last committed seq is %d", ErrSeqOutOfRange, src, at, last)
	}
	if at < parent.base { // a link names the run whose chain holds the fork point
		return db.Fork(ctx, parent.parent, at, id)
	}
	// The fork's state is built on its first use (materializeLocked).
	parentHead, err := parent.headAt(ctx, at)
	if err != nil {
		db.mu.Lock()
		gone := db.deletedLocked(src)
		db.mu.Unlock()
		if gone { // deleted meanwhile, its records perhaps reclaimed by a GC
			return nil, fmt.Errorf("%w: fork %q of run %q: it was deleted", ErrRunDeleted, id, src)
		}
		return nil, fmt.Errorf("engine: fork %q of run %q at seq %d: %w", id, src, at, err)
	}

	db.mu.Lock()
	if db.mu.closed {
		db.mu.Unlock()
		return nil, ErrClosed
	}
	if r := db.runLocked(id); r != nil {
		db.mu.Unlock()
		return nil, fmt.Errorf("%w: fork %q of run %q: %q names a run already", ErrRunExists, id, src, id)
	}
	if db.deletedLocked(id) || db.deletedLocked(src) {
		db.mu.Unlock()
		return nil, fmt.Errorf("%w: fork %q of run %q: one of them was deleted", ErrRunDeleted, id, src)
	}
	nonce, err := db.nonceLocked(id)
	if err != nil {
		db.mu.Unlock()
		return nil, err
	}
	r := newForkRun(db, id, nonce, time.Now(), src, parent, at, parentHead)
	db.publishLocked(r)
	db.mu.Unlock()
	rec := record.AppendFork(nil, id, nonce, r.createdAt.UnixNano(), src, at, parentHead)
	return db.create(ctx, r, rec, fmt.Sprintf("fork %q of run %q at seq %d", id, src, at))
}

// existingRun returns the run id if the store holds it, without creating it.
func (db *DB) existingRun(ctx context.Context, id string) (*Run, error) {
	if err := db.checkRegistry(); err != nil {
		return nil, err
	}
	db.mu.Lock()
	r, gone := db.runLocked(id), db.deletedLocked(id)
	db.mu.Unlock()
	if r == nil && gone {
		return nil, fmt.Errorf("%w: run %q", ErrRunDeleted, id)
	}
	if r == nil {
		return nil, fmt.Errorf("engine: store has no run %q", id)
	}
	if err := r.waitCreated(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// newForkRun is newRun for a run forked from parent at seq at (head
// parentHead); its frame is built on first use.
func newForkRun(db *DB, id string, nonce chain.Nonce, created time.Time, parent string, parentRef *Run, at uint64, parentHead chain.Hash) *Run {
	r := &Run{db: db, id: id, nonce: nonce, createdAt: created, parent: parent, base: at}
	r.parentRef.Store(parentRef)
	r.baseHead = db.hasher.ForkGenesis(id, nonce, parent, at, parentHead)
	r.mu.head, r.mu.lastSeq = r.baseHead, at
	r.mu.book.Fork(at, r.baseHead)
	r.mu.book.Start(time.Now())
	return r
}

// baseFrame returns the run's state at its base: a fork's parent's
// (lineage.ParentState), empty for a run that is no fork.
func (r *Run) baseFrame(ctx context.Context) (*frame.Frame, error) {
	if r.parent == "" {
		return newFrame(), nil
	}
	return lineage.ParentState(ctx, (*capView)(r), r.base)
}

// headAt returns the run's chain head at seq (base <= seq <= LastSeq).
func (r *Run) headAt(ctx context.Context, seq uint64) (chain.Hash, error) {
	r.mu.Lock()
	last, head := r.mu.lastSeq, r.mu.head
	r.mu.Unlock()
	switch {
	case seq == last:
		return head, nil
	case seq == r.base:
		if r.parent == "" {
			return r.db.hasher.Genesis(r.id, r.nonce), nil
		}
		return r.baseHead, nil
	case seq < r.base || seq > last:
		return chain.Hash{}, fmt.Errorf("%w: run %q has no head of its own at seq %d", ErrSeqOutOfRange, r.id, seq)
	}
	p, err := r.committedAtomPos(ctx, seq)
	if err != nil {
		return chain.Hash{}, err
	}
	a, err := r.db.readAtom(p, r.id, seq)
	if err != nil {
		return chain.Hash{}, err
	}
	return a.Head, nil
}

// lineageIntent returns default-key intent in with its lineage's key
// (lineage.Intent), or in itself.
func (a *Atom) lineageIntent(ctx context.Context, in *ledger.Intent) (*ledger.Intent, error) {
	return lineage.Intent(ctx, (*capView)(a.run), a.seq, a.Branch(), in, (*ledgerView)(a.run.db))
}

// actionsAt is lineage.Run's Actions: atom seq's actions (committed or in
// flight) at call index, maybe more; the ledger loaded.
func (r *Run) actionsAt(ctx context.Context, seq uint64, index uint32) ([]ledger.Fingerprint, error) {
	r.mu.Lock()
	last := r.mu.lastSeq
	var fps []ledger.Fingerprint
	switch {
	case seq <= r.base || seq > last+1:
		r.mu.Unlock()
		return nil, nil
	case seq == last+1: // the atom in flight: running now, or interrupted by a crash
		if at := r.mu.atom; at != nil {
			at.mu.Lock()
			for _, x := range at.mu.actions {
				if x.index == index {
					fps = append(fps, x.fp)
				}
			}
			at.mu.Unlock()
		}
		for _, x := range r.interruptedLocked(seq) {
			if x.Index == index {
				fps = append(fps, x.FP)
			}
		}
	}
	r.mu.Unlock()
	if seq <= last {
		var err error
		if _, fps, err = r.committedActions(ctx, seq, r.db.decoder(false), nil); err != nil {
			return nil, err
		}
	}
	return fps, r.db.waitLedger(ctx)
}
