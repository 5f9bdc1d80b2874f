package engine

// Branches (docs/DESIGN.md, "Branches"): internal/branch conducts a
// commit over branchAtom.

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/branch"
	"github.com/continuumdb/continuum/internal/limits"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

type (
	atomBranch   = branch.Branch              // Atom.branch
	branchSet    = branch.Set[*branchAtom]    // Run.mu.br: the run's branches in flight
	queuedBranch = branch.Commit[*branchAtom] // a branch's commit in the run's queue
)

// branchErrs are internal/branch's refusals as the engine's errors.
var branchErrs = branch.Errors{AtomInProgress: ErrAtomInProgress, RunEnded: ErrRunEnded,
	AtomDone: ErrAtomDone, InvalidDelta: ErrInvalidDelta, Conflict: func(b *atomBranch, c *branch.Conflict) error {
		return &ConflictError{Run: b.Run, Branch: b.Name, Base: b.Base, Seq: c.Seq, Key: c.Key, Lost: c.Lost}
	}}

// Branch begins branch name of the run: an atom that reads the state at
// LastSeq (Atom.Base) and takes its seq when it commits; reads names what
// it reads beyond what it writes. Its Commit fails with ErrConflict if an
// atom committed after its base wrote what it writes or reads. Branch
// again with the same name retries with the same keys (ledger.BranchKey).
// docs/DESIGN.md ("Branches") has the rules.
//
// Errors: ErrAtomInProgress (an atom of Begin runs, a crash's interrupted
// atom waits to be begun again, or a branch of that name is in flight);
// ErrRunEnded; ErrRollbackPending.
func (r *Run) Branch(ctx context.Context, name string, reads ...StateKey) (*Atom, error) {
	db := r.db
	if err := db.checkOpen(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := branch.Check(r.id, name, reads); err != nil {
		return nil, err
	}
	r.touch() // the frame cache keeps recently used frames
	if err := db.writable("branch run", r.id); err != nil {
		return nil, err
	}
	a := &Atom{run: r}
	b, err := branch.Begin(ctx, branch.Atom[*branchAtom](&branchAtom{a: a}), name, reads, branchWindow, branchErrs)
	if err != nil {
		return nil, err
	}
	a.branch = b
	db.observeBegin(ctx, a)
	return a, nil
}

// Base returns the seq whose state the atom reads: a branch's base, or
// Seq-1 for an atom of Begin. The branch reads it with Run.StateAt.
func (a *Atom) Base() uint64 {
	if a.branch != nil {
		return a.branch.Base
	}
	return a.seq - 1
}

// Branch returns the atom's branch name, "" for an atom of Begin.
func (a *Atom) Branch() string {
	if a.branch != nil {
		return a.branch.Name
	}
	return ""
}

// withDefaultKey returns in with call index's default key (a branch's
// BranchKey).
func (a *Atom) withDefaultKey(in *ledger.Intent, index uint32) *ledger.Intent {
	return branch.WithKey(in, a.branch, index)
}

// otherBranchKey reports whether key is a default key of another branch
// of the run than a's.
func (a *Atom) otherBranchKey(key string) bool { return branch.OtherKey(a.run.id, a.branch.Name, key) }

// failBranch is Fail of a branch: no seq, no record.
func (a *Atom) failBranch(reason string) error {
	return branch.Fail[*branchAtom](&branchAtom{a: a}, a.branch, reason, branchErrs)
}

// commitBranch is Commit of a branch: branch.Conduct over a branchAtom.
func (a *Atom) commitBranch(ctx context.Context, d *frame.Delta) error {
	db, b := a.run.db, a.branch
	start := a.commitStart()
	x := &branchAtom{a: a, d: d, buf: getBuf(), ext: []record.AtomExt{b.Ext()}}
	q, err := branch.Conduct(ctx, branch.Atom[*branchAtom](x), b, record.DeltaWrites(d), limits.Growth(d), MaxSize, branchErrs)
	if q == nil {
		putBuf(x.buf) // no record of it was appended
	}
	if err != nil {
		return err
	}
	db.counters.atoms.Add(1)
	db.sample(x.enc.body)
	a.observeCommit(start, len(x.enc.rec), x.enc.deltaLen, len(x.actions))
	putBuf(x.buf)
	return nil
}

// branchAtom is internal/branch's Atom: a branch's commit of d, and once
// appended the payload of the run's queue.
type branchAtom struct {
	a       *Atom
	d       *frame.Delta
	ext     []record.AtomExt
	buf     *encBuf       // holds enc until the log wrote it
	enc     encodedAtom   // the body encoded and compressed in buf; the record once appended
	actions []atomAction  // the actions enc lists
	c       pendingCommit // once appended
	w       *wal.Waiter
	tok     uint64 // db.track's
}

func (x *branchAtom) Encode(have int) (int, error) {
	a, db := x.a, x.a.run.db
	a.mu.Lock()
	n := len(a.mu.actions)
	actions := a.mu.actions[:n:n]
	a.mu.Unlock()
	if n == have {
		return n, nil
	}
	enc, err := db.encodeAtomBody(x.buf, a.run.id, 0, actions, x.d, x.ext, nil)
	if err != nil {
		return 0, err
	}
	db.compressAtomBody(x.buf, enc)
	x.enc, x.actions = enc, actions
	return n, nil
}

func (x *branchAtom) Lock() (*branchSet, branch.Now) {
	a, r := x.a, x.a.run
	r.mu.Lock()
	now := branch.Now{State: branch.State{Run: r.id, Interrupted: r.mu.interruptedSeq, Ended: r.mu.end != nil || r.mu.ending,
		Rollback: r.rollbackPendingLocked()}, Broken: r.mu.broken, LastSeq: r.mu.lastSeq}
	if r.mu.atom != nil {
		now.Running = r.mu.atom.seq
	}
	if r.mu.writing { // a wait's, event's or wake's record: this one takes its seq after it
		if r.mu.idle == nil {
			r.mu.idle = make(chan struct{})
		}
		now.Writing = r.mu.idle
	}
	a.mu.Lock()
	now.Actions, now.Done = len(a.mu.actions), a.mu.done
	a.mu.Unlock()
	return r.mu.br, now
}

func (x *branchAtom) Unlock(br *branchSet) {
	x.a.run.mu.br = br
	x.a.run.mu.Unlock()
}

func (x *branchAtom) CheckLocked() error { return x.a.run.materializeLocked() }

func (x *branchAtom) TailLocked() branch.Tail {
	r := x.a.run
	return branch.Tail{Seq: r.mu.lastSeq, Head: r.mu.head, Bound: r.frameBoundLocked()}
}

func (x *branchAtom) CanApplyLocked() error { return x.a.run.mu.frame.CanApply(x.d) }

func (x *branchAtom) FrameBoundLocked(seq uint64) (int64, error) {
	return x.a.run.checkFrameSizeLocked(x.d, seq)
}

func (x *branchAtom) EndLocked(reason string, fail bool) {
	a := x.a
	a.mu.Lock()
	a.mu.done = true
	a.mu.Unlock()
	if fail {
		a.run.db.counters.fails.Add(1)
	}
	a.observeFail(reason)
}

func (x *branchAtom) AppendLocked(seq uint64, prev chain.Hash, bound int64) (*branchAtom, chain.Hash, error) {
	a, r, db := x.a, x.a.run, x.a.run.db
	if err := db.sealAtom(x.buf, &x.enc, r.id, seq, prev); err != nil {
		return nil, chain.Hash{}, err
	}
	x.c = pendingCommit{prev: prev, actions: x.actions, sizeBound: bound}
	x.tok = db.track()
	x.w = db.log.AppendAsync(x.enc.rec)
	select {
	case <-x.w.Done():
		// Written already, or refused: nothing is chained to it yet.
		if _, err := x.w.Wait(context.Background()); err != nil {
			db.untrack(x.tok)
			return nil, chain.Hash{}, db.logError(err, fmt.Sprintf("engine: commit run %q branch %q", r.id, a.branch.Name))
		}
	default:
	}
	a.mu.Lock()
	a.mu.done = true // no Do after this: the record lists its actions
	a.mu.Unlock()
	return x, x.enc.head, nil
}

func (x *branchAtom) Wait(q *queuedBranch) error {
	if _, err := q.Payload.w.Wait(context.Background()); err != nil {
		return err
	}
	return x.a.run.db.dirsDurable()
}

func (x *branchAtom) FailLocked(q *queuedBranch, err error) error {
	return x.a.run.db.logError(err, fmt.Sprintf("engine: commit run %q branch %q (seq %d)", x.a.run.id, x.a.branch.Name, q.Seq))
}

// Durable reports, and marks, whether q's record is durable already, so
// the commit before it publishes it too; a failure is q's to report.
func (x *branchAtom) Durable(q *queuedBranch) bool {
	db := x.a.run.db
	select {
	case <-q.Payload.w.Done():
	default:
		return false
	}
	ps, err := q.Payload.w.Wait(context.Background())
	if err != nil {
		return false
	}
	if !db.dirSync.Synced() {
		return false
	}
	q.Durable, q.Pos = true, ps[0]
	db.noteAppended(len(q.Payload.enc.rec))
	return true
}

func (x *branchAtom) Apply(q *queuedBranch) error {
	p := q.Payload
	return p.a.publishLocked(q.Seq, p.d, p.c, p.enc.head, q.Pos, p.enc.grown)
}

func (x *branchAtom) Release(q *queuedBranch) { x.a.run.db.untrack(q.Payload.tok) }

func (x *branchAtom) Committed(*queuedBranch) { x.a.run.afterCommitLocked() }
