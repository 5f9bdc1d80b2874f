package engine

// A run's state: its frame built on first need after a restart
// (internal/runstate), and its state at an earlier seq (StateAt,
// internal/history).

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/history"
	"github.com/continuumdb/continuum/internal/lineage"
	"github.com/continuumdb/continuum/internal/runstate"
	"github.com/continuumdb/continuum/wal"
)

// materializeLocked builds the in-memory frame of a run recovered from the
// store (internal/runstate: its frame file, the atoms after it through
// the atom index, the replayed tail; else the log). A frame file not used
// is forgotten: the next engine checkpoint writes it again.
func (r *Run) materializeLocked() error {
	if r.mu.gone != nil {
		return r.mu.gone
	}
	if r.mu.broken != nil {
		return r.mu.broken
	}
	if r.mu.frame != nil {
		return nil
	}
	b, err := runstate.Materialize(r.db.stateStore(), r.restartLocked())
	if b.Rebuilt {
		r.mu.book.Rebuilt()
	}
	if err != nil {
		return err
	}
	r.mu.book.FileRead(b.Sum, b.SumSeq) // the frame is the file's: it can be dropped and read back (framecache.go)
	if err := r.db.eraser.CheckSealed(r.id, b.Frame); err != nil {
		return err
	}
	r.mu.frame = b.Frame
	r.mu.pending = nil
	return nil
}

// restartLocked is what internal/runstate reads of the run (r.mu held).
func (r *Run) restartLocked() *runstate.Run {
	pending := make([]runstate.Atom, len(r.mu.pending))
	for i, p := range r.mu.pending {
		pending[i] = runstate.Atom{Seq: p.seq, Head: p.head, Body: p.body}
	}
	return &runstate.Run{ID: r.id, Base: r.base, LastSeq: r.mu.lastSeq, Head: r.mu.head, Pending: pending,
		FrameSeq: r.mu.book.FrameSeq, FrameHead: r.mu.book.FrameHead, FrameSum: r.mu.book.FrameSum, FrameSumSeq: r.mu.book.FrameSumSeq,
		CkptRowHead: r.mu.book.CkptRowHead, IndexedSeq: r.mu.book.IndexedSeq,
		BaseFrame: func() (*frame.Frame, error) { return r.baseFrame(context.Background()) }}
}

// StateAt returns the frame as of seq: the nearest snapshot at or below seq
// (in the snapshot store, or the run's frame file, which serves as its
// newest) plus the deltas after it, every value checked against the log; or, when the store cannot serve it (failed, missing,
// damaged), the deltas of atoms 1..seq from the log. seq 0 is the empty
// frame.
func (r *Run) StateAt(ctx context.Context, seq uint64) (*frame.Frame, error) {
	if err := r.db.checkOpen(); err != nil {
		return nil, err
	}
	f, err := r.stateAt(ctx, seq)
	if err != nil {
		return nil, err
	}
	return r.db.eraser.Open(f)
}

// stateAt is StateAt for the engine's own use: it also serves the final
// checkpoint of Close (a fork's frame is built from its parent's state).
func (r *Run) stateAt(ctx context.Context, seq uint64) (*frame.Frame, error) {
	r.mu.Lock()
	if err := r.mu.gone; err != nil {
		r.mu.Unlock()
		return nil, err
	}
	last := r.mu.lastSeq
	if seq > last {
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: run %q seq %d, last seq %d", ErrSeqOutOfRange, r.id, seq, last)
	}
	if seq == last {
		defer r.mu.Unlock()
		if err := r.materializeLocked(); err != nil {
			return nil, err
		}
		return r.mu.frame.Clone(), nil
	}
	indexed, fileSeq := r.mu.book.IndexedSeq, r.mu.book.FrameSeq
	mem := append([]wal.Pos(nil), r.mu.book.Positions...)
	r.mu.Unlock()
	switch {
	case seq < r.base:
		return lineage.ParentState(ctx, (*capView)(r), seq) // the parent's history
	case seq == r.base:
		return r.baseFrame(ctx)
	}
	return history.State(ctx, r.db.stateStore(), (*capView)(r), seq, indexed, fileSeq, mem)
}
