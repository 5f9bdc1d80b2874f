package engine

// Reading through the snapshot store, which is derived from the log and may
// be damaged, stale, missing or failed: every value it gives (a snapshot's
// head, an atom-index position) is checked against the log before use, a
// mismatch is served from the log, counted and fails the store until the
// next Open, and whatever it cannot give is found in the log itself
// (docs/DESIGN.md, "Crash safety, operation by operation", the snapshot
// store).

import (
	"context"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/snapindex"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// errNotThisAtom is the mismatch of a position that points at a record
// other than the atom it is meant for.
var errNotThisAtom = snapindex.ErrNotThisAtom

// readAtom reads the atom record at p and checks that it is run's atom at
// seq.
func (db *DB) readAtom(p wal.Pos, run string, seq uint64) (*record.Record, error) {
	return snapindex.ReadAtom(db.log, db.segmentFile, db.sealer, p, run, seq)
}

// stateFromSnapshot builds frame(seq) from the nearest snapshot at or below
// seq and the deltas after it, checking each value against the log. The
// run's frame file, at fileSeq when StateAt looked, is one of the
// snapshots: a checkpoint writes the newest frame there and not again in
// the store (captureLocked). ok is false when the store cannot serve it
// (none usable, or a value failed its check, which is reported); err is set
// only for ctx's end or damage of the log itself.
func (r *Run) stateFromSnapshot(ctx context.Context, seq, indexed, fileSeq uint64, mem []wal.Pos) (f *frame.Frame, ok bool, err error) {
	db := r.db
	snaps, err := db.usableSnapshots(ctx)
	if snaps == nil || err != nil {
		return nil, false, err
	}
	mismatch := func(at uint64, err error) (*frame.Frame, bool, error) {
		db.snaps.Mismatch(snaps, r.id, at, err)
		return nil, false, nil
	}
	snap, base, err := snapindex.Nearest(snaps, r.id, r.base, seq)
	if err != nil {
		return mismatch(base, err)
	}
	var file *frame.Frame // the frame file's frame at base, if it is the nearest
	var fileHead chain.Hash
	if fileSeq > base && fileSeq <= seq {
		if ff, at, head := r.frameFileBase(seq); ff != nil && at > base {
			snap, file, fileHead, base = nil, ff, head, at
		}
	}
	// Positions of base..seq (base itself to check the snapshot's head):
	// those up to indexed are in the store, the rest in memory
	// (mem[i] is the atom indexed+1+i).
	from := max(base, r.base+1)
	pos, bad, err := snapindex.Positions(snaps, r.id, from, seq, indexed, mem)
	switch {
	case bad != nil:
		return mismatch(from, bad)
	case err != nil:
		return nil, false, err
	}
	if snap == nil && file == nil {
		if f, err = r.baseFrame(ctx); err != nil {
			return nil, false, err
		}
	}
	for i, p := range pos {
		at := from + uint64(i)
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		a, err := db.readAtom(p, r.id, at)
		if err != nil {
			if at <= indexed {
				return mismatch(at, fmt.Errorf("atom index: %w", err))
			}
			return nil, false, fmt.Errorf("engine: run %q seq %d: %w", r.id, at, err)
		}
		if snap != nil && at == base {
			if chain.Hash(snap.Head) != a.Head {
				return mismatch(base, fmt.Errorf("snapshot head %x, the log's %x", snap.Head[:8], a.Head[:8]))
			}
			if f, err = db.decodeSnapshotFrame(snap, r.id, base, "snapshot of run "+r.id); err != nil {
				return mismatch(base, err)
			}
			continue
		}
		if file != nil && at == base {
			if fileHead != a.Head {
				// CHECKPOINT and the log disagree (the file carries the
				// head CHECKPOINT names): the log decides.
				db.logger.Warn("engine: a frame file's head is not the log's; StateAt reads the log",
					"run", r.id, "seq", base, "file", fmt.Sprintf("%x", fileHead[:8]), "log", fmt.Sprintf("%x", a.Head[:8]))
				return nil, false, nil
			}
			f = file
			continue
		}
		if err := db.applyAtomBody(f, a, db.segmentFile); err != nil {
			return nil, false, err
		}
	}
	return f, true, nil
}

// decodeSnapshotFrame decodes the frame of snap, the run's snapshot at seq:
// a plain one (the raw encoding, reassembled from the store's chunks,
// whose hashes the store checked) is decoded in place, without a copy;
// an opaque one is decompressed (and opened, in an encrypted store) as a
// frame file's is. A plain snapshot in an encrypted store, or one over
// frame.MaxDecompressedSize (what no frame file's frame may decompress
// to), is damage.
func (db *DB) decodeSnapshotFrame(snap *snapshot.Snapshot, run string, seq uint64, where string) (*frame.Frame, error) {
	if !snap.Plain {
		return db.decodeFrame(snap.Frame, run, seq, where)
	}
	if db.sealer != nil {
		return nil, record.Corruptf(where, "frame: stored in the clear in an encrypted store")
	}
	if len(snap.Frame) > frame.MaxDecompressedSize {
		return nil, record.Corruptf(where, "frame: %d bytes, over the %d-byte limit", len(snap.Frame), frame.MaxDecompressedSize)
	}
	return layout.DecodeRawFrame(snap.Frame, where) // the store's buffer, ours alone
}

// stateFromLog builds frame(seq) from the deltas of atoms 1..seq, whose
// positions come from memory (after indexed) and from a scan of the log.
func (r *Run) stateFromLog(ctx context.Context, seq, indexed uint64, mem []wal.Pos) (*frame.Frame, error) {
	db := r.db
	pos, err := r.scannedPositions(ctx, min(seq, indexed))
	if err != nil {
		return nil, err
	}
	if pos, err = snapindex.AppendMem(pos, r.id, mem, indexed+1, seq, indexed); err != nil {
		return nil, err
	}
	f, err := r.baseFrame(ctx)
	if err != nil {
		return nil, err
	}
	for i, p := range pos {
		at := r.base + uint64(i) + 1
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a, err := db.readAtom(p, r.id, at)
		if errors.Is(err, errNotThisAtom) {
			return nil, &CorruptionError{File: db.path(layout.WALDir), Run: r.id, Seq: at, Reason: err.Error()}
		}
		if err != nil {
			return nil, fmt.Errorf("engine: run %q seq %d: %w", r.id, at, err)
		}
		if err := db.applyAtomBody(f, a, db.segmentFile); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// scannedPositions returns the log positions of the run's atoms base+1..n,
// scanning the log for them the first time (the scan is kept: a committed
// atom never moves). The caller owns the returned slice.
func (r *Run) scannedPositions(ctx context.Context, n uint64) ([]wal.Pos, error) {
	if n <= r.base {
		return nil, nil
	}
	n -= r.base // how many
	r.mu.Lock()
	have := r.mu.scanned
	r.mu.Unlock()
	if uint64(len(have)) >= n {
		return append([]wal.Pos(nil), have[:n]...), nil
	}
	pos, err := r.db.snaps.ScanPositions(ctx, r.id, r.base, n)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if len(pos) > len(r.mu.scanned) {
		r.mu.scanned = pos
	}
	r.mu.Unlock()
	return append([]wal.Pos(nil), pos[:n]...), nil
}

// atomPosition returns the log position of the run's atom seq, one the
// atom index holds (1 <= seq <= indexedSeq): from the index if it is usable
// and points at that atom, else from a scan of the log.
func (r *Run) atomPosition(ctx context.Context, seq uint64) (wal.Pos, error) {
	db := r.db
	snaps, err := db.usableSnapshots(ctx)
	if err != nil {
		return wal.Pos{}, err
	}
	if snaps != nil {
		sp, err := snaps.Positions(r.id, seq, seq)
		if err == nil && len(sp) == 1 {
			p := sp[0]
			if _, err = db.readAtom(p, r.id, seq); err == nil {
				return p, nil
			}
		}
		if err == nil {
			err = fmt.Errorf("%d positions for one seq", len(sp))
		}
		db.snaps.Mismatch(snaps, r.id, seq, fmt.Errorf("atom index: %w", err))
	}
	pos, err := r.scannedPositions(ctx, seq)
	if err != nil {
		return wal.Pos{}, err
	}
	return pos[seq-r.base-1], nil
}

// frameFileBase reads the run's frame file for StateAt(seq): its frame, seq
// and head when it is sound (frameFileLocked's checks) and at or below seq;
// nil when it is not (moved past seq by a checkpoint since, missing or
// damaged: materializeLocked rebuilds it when the run next needs it).
func (r *Run) frameFileBase(seq uint64) (*frame.Frame, uint64, chain.Hash) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.gone != nil || r.mu.frameSeq <= r.base || r.mu.frameSeq > seq {
		return nil, 0, chain.Hash{}
	}
	f, at, head, _, why, err := r.frameFileLocked()
	if err != nil || why != "" || f == nil || at <= r.base || at > seq {
		return nil, 0, chain.Hash{}
	}
	return f, at, head
}
