package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/checkpoint"
	"github.com/continuumdb/continuum/internal/history"
	"github.com/continuumdb/continuum/internal/lifecycle"
	"github.com/continuumdb/continuum/internal/resumekey"
	"github.com/continuumdb/continuum/internal/runstate"
	"github.com/continuumdb/continuum/internal/saga"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
)

// Run is one agent execution: an ordered, hash-chained sequence of atoms.
// It is safe for concurrent use; at most one atom runs at a time.
//
// Nothing that only reads waits for the log's fsync: while a Commit or
// Fail waits for its group commit, LastSeq, Head, Info, State and StateAt
// return the last committed view, and the new atom appears in all of them
// at once, before its Commit returns.
type Run struct {
	db        *DB
	id        string
	nonce     chain.Nonce
	createdAt time.Time

	// parent is the run this one was forked from ("": none) and base the
	// seq it starts from: its own atoms are base+1.. (base is 0 for a run
	// that is no fork). baseHead is its chain's head at base: the fork
	// genesis. Immutable.
	parent    string
	parentRef atomic.Pointer[Run] // the run parent names, once built (set again by the reconciliation)
	base      uint64
	baseHead  chain.Hash

	// created is closed once the run's creation record is durable (nil for
	// runs recovered from the store); createErr is set before that.
	created   chan struct{}
	createErr error

	// scanned holds the positions of the run's atoms found by a scan of
	// the log when the snapshot store could not give them (its own lock;
	// internal/history).
	scanned history.Scanned

	// lastUse is db.useTick as of the run's last State or Begin: the
	// frame cache drops the least recently used frames first.
	lastUse atomic.Int64

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

		// book is the run's bookkeeping of its snapshots, frame file and
		// chain checkpoints (checkpoint.Book); its Positions are those of
		// atoms IndexedSeq+1 .. lastSeq.
		book checkpoint.Book

		atom *Atom // the running atom of Begin, if any
		// br holds the branches in flight and their commit pipeline, nil
		// when there are none (branch.go): Begin and End are refused while
		// it is set, so a run without branches pays one nil check.
		br *branchSet
		// end is set once the run's end record is durable; ending while
		// End writes it (Begin and End are refused meanwhile).
		end    *lifecycle.End
		ending bool
		// writing is set while the Commit or Fail of atom writes its record
		// and waits for the log's fsync, with mu released: until its outcome
		// is applied (under mu, then writing is cleared), nothing else
		// changes frame, lastSeq, head, positions or atom, so readers see
		// the last committed view. Begin, Commit, Fail, Do and the Resolves
		// of the run wait for it (lockIdle), as they would wait for a lock
		// held across the write: the first of them makes idle, which is
		// closed and cleared with writing (a write nobody waits for
		// allocates nothing).
		writing bool
		idle    chan struct{}
		// inflight lists the actions of the atom at lastSeq+1 as found in the
		// log after a restart (an atom interrupted by a crash).
		inflight []layout.InflightAction
		// interruptedSeq is the seq of an atom that was running at the crash,
		// 0 if none. Cleared when that seq commits.
		interruptedSeq uint64
		// failed holds the calls the failed attempts of the next atom
		// wrote intents for (resumekey.Failed).
		failed resumekey.Failed
		broken error // set when the in-memory state can no longer be trusted
		// gone is set once the run's deletion or erasure is durable
		// (markGone): a handle a caller kept serves nothing of it any more.
		gone error
		// rollback is the run's pending rollback (rollback.go): its record
		// is durable and the atom at its seq, lastSeq+1, is not. Begin and
		// End refuse while it is set; the atom at its seq clears it.
		rollback saga.Slot

		// sizes keeps frame's encoded size (checkFrameSizeLocked) and
		// its heap (the frame cache's) as of lastSeq (runstate.Sizes).
		sizes runstate.Sizes
	}
}

type pendingAtom struct {
	seq  uint64
	head chain.Hash
	body []byte // compressed atom body, owned
}

func newRun(db *DB, id string, nonce chain.Nonce, created time.Time) *Run {
	r := &Run{db: db, id: id, nonce: nonce, createdAt: created}
	r.mu.head = db.hasher.Genesis(id, nonce)
	r.mu.frame = newFrame()
	r.mu.book.Start(time.Now())
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

// Head returns the chain head h(LastSeq), or, once the run ended, the
// end's link h(LastSeq+1).
func (r *Run) Head() chain.Hash {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, h, _ := r.chainHeadLocked()
	return h
}

// RunInfo describes a run.
type RunInfo struct {
	ID            string
	Created       time.Time
	LastSeq       uint64
	Head          chain.Hash
	SnapshotSeq   uint64 // latest snapshot in Pebble (0: none)
	CheckpointSeq uint64 // latest chain checkpoint
	Running       uint64 // seq of the atom of Begin running now, 0 if none
	Branches      int    // branches in flight (Run.Branch), committing ones included
	// Interrupted is the seq of an atom that was running when the process
	// stopped, 0 if none. Its actions are listed by Run.Interrupted.
	Interrupted uint64
	// Status is the run's lifecycle state; Ended and Result say when and
	// with what it ended (zero while active). Head is then the end's link.
	Status Status
	Ended  time.Time
	Result []byte
	// Parent is the run this one was forked from ("" if none) and ForkedAt
	// the seq of the parent it starts from.
	Parent   string
	ForkedAt uint64
}

// Info returns a description of the run.
func (r *Run) Info() RunInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	info := RunInfo{
		ID: r.id, Created: r.createdAt, LastSeq: r.mu.lastSeq, Head: r.mu.head,
		SnapshotSeq: r.mu.book.SnapSeq, CheckpointSeq: r.mu.book.CkptSeq, Interrupted: r.mu.interruptedSeq,
	}
	if r.mu.atom != nil {
		info.Running = r.mu.atom.seq
	}
	info.Branches = r.mu.br.Len()
	if e := r.mu.end; e != nil {
		_, info.Head, _ = r.chainHeadLocked()
		info.Status, info.Ended, info.Result = Status(e.Status), e.At, append([]byte(nil), e.Result...)
	}
	info.Parent, info.ForkedAt = r.parent, r.base
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
	acts := append([]layout.InflightAction(nil), r.mu.inflight...)
	r.mu.Unlock()
	if seq == 0 {
		return 0, nil, nil
	}
	if err := r.db.waitLedger(ctx); err != nil {
		return 0, nil, err
	}
	out := make([]ActionState, 0, len(acts))
	for _, a := range acts {
		st := ActionState{Index: a.Index, Fingerprint: a.FP, Status: ledger.StatusIntent}
		if e, ok := r.db.ledger.Lookup(a.FP); ok {
			st.Status = e.Status
			if e.IntentLoc != (ledger.Loc{}) {
				in, err := r.db.readIntent(e.IntentLoc)
				if err != nil {
					return 0, nil, fmt.Errorf("engine: run %q seq %d: intent of action %x: %w", r.id, seq, a.FP[:8], err)
				}
				st.Tool, st.Key, st.Idempotent = in.Tool, in.Key, in.Idempotent
			}
		}
		out = append(out, st)
	}
	return seq, out, nil
}

// State returns a copy of the run's frame as of LastSeq. The caller owns
// it. It does not wait for a Commit in flight: until that Commit's record
// is durable, State returns the frame before it.
//
// State fails only when the frame must be built from the store, on first
// use after a restart, and cannot be (a frame file that is damaged is
// rebuilt from the log, so only a log that is damaged or cannot be read
// fails it), or when the run's state in memory can no longer be trusted.
// It then returns nil, for a run with atoms or without, never an empty or
// partial frame, and logs nothing: StateE returns the same frame or the
// error that says why.
func (r *Run) State() *frame.Frame {
	f, _ := r.StateE()
	return f
}

// StateE is State with an error: it reports a closed store, and a frame
// that cannot be rebuilt (the log itself damaged), instead of returning
// nil.
func (r *Run) StateE() (*frame.Frame, error) {
	if err := r.db.checkOpen(); err != nil {
		return nil, err
	}
	f, err := r.state()
	if err != nil {
		return nil, err
	}
	return r.db.eraser.Open(f)
}

func (r *Run) state() (*frame.Frame, error) {
	r.touch()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.materializeLocked(); err != nil {
		return nil, err
	}
	return r.mu.frame.Clone(), nil
}

// lockIdle locks r.mu once no Commit or Fail of the run is writing its
// record (mu.writing), so that the caller acts on the outcome of that
// write. It returns ctx's error, without the lock, if ctx ends first.
func (r *Run) lockIdle(ctx context.Context) error {
	for {
		r.mu.Lock()
		if !r.mu.writing {
			return nil
		}
		if r.mu.idle == nil {
			r.mu.idle = make(chan struct{})
		}
		idle := r.mu.idle
		r.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// startWriteLocked marks the running atom's Commit or Fail as writing its
// record; the caller then releases r.mu for the write and its fsync, and
// calls endWriteLocked, with r.mu held again, once the outcome is applied.
func (r *Run) startWriteLocked() {
	r.mu.writing = true
}

// endWriteLocked ends the write startWriteLocked began: those waiting in
// lockIdle go on, and see its outcome.
func (r *Run) endWriteLocked() {
	r.mu.writing = false
	if r.mu.idle != nil {
		close(r.mu.idle)
		r.mu.idle = nil
	}
}

// Begin starts the next atom of the run, at seq LastSeq+1. Only one atom
// runs at a time per run: while one is running, or branches are in flight
// (Branch), Begin fails with ErrAtomInProgress. If the previous process stopped in the middle of this
// seq, its actions are still in the ledger (see Interrupted).
func (r *Run) Begin(ctx context.Context) (*Atom, error) {
	if err := r.db.checkOpen(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.db.startDirSyncs() // the atom's first write will wait for them
	r.touch()
	// A failed log is final (I8): say so rather than that the atom whose
	// commit it failed is still running.
	if err := r.db.logFailed(); err != nil {
		return nil, fmt.Errorf("engine: begin run %q: the log failed earlier; reopen the store: %w", r.id, err)
	}
	// The atom whose Commit or Fail is in flight is still running: wait for
	// its outcome rather than report it in progress.
	if err := r.lockIdle(ctx); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	if r.mu.atom != nil {
		return nil, fmt.Errorf("%w: run %q seq %d", ErrAtomInProgress, r.id, r.mu.atom.seq)
	}
	if err := r.rollbackPendingLocked(); err != nil {
		return nil, err
	}
	if err := r.mu.br.RefuseBegin(branchErrs); err != nil {
		return nil, err
	}
	if e := r.mu.end; e != nil || r.mu.ending {
		st := "ending"
		if e != nil {
			st = e.StatusName()
		}
		return nil, fmt.Errorf("%w: run %q is %s: it takes no more atoms", ErrRunEnded, r.id, st)
	}
	if err := r.materializeLocked(); err != nil {
		return nil, err
	}
	a := &Atom{run: r, seq: r.mu.lastSeq + 1, resumed: r.mu.interruptedSeq == r.mu.lastSeq+1}
	a.retried = len(r.mu.failed.At(a.seq)) > 0
	r.mu.atom = a
	r.db.observeBegin(ctx, a)
	return a, nil
}

// rollbackPendingLocked returns ErrRollbackPending naming the target of
// the run's pending rollback, or nil if none: no atom begins until
// Rollback finishes it.
func (r *Run) rollbackPendingLocked() error {
	return r.mu.rollback.Refuse(r.id, sagaErrs)
}
