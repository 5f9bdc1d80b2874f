package engine

// The run as the capabilities see it: capView, the one adapter of a run,
// is a runview.Run and what history, lineage and saga (through
// rollback.go's rollbackAtom) ask of a run beyond it; stateStore gives
// internal/history and internal/runstate the store's files
// (runstate.Store).

import (
	"context"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/history"
	"github.com/continuumdb/continuum/internal/lineage"
	"github.com/continuumdb/continuum/internal/runstate"
	"github.com/continuumdb/continuum/internal/runview"
	"github.com/continuumdb/continuum/internal/snapindex"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// capView is a run as a capability's runview.Run, history.Run and
// lineage.Run. Its methods take the run's lock themselves.
type capView Run

var (
	_ runview.Run = (*capView)(nil)
	_ history.Run = (*capView)(nil)
	_ lineage.Run = (*capView)(nil)
)

func (v *capView) ID() string   { return v.id }
func (v *capView) Base() uint64 { return v.base }

func (v *capView) ChainHead() (uint64, chain.Hash, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return (*Run)(v).chainHeadLocked()
}

func (v *capView) StateAt(ctx context.Context, seq uint64) (*frame.Frame, error) {
	return (*Run)(v).stateAt(ctx, seq)
}

func (v *capView) BaseFrame(ctx context.Context) (*frame.Frame, error) {
	return (*Run)(v).baseFrame(ctx)
}

// Link, Actions and Where make it a lineage.Run.
func (v *capView) Link() (string, uint64, lineage.Run) {
	if p := v.parentRef.Load(); p != nil {
		return v.parent, v.base, (*capView)(p)
	}
	return v.parent, v.base, nil
}

func (v *capView) Actions(ctx context.Context, seq uint64, index uint32) ([]ledger.Fingerprint, error) {
	return (*Run)(v).actionsAt(ctx, seq, index)
}

func (v *capView) Where() (string, string) {
	return v.db.path(layout.WALDir), v.db.path(layout.CheckpointName)
}

func (v *capView) Scanned() *history.Scanned { return &v.scanned }

// FrameFile reads the run's frame file for a state at seq
// (runstate.ReadFile); nil when the run is gone.
func (v *capView) FrameFile(seq uint64) (*frame.Frame, uint64, chain.Hash) {
	r := (*Run)(v)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.gone != nil || r.mu.book.FrameSeq <= r.base || r.mu.book.FrameSeq > seq {
		return nil, 0, chain.Hash{}
	}
	return runstate.ReadFile(r.db.stateStore(), r.restartLocked(), seq)
}

// stateStore is the DB as internal/history's Store and internal/runstate's
// Core: the store's files, given as values.
func (db *DB) stateStore() *runstate.Store {
	return &runstate.Store{FS: db.fs, Dir: db.dir, Log: db.log, Snaps: db.snaps, Sealer: db.sealer, Comp: db.comp,
		File: db.segmentFile, Decoder: db.decoder(false), Decode: db.decodeFrame, Journal: journalCore{db},
		Logger: db.logger, Rebuilt: &db.counters.framesRebuilt}
}

// readAtom reads the atom record at p and checks that it is run's atom at
// seq.
func (db *DB) readAtom(p wal.Pos, run string, seq uint64) (*record.Record, error) {
	return snapindex.ReadAtom(db.log, db.segmentFile, db.sealer, p, run, seq)
}
