package engine

// A run's state: its frame built on first need after a restart (from its
// frame file, the atoms after it in the atom index or the log, and the
// tail Open replayed), and its state at an earlier seq (StateAt).

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/history"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
	"github.com/zeebo/blake3"
)

// materializeLocked builds the in-memory frame of a run recovered from the
// store: its frame file plus the atoms replayed from the log tail. A frame
// file that is missing, damaged, of another run or store, or at a seq and
// head other than CHECKPOINT and the tail name, is not used: the frame is
// then built from the replayed atoms when they reach back to seq 1, and
// otherwise from the whole log (rebuildFrame), and the next engine
// checkpoint writes the frame file again.
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
	f, seq, head, sum, why, err := r.frameFileLocked()
	if err != nil {
		return err
	}
	i := 0
	for i < len(r.mu.pending) && r.mu.pending[i].seq <= seq {
		i++
	}
	rest := r.mu.pending[i:]
	fileSeq := seq // the frame is the file's up to here
	if end := r.mu.lastSeq - uint64(len(rest)); why == "" && seq < end && (len(rest) == 0 || rest[0].seq == end+1) {
		// A checkpoint left the run past its frame file (maxTailAtoms):
		// the atoms between them come from the log, at the positions the
		// atom index holds.
		if g, ok := r.tailFromIndexLocked(f, seq, head, end, r.headBeforeLocked(rest)); ok {
			f, seq = g, end
		} else {
			why = fmt.Sprintf("it holds seq %d and the atom index cannot give seqs %d..%d", seq, seq+1, end)
		}
	}
	if why == "" && len(rest) > 0 && rest[0].seq != seq+1 || why == "" && len(rest) == 0 && seq != r.mu.lastSeq {
		why = fmt.Sprintf("it holds seq %d, the log resumes after seq %d", seq, r.mu.lastSeq-uint64(len(rest)))
	}
	if why != "" {
		r.db.noteFrameRebuilt(r.id, why)
		r.mu.frameSeq, r.mu.frameHead = 0, chain.Hash{} // the next checkpoint writes it again
		r.mu.frameSumSeq = 0
		base, err := r.baseFrame(context.Background())
		if err != nil {
			return err
		}
		f, seq, rest = base, r.base, r.mu.pending
		if len(rest) == 0 || rest[0].seq != r.base+1 {
			rf, err := r.db.rebuildFrame(r.id, r.base, base, r.mu.lastSeq-uint64(len(rest)), r.headBeforeLocked(rest))
			if err != nil {
				return err
			}
			f, seq = rf, r.mu.lastSeq-uint64(len(rest))
		}
	}
	for _, p := range rest {
		if p.seq != seq+1 {
			return &CorruptionError{File: r.db.path(layout.WALDir), Run: r.id, Seq: seq + 1,
				Reason: fmt.Sprintf("the log tail resumes at seq %d after seq %d", p.seq, seq)}
		}
		if err := r.db.applyAtomBody(f, &record.Record{Kind: record.KindAtom, Run: r.id, Seq: p.seq, Body: p.body}, r.db.walDir); err != nil {
			return err
		}
		seq = p.seq
	}
	if seq != r.mu.lastSeq {
		return &CorruptionError{File: r.db.path(layout.WALDir), Run: r.id, Seq: seq + 1,
			Reason: fmt.Sprintf("frame rebuilt up to seq %d, but the run's last seq is %d", seq, r.mu.lastSeq)}
	}
	if why == "" && len(rest) == 0 && seq == fileSeq && seq > r.base {
		// The frame is the file's: it can be dropped and read back from it
		// (framecache.go).
		r.mu.frameSum, r.mu.frameSumSeq = sum, seq
	}
	if err := r.db.eraser.CheckSealed(r.id, f); err != nil {
		return err
	}
	r.mu.frame = f
	r.mu.pending = nil
	return nil
}

// tailFromIndexLocked applies to f, the run's frame at seq (its frame
// file's, whose head is head, or the run's base frame), the atoms
// seq+1..end, found through the atom index as StateAt finds them
// (internal/history): each position must hold the run's atom at that seq, the
// atom at seq (when seq is the run's own) must carry the file's head, and
// the atom at end the head the run has there (want). ok is false, and f must not
// be used, when the index cannot serve them (no usable snapshot store,
// one still indexing, a position that disagrees with the log, which is
// reported as a mismatch): the caller rebuilds from the log.
func (r *Run) tailFromIndexLocked(f *frame.Frame, seq uint64, head chain.Hash, end uint64, want chain.Hash) (_ *frame.Frame, ok bool) {
	db := r.db
	if end > r.mu.indexedSeq {
		return nil, false
	}
	snaps, err := db.usableSnapshots(context.Background()) // never waits for a run: see checkSnapshotGen
	if snaps == nil || err != nil {
		return nil, false
	}
	from := max(seq, r.base+1)
	pos, err := snaps.Positions(r.id, from, end)
	if err == nil && uint64(len(pos)) != end-from+1 {
		err = fmt.Errorf("%d positions for seqs %d..%d", len(pos), from, end)
	}
	mismatch := func(at uint64, err error) (*frame.Frame, bool) {
		db.snaps.Mismatch(snaps, r.id, at, err)
		return nil, false
	}
	if err != nil {
		return mismatch(from, fmt.Errorf("atom index %d..%d: %w", from, end, err))
	}
	for i, p := range pos {
		at := from + uint64(i)
		a, err := db.readAtom(p, r.id, at)
		if err != nil {
			return mismatch(at, fmt.Errorf("atom index: %w", err))
		}
		if at == seq {
			if a.Head != head {
				return mismatch(at, fmt.Errorf("the frame file's head %x, the log's %x", head[:8], a.Head[:8]))
			}
			continue
		}
		if at == end && a.Head != want {
			return mismatch(at, fmt.Errorf("the log's head %x, the run's %x", a.Head[:8], want[:8]))
		}
		if err := db.applyAtomBody(f, a, db.segmentFile); err != nil {
			return nil, false
		}
	}
	return f, true
}

// walDir names the log's directory, for damage to a record whose segment
// is not known (an atom replayed at Open, whose body alone is kept).
func (db *DB) walDir(uint64) string { return db.path(layout.WALDir) }

// headBeforeLocked returns the head of the atom just before the first of
// rest (the replayed atoms): CHECKPOINT's head of the run when rest is
// empty or starts right after it.
func (r *Run) headBeforeLocked(rest []pendingAtom) chain.Hash {
	if len(rest) == 0 {
		return r.mu.head
	}
	return r.mu.ckptRowHead
}

// frameFileLocked reads the run's frame file and checks it against what
// CHECKPOINT and the replayed tail say of the run: it returns the frame
// and its seq, or a reason not to use it (why != ""). A sound frame file
// of the run past the log's last seq of it is log damage (err): frame
// files are written only at seqs the log holds durably, so the log lost
// records (a segment deleted or cut short).
//
// head is the chain head the file names at seq, and sum BLAKE3 of the
// file, when it was read and used.
func (r *Run) frameFileLocked() (f *frame.Frame, seq uint64, head chain.Hash, sum [32]byte, why string, err error) {
	db := r.db
	name := db.frameFileName(r.id)
	b, err := layout.ReadFile(db.fs, name)
	if layout.NotExist(err) {
		if r.mu.frameSeq == 0 && (len(r.mu.pending) == 0 || r.mu.pending[0].seq == r.base+1) {
			f, err := r.baseFrame(context.Background()) // the run never had one
			return f, r.base, head, sum, "", err
		}
		return nil, 0, head, sum, "it is missing", nil
	}
	if err != nil {
		return nil, 0, head, sum, err.Error(), nil
	}
	ff, err := layout.ParseFrameFile(name, b)
	if err != nil {
		return nil, 0, head, sum, err.Error(), nil
	}
	if ff.Run != r.id {
		return nil, 0, head, sum, fmt.Sprintf("it holds run %q", ff.Run), nil
	}
	if ff.Seq > r.mu.lastSeq {
		return nil, 0, head, sum, "", &CorruptionError{File: db.path(layout.WALDir), Run: r.id, Seq: r.mu.lastSeq + 1,
			Reason: fmt.Sprintf("the log ends at seq %d of the run, but its frame file %s is at seq %d: records of the log are missing",
				r.mu.lastSeq, name, ff.Seq)}
	}
	// The head it names must be the log's at its seq: CHECKPOINT's for the
	// frame file it lists, a replayed atom's for a newer one.
	want, known := chain.Hash{}, false
	if ff.Seq == r.mu.frameSeq && r.mu.frameHead != (chain.Hash{}) {
		want, known = r.mu.frameHead, true
	}
	for _, p := range r.mu.pending {
		if p.seq == ff.Seq {
			want, known = p.head, true
		}
	}
	switch {
	case !known && ff.Seq != r.mu.frameSeq:
		return nil, 0, head, sum, fmt.Sprintf("it is at seq %d, CHECKPOINT names seq %d", ff.Seq, r.mu.frameSeq), nil
	case known && ff.Head != want:
		return nil, 0, head, sum, fmt.Sprintf("its head at seq %d is %x, the log's is %x", ff.Seq, ff.Head[:8], want[:8]), nil
	}
	// BLAKE3 of the file is its identity for the frame cache (a frame read
	// back later must come from these bytes). It is a third of the work
	// of a large file, and needs nothing of the decoding: a file of
	// parallelHashSize or more is hashed on a goroutine of its own while
	// the frame is decoded (both only read b), and a decoded frame is used
	// only once the sum is checked.
	var hashed chan struct{}
	if len(b) >= parallelHashSize {
		hashed = make(chan struct{})
		go func() {
			sum = blake3.Sum256(b)
			close(hashed)
		}()
	} else {
		sum = blake3.Sum256(b)
	}
	f, err = db.decodeFrame(ff.Frame, ff.Run, ff.Seq, name)
	if hashed != nil {
		<-hashed
	}
	if ff.Seq == r.mu.frameSumSeq && sum != r.mu.frameSum {
		return nil, 0, head, sum, fmt.Sprintf("it is not the file this process read or wrote at seq %d", ff.Seq), nil
	}
	if err != nil {
		return nil, 0, head, sum, err.Error(), nil
	}
	return f, ff.Seq, ff.Head, sum, "", nil
}

// parallelHashSize is the size from which frameFileLocked hashes a frame
// file beside decoding it: about 16 µs of BLAKE3, against a goroutine's
// few.
const parallelHashSize = 32 << 10

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
	indexed, fileSeq := r.mu.indexedSeq, r.mu.frameSeq
	mem := append([]wal.Pos(nil), r.mu.positions...)
	r.mu.Unlock()
	switch {
	case seq < r.base:
		p, err := r.parentRun()
		if err != nil {
			return nil, err
		}
		return p.stateAt(ctx, seq) // the parent's history
	case seq == r.base:
		return r.baseFrame(ctx)
	}
	return history.State(ctx, (*histStore)(r.db), (*capView)(r), seq, indexed, fileSeq, mem)
}
