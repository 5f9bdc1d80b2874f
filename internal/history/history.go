package history

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/runview"
	"github.com/continuumdb/continuum/internal/snapindex"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// Store is the store as the reader sees it (see the package's doc).
type Store interface {
	Snapshots(ctx context.Context) (*snapshot.Store, error)
	Mismatch(s *snapshot.Store, run string, seq uint64, err error)
	ScanPositions(ctx context.Context, run string, base, n uint64) ([]wal.Pos, error)
	ReadAtom(p wal.Pos, run string, seq uint64) (*record.Record, error)
	SnapshotFrame(snap *snapshot.Snapshot, run string, seq uint64) (*frame.Frame, error)
	Apply(f *frame.Frame, a *record.Record) error
	LogDir() string
	Warn(msg string, args ...any)
}

// Run is one run as the reader sees it (see the package's doc).
type Run interface {
	runview.Run
	BaseFrame(ctx context.Context) (*frame.Frame, error)
	FrameFile(seq uint64) (*frame.Frame, uint64, chain.Hash)
	Scanned() *Scanned
}

// Scanned is a run's cache of the positions of its atoms Base+1..,
// found by a scan of the log when the snapshot store could not give them.
// The zero Scanned is empty; it is safe for concurrent use.
type Scanned struct {
	mu  sync.Mutex
	pos []wal.Pos // replaced, never changed in place
}

// State builds the state of run r at seq (r.Base() < seq < its last seq)
// from the nearest usable snapshot or frame file and the deltas after it,
// or else from the log.
func State(ctx context.Context, st Store, r Run, seq, indexed, fileSeq uint64, mem []wal.Pos) (*frame.Frame, error) {
	f, ok, err := fromSnapshot(ctx, st, r, seq, indexed, fileSeq, mem)
	if err != nil || ok {
		return f, err
	}
	return fromLog(ctx, st, r, seq, indexed, mem)
}

// fromSnapshot builds frame(seq) from the nearest snapshot at or below seq
// and the deltas after it, checking each value against the log. The run's
// frame file, at fileSeq when the caller looked, is one of the snapshots:
// a checkpoint writes the newest frame there and not again in the store.
// ok is false when the store cannot serve it (none usable, or a value
// failed its check, which is reported); err is set only for ctx's end or
// damage of the log itself.
func fromSnapshot(ctx context.Context, st Store, r Run, seq, indexed, fileSeq uint64, mem []wal.Pos) (f *frame.Frame, ok bool, err error) {
	snaps, err := st.Snapshots(ctx)
	if snaps == nil || err != nil {
		return nil, false, err
	}
	id, runBase := r.ID(), r.Base()
	mismatch := func(at uint64, err error) (*frame.Frame, bool, error) {
		st.Mismatch(snaps, id, at, err)
		return nil, false, nil
	}
	snap, base, err := snapindex.Nearest(snaps, id, runBase, seq)
	if err != nil {
		return mismatch(base, err)
	}
	var file *frame.Frame // the frame file's frame at base, if it is the nearest
	var fileHead chain.Hash
	if fileSeq > base && fileSeq <= seq {
		if ff, at, head := r.FrameFile(seq); ff != nil && at > base {
			snap, file, fileHead, base = nil, ff, head, at
		}
	}
	// Positions of base..seq (base itself to check the snapshot's head):
	// those up to indexed are in the store, the rest in memory.
	from := max(base, runBase+1)
	pos, bad, err := snapindex.Positions(snaps, id, from, seq, indexed, mem)
	switch {
	case bad != nil:
		return mismatch(from, bad)
	case err != nil:
		return nil, false, err
	}
	if snap == nil && file == nil {
		if f, err = r.BaseFrame(ctx); err != nil {
			return nil, false, err
		}
	}
	for i, p := range pos {
		at := from + uint64(i)
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		a, err := st.ReadAtom(p, id, at)
		if err != nil {
			if at <= indexed {
				return mismatch(at, fmt.Errorf("atom index: %w", err))
			}
			return nil, false, fmt.Errorf("engine: run %q seq %d: %w", id, at, err)
		}
		if snap != nil && at == base {
			if chain.Hash(snap.Head) != a.Head {
				return mismatch(base, fmt.Errorf("snapshot head %x, the log's %x", snap.Head[:8], a.Head[:8]))
			}
			if f, err = st.SnapshotFrame(snap, id, base); err != nil {
				return mismatch(base, err)
			}
			continue
		}
		if file != nil && at == base {
			if fileHead != a.Head {
				// CHECKPOINT and the log disagree (the file carries the
				// head CHECKPOINT names): the log decides.
				st.Warn("engine: a frame file's head is not the log's; StateAt reads the log",
					"run", id, "seq", base, "file", fmt.Sprintf("%x", fileHead[:8]), "log", fmt.Sprintf("%x", a.Head[:8]))
				return nil, false, nil
			}
			f = file
			continue
		}
		if err := st.Apply(f, a); err != nil {
			return nil, false, err
		}
	}
	return f, true, nil
}

// fromLog builds frame(seq) from the deltas of atoms Base+1..seq, whose
// positions come from memory (after indexed) and from a scan of the log.
func fromLog(ctx context.Context, st Store, r Run, seq, indexed uint64, mem []wal.Pos) (*frame.Frame, error) {
	id, base := r.ID(), r.Base()
	pos, err := r.Scanned().positions(ctx, st, id, base, min(seq, indexed))
	if err != nil {
		return nil, err
	}
	if pos, err = snapindex.AppendMem(pos, id, mem, indexed+1, seq, indexed); err != nil {
		return nil, err
	}
	f, err := r.BaseFrame(ctx)
	if err != nil {
		return nil, err
	}
	for i, p := range pos {
		at := base + uint64(i) + 1
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a, err := st.ReadAtom(p, id, at)
		if errors.Is(err, snapindex.ErrNotThisAtom) {
			return nil, &record.CorruptionError{File: st.LogDir(), Run: id, Seq: at, Reason: err.Error()}
		}
		if err != nil {
			return nil, fmt.Errorf("engine: run %q seq %d: %w", id, at, err)
		}
		if err := st.Apply(f, a); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// positions returns the log positions of the run's atoms base+1..n,
// scanning the log for them the first time (the scan is kept: a committed
// atom never moves). The caller owns the returned slice.
func (s *Scanned) positions(ctx context.Context, st Store, run string, base, n uint64) ([]wal.Pos, error) {
	if n <= base {
		return nil, nil
	}
	n -= base // how many
	s.mu.Lock()
	have := s.pos
	s.mu.Unlock()
	if uint64(len(have)) >= n {
		return append([]wal.Pos(nil), have[:n]...), nil
	}
	pos, err := st.ScanPositions(ctx, run, base, n)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(pos) > len(s.pos) {
		s.pos = pos
	}
	s.mu.Unlock()
	return append([]wal.Pos(nil), pos[:n]...), nil
}

// AtomPosition returns the log position of run r's atom seq, one the atom
// index holds (Base < seq <= indexed): from the index if it is usable and
// points at that atom, else from a scan of the log.
func AtomPosition(ctx context.Context, st Store, r Run, seq uint64) (wal.Pos, error) {
	id, base := r.ID(), r.Base()
	if seq <= base {
		return wal.Pos{}, fmt.Errorf("engine: run %q has no atom of its own at seq %d (its atoms start after seq %d)", id, seq, base)
	}
	snaps, err := st.Snapshots(ctx)
	if err != nil {
		return wal.Pos{}, err
	}
	if snaps != nil {
		sp, err := snaps.Positions(id, seq, seq)
		if err == nil && len(sp) == 1 {
			p := sp[0]
			if _, err = st.ReadAtom(p, id, seq); err == nil {
				return p, nil
			}
		}
		if err == nil {
			err = fmt.Errorf("%d positions for one seq", len(sp))
		}
		st.Mismatch(snaps, id, seq, fmt.Errorf("atom index: %w", err))
	}
	pos, err := r.Scanned().positions(ctx, st, id, base, seq)
	if err != nil {
		return wal.Pos{}, err
	}
	return pos[seq-base-1], nil
}
