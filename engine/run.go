package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// Run is one agent execution: an ordered, hash-chained sequence of atoms.
// It is safe for concurrent use; at most one atom runs at a time.
type Run struct {
	db        *DB
	id        string
	nonce     chain.Nonce
	createdAt time.Time

	// created is closed once the run's creation record is durable (nil for
	// runs recovered from the store); createErr is set before that.
	created   chan struct{}
	createErr error

	mu struct {
		sync.Mutex
		lastSeq uint64
		head    chain.Hash // h(lastSeq)

		// frame is the frame as of lastSeq, or nil until first needed after a
		// restart; then frameBase and pending rebuild it.
		frame *frame.Frame
		// pending holds the atoms replayed from the log tail that are not yet
		// applied to a frame, ascending by seq. Owned by the run.
		pending []pendingAtom

		frameSeq   uint64    // seq of the run's frame file on disk (0: none)
		indexedSeq uint64    // atoms up to here have their log position in Pebble
		positions  []wal.Pos // positions of atoms indexedSeq+1 .. lastSeq
		snapSeq    uint64    // latest snapshot handed to Pebble
		// windowFirst is the snapshot the retention policy keeps for the
		// current window (see snapshotSpan); after a restart, the latest.
		windowFirst uint64
		snapTime    time.Time
		snapQueued  bool
		// deltaBytes counts the encoded deltas since the last snapshot, and
		// snapFrameBytes is that snapshot's encoded frame size: together
		// they keep snapshots of large frames from amplifying writes.
		deltaBytes, snapFrameBytes int64

		ckptSeq  uint64 // latest chain checkpoint written
		ckptHead chain.Hash
		ckptTime time.Time

		atom *Atom // the running atom, if any
		// inflight lists the actions of the atom at lastSeq+1 as found in the
		// log after a restart (an atom interrupted by a crash).
		inflight []inflightAction
		// interruptedSeq is the seq of an atom that was running at the crash,
		// 0 if none. Cleared when that seq commits.
		interruptedSeq uint64
		broken         error // set when the in-memory state can no longer be trusted
	}
}

type pendingAtom struct {
	seq  uint64
	body []byte // compressed atom body, owned
}

func newRun(db *DB, id string, nonce chain.Nonce, created time.Time) *Run {
	r := &Run{db: db, id: id, nonce: nonce, createdAt: created}
	r.mu.head = db.hasher.Genesis(id, nonce)
	r.mu.frame = newFrame()
	now := time.Now()
	r.mu.snapTime, r.mu.ckptTime = now, now
	return r
}

func newFrame() *frame.Frame { return &frame.Frame{Memory: map[string][]byte{}} }

func (r *Run) waitCreated(ctx context.Context) error {
	if r.created == nil {
		return nil
	}
	select {
	case <-r.created:
		return r.createErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ID returns the run's id.
func (r *Run) ID() string { return r.id }

// LastSeq returns the seq of the last committed atom (0 if none).
func (r *Run) LastSeq() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.lastSeq
}

// Head returns the chain head h(LastSeq).
func (r *Run) Head() chain.Hash {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.head
}

// RunInfo describes a run.
type RunInfo struct {
	ID            string
	Created       time.Time
	LastSeq       uint64
	Head          chain.Hash
	SnapshotSeq   uint64 // latest snapshot in Pebble (0: none)
	CheckpointSeq uint64 // latest chain checkpoint
	Running       uint64 // seq of the atom running now, 0 if none
	// Interrupted is the seq of an atom that was running when the process
	// stopped, 0 if none. Its actions are listed by Run.Interrupted.
	Interrupted uint64
}

// Info returns a description of the run.
func (r *Run) Info() RunInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	info := RunInfo{
		ID: r.id, Created: r.createdAt, LastSeq: r.mu.lastSeq, Head: r.mu.head,
		SnapshotSeq: r.mu.snapSeq, CheckpointSeq: r.mu.ckptSeq, Interrupted: r.mu.interruptedSeq,
	}
	if r.mu.atom != nil {
		info.Running = r.mu.atom.seq
	}
	return info
}

// ActionState is the state of one action of an interrupted atom.
type ActionState struct {
	Index       uint32 // ledger.Intent.Index: a default key's index (see Atom)
	Fingerprint ledger.Fingerprint
	Status      ledger.Status // StatusIntent means in doubt
	Tool        string
	Key         string
	Idempotent  bool
}

// Interrupted reports the atom that was running when the process stopped:
// its seq (0 if there is none) and the actions it had started, with their
// state in the ledger. That seq is begun again by the next Begin; its
// certified actions return their results without running again, and its
// in-doubt ones follow the rules of Do.
func (r *Run) Interrupted(ctx context.Context) (uint64, []ActionState, error) {
	r.mu.Lock()
	seq := r.mu.interruptedSeq
	acts := append([]inflightAction(nil), r.mu.inflight...)
	r.mu.Unlock()
	if seq == 0 {
		return 0, nil, nil
	}
	if err := r.db.waitLedger(ctx); err != nil {
		return 0, nil, err
	}
	out := make([]ActionState, 0, len(acts))
	for _, a := range acts {
		st := ActionState{Index: a.index, Fingerprint: a.fp, Status: ledger.StatusIntent}
		if e, ok := r.db.ledger.Lookup(a.fp); ok {
			st.Status = e.Status
			if in, err := r.db.readIntent(e.IntentLoc); err == nil {
				st.Tool, st.Key, st.Idempotent = in.Tool, in.Key, in.Idempotent
			}
		}
		out = append(out, st)
	}
	return seq, out, nil
}

// State returns a copy of the run's frame as of LastSeq. The caller owns it.
func (r *Run) State() *frame.Frame {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.materializeLocked(); err != nil {
		r.db.logger.Error("engine: run state unavailable", "run", r.id, "err", err)
		return newFrame()
	}
	return r.mu.frame.Clone()
}

// StateE is State with an error: it reports a damaged frame file or log
// record instead of returning an empty frame.
func (r *Run) StateE() (*frame.Frame, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.materializeLocked(); err != nil {
		return nil, err
	}
	return r.mu.frame.Clone(), nil
}

// materializeLocked builds the in-memory frame of a run recovered from the
// store: its frame file plus the atoms replayed from the log tail.
func (r *Run) materializeLocked() error {
	if r.mu.broken != nil {
		return r.mu.broken
	}
	if r.mu.frame != nil {
		return nil
	}
	f, seq, err := r.db.readFrameFile(r.id)
	if err != nil {
		return err
	}
	for _, p := range r.mu.pending {
		if p.seq <= seq {
			continue
		}
		if p.seq != seq+1 {
			return &CorruptionError{File: r.db.path(walDir), Run: r.id, Seq: p.seq,
				Reason: fmt.Sprintf("the log tail resumes at seq %d but the frame file ends at seq %d", p.seq, seq)}
		}
		if err := r.db.applyAtomBody(f, r.id, p.seq, p.body); err != nil {
			return err
		}
		seq = p.seq
	}
	if seq != r.mu.lastSeq {
		return &CorruptionError{File: r.db.frameFileName(r.id), Run: r.id, Seq: seq,
			Reason: fmt.Sprintf("frame rebuilt up to seq %d, but the run's last seq is %d", seq, r.mu.lastSeq)}
	}
	r.mu.frame = f
	r.mu.pending = nil
	return nil
}

// StateAt returns the frame as of seq: the nearest snapshot at or below seq
// plus the deltas after it. seq 0 is the empty frame.
func (r *Run) StateAt(ctx context.Context, seq uint64) (*frame.Frame, error) {
	if err := r.db.checkOpen(); err != nil {
		return nil, err
	}
	r.mu.Lock()
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
	indexed := r.mu.indexedSeq
	mem := append([]wal.Pos(nil), r.mu.positions...)
	r.mu.Unlock()
	if seq == 0 {
		return newFrame(), nil
	}

	snaps, err := r.db.snapshots(ctx)
	if err != nil {
		return nil, err
	}
	f, base := newFrame(), uint64(0)
	s, err := snaps.AtOrBelow(r.id, seq)
	switch {
	case err == nil:
		if f, err = r.db.decodeFrame(s.Frame, "snapshot of run "+r.id); err != nil {
			return nil, err
		}
		base = s.Seq
	case errors.Is(err, snapshot.ErrNotFound):
	default:
		return nil, fmt.Errorf("engine: run %q: snapshot at or below %d: %w", r.id, seq, err)
	}
	// Positions of base+1..seq: those up to indexed are in Pebble, the rest
	// in memory (positions[i] is the atom indexed+1+i).
	var pos []wal.Pos
	if hi := min(seq, indexed); base < hi {
		sp, err := snaps.Positions(r.id, base+1, hi)
		if err != nil {
			return nil, fmt.Errorf("engine: run %q: atom index %d..%d: %w", r.id, base+1, hi, err)
		}
		for _, p := range sp {
			pos = append(pos, wal.Pos{Segment: p.Segment, Offset: p.Offset})
		}
	}
	for s := max(base, indexed) + 1; s <= seq; s++ {
		i := s - indexed - 1
		if i >= uint64(len(mem)) {
			return nil, fmt.Errorf("engine: run %q: no log position for seq %d", r.id, s)
		}
		pos = append(pos, mem[i])
	}
	for i, p := range pos {
		want := base + 1 + uint64(i)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, err := r.db.log.ReadAt(p)
		if err != nil {
			return nil, fmt.Errorf("engine: run %q seq %d: %w", r.id, want, err)
		}
		a, err := decodeAtomRecord(rec)
		if err != nil || rec[0] != kindAtom || a.run != r.id || a.seq != want {
			return nil, &CorruptionError{File: r.db.path(walDir), Run: r.id, Seq: want,
				Reason: fmt.Sprintf("the atom index points at %v, which holds no atom of this run and seq", p)}
		}
		if err := r.db.applyAtomBody(f, r.id, want, a.body); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Begin starts the next atom of the run, at seq LastSeq+1. Only one atom
// runs at a time per run: while one is running Begin fails with
// ErrAtomInProgress. If the previous process stopped in the middle of this
// seq, its actions are still in the ledger (see Interrupted).
func (r *Run) Begin(ctx context.Context) (*Atom, error) {
	if err := r.db.checkOpen(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.db.startDirSyncs() // the atom's first write will wait for them
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.atom != nil {
		return nil, fmt.Errorf("%w: run %q seq %d", ErrAtomInProgress, r.id, r.mu.atom.seq)
	}
	if err := r.materializeLocked(); err != nil {
		return nil, err
	}
	a := &Atom{run: r, seq: r.mu.lastSeq + 1, resumed: r.mu.interruptedSeq == r.mu.lastSeq+1}
	r.mu.atom = a
	return a, nil
}
