package engine

// The run as the capabilities see it: capView, the one adapter of a run,
// is a runview.Run and what history, lineage and saga (through
// rollback.go's rollbackAtom) ask of a run beyond it; histStore is the
// DB as internal/history reads a run's earlier state and internal/runstate
// builds its frame after a restart.

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/checkpoint"
	"github.com/continuumdb/continuum/internal/history"
	"github.com/continuumdb/continuum/internal/lineage"
	"github.com/continuumdb/continuum/internal/runstate"
	"github.com/continuumdb/continuum/internal/runview"
	"github.com/continuumdb/continuum/internal/snapindex"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
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
	if r.mu.gone != nil || r.mu.frameSeq <= r.base || r.mu.frameSeq > seq {
		return nil, 0, chain.Hash{}
	}
	return runstate.ReadFile((*histStore)(r.db), r.restartLocked(), seq)
}

// histStore is the DB as package internal/history's Store and
// internal/runstate's Core.
type histStore DB

var (
	_ history.Store = (*histStore)(nil)
	_ runstate.Core = (*histStore)(nil)
)

func (s *histStore) db() *DB { return (*DB)(s) }

func (s *histStore) Snapshots(ctx context.Context) (*snapshot.Store, error) {
	return s.db().usableSnapshots(ctx)
}

func (s *histStore) Mismatch(st *snapshot.Store, run string, seq uint64, err error) {
	s.snaps.Mismatch(st, run, seq, err)
}

func (s *histStore) ScanPositions(ctx context.Context, run string, base, n uint64) ([]wal.Pos, error) {
	return s.snaps.ScanPositions(ctx, run, base, n)
}

func (s *histStore) ReadAtom(p wal.Pos, run string, seq uint64) (*record.Record, error) {
	return s.db().readAtom(p, run, seq)
}

func (s *histStore) Apply(f *frame.Frame, a *record.Record) error {
	return s.db().applyAtomBody(f, a, s.db().segmentFile)
}

func (s *histStore) LogDir() string { return s.db().path(layout.WALDir) }
func (s *histStore) Warn(msg string, args ...any) {
	s.logger.Log(context.Background(), slog.LevelWarn, msg, args...)
}

// SnapshotFrame decodes the frame of snap, the run's snapshot at seq: a
// plain one (the raw encoding, reassembled from the store's chunks, whose
// hashes the store checked) is decoded in place, without a copy; an
// opaque one is decompressed (and opened, in an encrypted store) as a
// frame file's is. A plain snapshot in an encrypted store, or one over
// frame.MaxDecompressedSize (what no frame file's frame may decompress
// to), is damage.
func (s *histStore) SnapshotFrame(snap *snapshot.Snapshot, run string, seq uint64) (*frame.Frame, error) {
	where := "snapshot of run " + run
	if !snap.Plain {
		return s.db().decodeFrame(snap.Frame, run, seq, where)
	}
	if s.sealer != nil {
		return nil, record.Corruptf(where, "frame: stored in the clear in an encrypted store")
	}
	if len(snap.Frame) > frame.MaxDecompressedSize {
		return nil, record.Corruptf(where, "frame: %d bytes, over the %d-byte limit", len(snap.Frame), frame.MaxDecompressedSize)
	}
	return layout.DecodeRawFrame(snap.Frame, where) // the store's buffer, ours alone
}

func (s *histStore) ReadFrameFile(run string) (string, []byte, error) {
	name := s.db().frameFileName(run)
	b, err := layout.ReadFile(s.fs, name)
	return name, b, err
}

func (s *histStore) DecodeFrame(b []byte, run string, seq uint64, where string) (*frame.Frame, error) {
	return s.db().decodeFrame(b, run, seq, where)
}

// ApplyReplayed names the log's directory for damage: an atom replayed at
// Open keeps its body alone, not its segment.
func (s *histStore) ApplyReplayed(f *frame.Frame, a *record.Record) error {
	return s.db().applyAtomBody(f, a, func(uint64) string { return s.LogDir() })
}

// Rebuild builds run's frame at seq last from the log alone, from f, its
// frame at base (checkpoint.ReplayRun). It reads the whole log.
func (s *histStore) Rebuild(run string, base uint64, f *frame.Frame, last uint64, head chain.Hash) (*frame.Frame, error) {
	db := s.db()
	dec := db.decoder(false)
	dec.Skip = func(k record.Kind, id []byte) bool { return k != record.KindAtom || string(id) != run }
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		return nil, fmt.Errorf("engine: rebuild frame of run %q: %w", run, err)
	}
	defer c.Close()
	err = checkpoint.ReplayRun(c, run, base, last, head, s.LogDir(), db.segmentFile,
		func(a *record.Record) error { return db.applyAtomBody(f, a, db.segmentFile) })
	if err != nil {
		return nil, err
	}
	return f, nil // with no atom after base (a fork with none of its own), f is the frame
}

func (s *histStore) FrameRebuilt(run, why string) {
	s.counters.framesRebuilt.Add(1)
	s.logger.Warn("engine: frame file not used; rebuilding the run's frame from the log",
		"run", run, "file", s.db().frameFileName(run), "reason", why)
}

// readAtom reads the atom record at p and checks that it is run's atom at
// seq.
func (db *DB) readAtom(p wal.Pos, run string, seq uint64) (*record.Record, error) {
	return snapindex.ReadAtom(db.log, db.segmentFile, db.sealer, p, run, seq)
}
