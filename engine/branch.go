package engine

// Branches (docs/DESIGN.md, "Branches"): internal/branch conducts a
// commit over branchAtom.

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/branch"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

type (
	atomBranch   = branch.Branch              // Atom.branch
	branchSet    = branch.Set[*branchAtom]    // Run.mu.br: the run's branches in flight
	queuedBranch = branch.Commit[*branchAtom] // a branch's commit in the run's queue
)

var branchErrs = branch.Errors{AtomInProgress: ErrAtomInProgress, RunEnded: ErrRunEnded, RollbackPending: ErrRollbackPending}

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
	if err := r.lockIdle(ctx); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	st := branch.State{Run: r.id, Interrupted: r.mu.interruptedSeq, Ended: r.mu.end != nil || r.mu.ending}
	if r.mu.atom != nil {
		st.Running = r.mu.atom.seq
	}
	if rb := r.mu.rollback; rb != nil {
		st.Rollback, st.To = true, rb.To
	}
	if err := branch.Start(st, branchErrs); err != nil {
		return nil, err
	}
	if err := r.materializeLocked(); err != nil {
		return nil, err
	}
	br := r.mu.br
	if br == nil {
		br = branch.NewSet[*branchAtom](branch.Tail{Seq: r.mu.lastSeq, Head: r.mu.head, Bound: r.frameBoundLocked()}, branchWindow)
		r.mu.br = br
	}
	if err := br.Failed(); err != nil {
		return nil, err
	}
	b := br.Begin(name, r.mu.lastSeq, reads)
	if b == nil {
		return nil, fmt.Errorf("%w: run %q branch %q is in flight", ErrAtomInProgress, r.id, name)
	}
	a := &Atom{run: r, branch: b}
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
	if a.branch != nil {
		return in.WithKey(ledger.BranchKey(a.run.id, a.branch.Name, int(index)), index)
	}
	return in.WithDefaultKey(index)
}

// otherBranchKey reports whether key is a default key of another branch
// of the run than a's.
func (a *Atom) otherBranchKey(key string) bool {
	return branch.OtherKey(a.run.id, a.branch.Name, key)
}

// branchIdleLocked drops the run's branch set once no branch is in flight.
func (r *Run) branchIdleLocked() {
	if br := r.mu.br; br != nil && br.Idle() {
		r.mu.br = nil
	}
}

// endBranchLocked ends branch a without a commit: its name is free again.
func (a *Atom) endBranchLocked(br *branchSet) {
	br.End(a.branch, a.run.mu.lastSeq)
	a.mu.Lock()
	a.mu.done = true
	a.mu.Unlock()
	a.run.branchIdleLocked()
}

// failBranch is Fail of a branch: no seq, no record.
func (a *Atom) failBranch(reason string) error {
	r := a.run
	r.mu.Lock()
	defer r.mu.Unlock()
	br := r.mu.br
	if br == nil || !br.Live(a.branch) {
		return fmt.Errorf("%w: run %q branch %q", ErrAtomDone, r.id, a.branch.Name)
	}
	a.endBranchLocked(br)
	r.db.counters.fails.Add(1)
	a.observeFail(reason)
	return nil
}

// commitBranch is Commit of a branch: branch.Conduct over a branchAtom.
func (a *Atom) commitBranch(ctx context.Context, d *frame.Delta) error {
	db, b := a.run.db, a.branch
	start := a.commitStart()
	base := record.AppendBranchBase(nil, &record.BranchBase{Base: b.Base, Branch: b.Name, Reads: b.Reads})
	x := &branchAtom{a: a, d: d, buf: getBuf(), ext: []record.AtomExt{{Tag: record.ExtTagBase, Data: base}}}
	q, err := branch.Conduct(ctx, branch.Atom[*branchAtom](x), b, record.DeltaWrites(d), int64(frame.EncodedDeltaSize(d))+2*int64(d.Len()), MaxSize)
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

// branchAtom is a branch's commit of d as branch.Conduct drives it, and
// once appended the payload of the run's queue.
type branchAtom struct {
	a       *Atom
	d       *frame.Delta
	ext     []record.AtomExt
	buf     *encBuf      // holds enc until the log wrote it
	enc     encodedAtom  // the body encoded and compressed in buf; the record once appended
	actions []atomAction // the actions enc lists
	encoded bool
	c       pendingCommit // once appended
	w       *wal.Waiter
	tok     uint64 // db.track's
}

func (x *branchAtom) Encode() error {
	a, db := x.a, x.a.run.db
	a.mu.Lock()
	n := len(a.mu.actions)
	actions := a.mu.actions[:n:n]
	a.mu.Unlock()
	if x.encoded && n == len(x.actions) {
		return nil
	}
	enc, err := db.encodeAtomBody(x.buf, a.run.id, 0, actions, x.d, x.ext, nil)
	if err != nil {
		return err
	}
	db.compressAtomBody(x.buf, enc)
	x.enc, x.actions, x.encoded = enc, actions, true
	return nil
}

func (x *branchAtom) Lock() *branchSet {
	x.a.run.mu.Lock()
	return x.a.run.mu.br
}

func (x *branchAtom) Unlock() {
	x.a.run.branchIdleLocked()
	x.a.run.mu.Unlock()
}

func (x *branchAtom) ReadyLocked(br *branchSet) (<-chan struct{}, bool, error) {
	a, r := x.a, x.a.run
	if r.mu.writing {
		// A wait's, event's or wake's record is being written: this one
		// takes its seq after it.
		if r.mu.idle == nil {
			r.mu.idle = make(chan struct{})
		}
		return r.mu.idle, false, nil
	}
	a.mu.Lock()
	done, n := a.mu.done, len(a.mu.actions)
	a.mu.Unlock()
	if done || br == nil || !br.Live(a.branch) {
		return nil, false, fmt.Errorf("%w: run %q branch %q", ErrAtomDone, r.id, a.branch.Name)
	}
	return nil, n != len(x.actions), nil
}

func (x *branchAtom) CheckLocked(c *branch.Conflict) error {
	a, r, b := x.a, x.a.run, x.a.branch
	if r.mu.broken != nil {
		return r.mu.broken
	}
	if err := r.materializeLocked(); err != nil {
		return err
	}
	if c != nil {
		err := &ConflictError{Run: r.id, Branch: b.Name, Base: b.Base, Seq: c.Seq, Key: c.Key, Lost: c.Lost}
		a.endBranchLocked(r.mu.br)
		a.observeFail(err.Error())
		return err
	}
	if err := r.mu.frame.CanApply(x.d); err != nil {
		return fmt.Errorf("%w: run %q branch %q: %v", ErrInvalidDelta, r.id, b.Name, err)
	}
	return nil
}

func (x *branchAtom) FrameBoundLocked(seq uint64) (int64, error) {
	return x.a.run.checkFrameSizeLocked(x.d, seq)
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
			return nil, chain.Hash{}, db.branchLogError(err, fmt.Sprintf("engine: commit run %q branch %q", r.id, a.branch.Name))
		}
	default:
	}
	a.mu.Lock()
	a.mu.done = true // no Do after this: the record lists its actions
	a.mu.Unlock()
	return x, x.enc.head, nil
}

func (x *branchAtom) LastSeqLocked() uint64 { return x.a.run.mu.lastSeq }

func (x *branchAtom) Wait(q *queuedBranch) error {
	if _, err := q.Payload.w.Wait(context.Background()); err != nil {
		return err
	}
	return x.a.run.db.dirsDurable()
}

func (x *branchAtom) FailLocked(q *queuedBranch, err error) error {
	return x.a.run.db.branchLogError(err, fmt.Sprintf("engine: commit run %q branch %q (seq %d)", x.a.run.id, x.a.branch.Name, q.Seq))
}

// branchLogError is the error of a branch's record the log refused as
// too large, or failed (final).
func (db *DB) branchLogError(err error, where string) error { return db.logError(err, where) }

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
	select {
	case <-db.dirsSynced:
		if db.dirsErr != nil {
			return false
		}
	default:
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
