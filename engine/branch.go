package engine

// Branches: several atoms of one run in flight at once, with optimistic
// concurrency (docs/DESIGN.md, "The engine's API", Branches). Package internal/branch holds the
// rules and the bookkeeping (live branches, the commit queue, the conflict
// window and rule); this file conducts it.
//
// A branch reads the run's state as of its base (LastSeq when it began)
// and takes its seq only when it commits. Its Commit checks, under the
// run's lock, the write sets of the atoms after its base, encodes its
// record chained to the newest record appended for the run (durable or
// not), and enqueues it in the log; the run's lock is released for the
// fsync, so the branches of a run share group commits as separate runs
// do. Records are enqueued in seq order and the log makes them durable in
// that order; each is applied to the run's frame in seq order, once it and
// every record before it is durable (branch.Set.Publish, over branchCore).

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/branch"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// atomBranch is what an atom begun by Run.Branch has besides an atom
// (Atom.branch).
type atomBranch = branch.Branch

// branchSet is a run's branches in flight (Run.mu.br).
type branchSet = branch.Set[*branchCommit]

// queuedBranch is a branch's commit in the run's queue.
type queuedBranch = branch.Commit[*branchCommit]

// branchCommit is what the engine holds for a branch's commit from the
// moment its record is appended until it is applied (or failed).
type branchCommit struct {
	a        *Atom
	d        *frame.Delta
	c        pendingCommit
	enc      encodedAtom
	buf      *encBuf // holds enc until the log wrote it
	w        *wal.Waiter
	tok      uint64 // db.track's
	recBytes int
}

// Branch begins a branch of the run named name: an atom that reads the
// state as of the run's LastSeq (its base, Atom.Base) and takes its seq
// only when it commits, so that several branches of one run are in flight
// at once. reads declares the parts of the frame the branch reads beyond
// those its delta writes. Its Commit fails with an error matching
// ErrConflict, and applies nothing, if an atom committed after its base
// wrote a key the branch's delta writes or that reads names.
//
// The branch's default idempotency keys derive from the run, its name and
// the call's index (ledger.BranchKey): Branch again with the same name
// after a conflict, a Fail or a crash, and its Do calls return the
// certified results of the actions the earlier attempt completed, without
// calling exec. A name is therefore one piece of work of the run: a new
// piece takes a new name. Two branches in flight cannot share a name.
//
// Branch fails with ErrAtomInProgress while an atom of Begin runs, or a
// crash's interrupted atom waits to be begun again (Run.Interrupted), and
// with ErrRunEnded once the run ended.
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
	db.startDirSyncs()
	if err := db.logFailed(); err != nil {
		return nil, fmt.Errorf("engine: branch run %q: the log failed earlier; reopen the store: %w", r.id, err)
	}
	if err := r.lockIdle(ctx); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	switch {
	case r.mu.atom != nil:
		return nil, fmt.Errorf("%w: run %q seq %d (Begin's atom): commit or fail it before branching", ErrAtomInProgress, r.id, r.mu.atom.seq)
	case r.mu.interruptedSeq != 0:
		return nil, fmt.Errorf("%w: run %q seq %d was interrupted by a crash: Begin it again, and commit or fail it, before branching",
			ErrAtomInProgress, r.id, r.mu.interruptedSeq)
	case r.mu.end != nil || r.mu.ending:
		return nil, fmt.Errorf("%w: run %q takes no more atoms", ErrRunEnded, r.id)
	case r.mu.rollback != nil:
		return nil, fmt.Errorf("%w: run %q: the rollback to seq %d is not finished; Rollback(ctx, %d, opts) finishes it",
			ErrRollbackPending, r.id, r.mu.rollback.To, r.mu.rollback.To)
	}
	if err := r.materializeLocked(); err != nil {
		return nil, err
	}
	br := r.mu.br
	if br == nil {
		br = branch.NewSet[*branchCommit](branch.Tail{Seq: r.mu.lastSeq, Head: r.mu.head, Bound: r.frameBoundLocked()}, branchWindow)
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

// frameBoundLocked is the size bound of the run's frame as of lastSeq
// (checkFrameSizeLocked's).
func (r *Run) frameBoundLocked() int64 {
	if r.mu.sizeFrame != r.mu.frame || r.mu.sizeSeq != r.mu.lastSeq {
		r.mu.sizeBound = int64(frame.EncodedFrameSize(r.mu.frame))
		r.mu.sizeFrame, r.mu.sizeSeq = r.mu.frame, r.mu.lastSeq
	}
	return r.mu.sizeBound
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

// withDefaultKey returns in (an intent of this atom's) with the default
// key of call index index: the run's DefaultKey at the
// atom's seq, or a branch's BranchKey.
func (a *Atom) withDefaultKey(in *ledger.Intent, index uint32) *ledger.Intent {
	if a.branch != nil {
		return in.WithKey(ledger.BranchKey(a.run.id, a.branch.Name, int(index)), index)
	}
	return in.WithDefaultKey(index)
}

// branchIdleLocked drops the run's branch set once no branch is in flight.
func (r *Run) branchIdleLocked() {
	if br := r.mu.br; br != nil && br.Idle() {
		r.mu.br = nil
	}
}

// commitBranch is Commit of a branch.
func (a *Atom) commitBranch(ctx context.Context, d *frame.Delta) error {
	r, db := a.run, a.run.db
	start := a.commitStart()
	q, err := a.enqueue(ctx, d, record.DeltaWrites(d))
	if err != nil {
		return err
	}
	bc := q.Payload
	ps, err := bc.w.Wait(context.Background()) // the record is in the log's queue: its outcome is the log's
	if err == nil {
		err = db.dirsDurable()
	}
	select {
	case <-q.Done(): // applied (or failed) by the commit of a branch before it
	default:
		r.mu.Lock()
		switch {
		case q.Settled():
		case err != nil:
			if tooLargeForLog(err) {
				err = fmt.Errorf("%w: %w", ErrTooLarge, err)
			} else {
				err = advise(err)
			}
			db.failLog(err)
			r.mu.br.Fail(q, fmt.Errorf("engine: commit run %q branch %q (seq %d): %w", r.id, a.branch.Name, q.Seq, err), (*branchCore)(r))
		default:
			if !q.Durable {
				q.Durable, q.Pos = true, ps[0]
				db.noteAppended(len(bc.enc.rec))
			}
			r.publishBranchesLocked()
		}
		r.mu.Unlock()
	}
	<-q.Done()
	if err := q.Err(); err != nil {
		return err
	}
	db.counters.atoms.Add(1)
	db.sample(bc.enc.body)
	putBuf(bc.buf)
	a.observeCommit(start, bc.recBytes, bc.enc.deltaLen, len(bc.c.actions))
	return nil
}

// enqueue checks branch a's commit of d, which writes writes, against the
// atoms after its base and the run's frame, and appends its record to the
// log's queue. The branch is done from then on (as it is on a conflict).
// The body is encoded and compressed before the run's lock is taken (it
// depends neither on the seq nor on the record before it); under the lock
// the record is linked and enqueued, so that the run's records enter the
// log in seq order.
func (a *Atom) enqueue(ctx context.Context, d *frame.Delta, writes []StateKey) (*queuedBranch, error) {
	r, db := a.run, a.run.db
	b := a.branch
	ext := []record.AtomExt{{Tag: record.ExtTagBase, Data: record.AppendBranchBase(nil, &record.BranchBase{Base: b.Base, Branch: b.Name, Reads: b.Reads})}}
	buf := getBuf()
	var enc encodedAtom
	encoded := -1 // the number of the atom's actions enc lists
	for {
		a.mu.Lock()
		n := len(a.mu.actions)
		actions := a.mu.actions[:n:n]
		a.mu.Unlock()
		if n != encoded {
			var err error
			if enc, err = db.encodeAtomBody(buf, r.id, 0, actions, d, ext, nil); err != nil {
				putBuf(buf)
				return nil, err
			}
			db.compressAtomBody(buf, enc)
			encoded = n
		}
		q, wait, err := a.enqueueLocked(d, writes, buf, &enc, actions)
		switch {
		case err != nil:
			putBuf(buf)
			return nil, err
		case q != nil:
			return q, nil
		case wait != nil:
			select {
			case <-wait:
			case <-ctx.Done():
				putBuf(buf)
				return nil, ctx.Err()
			}
		}
	}
}

// enqueueLocked is enqueue's step under the run's lock, for the body
// encoded with actions: it returns the queued commit; or a channel to wait
// on and try again (the frame near its size limit while commits before it
// are in flight, or a record of the run being written under its write
// mark), or nil and nil to encode again (a Do of the branch
// recorded an action meanwhile).
func (a *Atom) enqueueLocked(d *frame.Delta, writes []StateKey, buf *encBuf, enc *encodedAtom, actions []atomAction) (*queuedBranch, <-chan struct{}, error) {
	r, db := a.run, a.run.db
	b := a.branch
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.writing {
		// A record of the run is being written under its write mark (a
		// wait's, an event's, a wake's: they name the run's newest record
		// appended): this one takes its seq after it is in the log.
		if r.mu.idle == nil {
			r.mu.idle = make(chan struct{})
		}
		return nil, r.mu.idle, nil
	}
	br := r.mu.br
	a.mu.Lock()
	done, n := a.mu.done, len(a.mu.actions)
	a.mu.Unlock()
	switch {
	case done || br == nil || !br.Live(b):
		return nil, nil, fmt.Errorf("%w: run %q branch %q", ErrAtomDone, r.id, b.Name)
	case n != len(actions):
		return nil, nil, nil
	}
	if err := a.enqueueCheckLocked(br, d, writes); err != nil {
		return nil, nil, err
	}
	bound, wait := br.Bound(int64(frame.EncodedDeltaSize(d))+2*int64(d.Len()), MaxSize)
	if wait != nil {
		return nil, wait, nil
	}
	tail := br.Tail()
	seq := tail.Seq + 1
	if bound > MaxSize {
		var err error
		if bound, err = r.checkFrameSizeLocked(d, seq); err != nil {
			return nil, nil, err
		}
	}
	c := pendingCommit{prev: tail.Head, actions: actions, sizeBound: bound}
	if err := db.sealAtom(buf, enc, r.id, seq, c.prev); err != nil {
		return nil, nil, err
	}
	bc := &branchCommit{a: a, d: d, c: c, enc: *enc, buf: buf, recBytes: len(enc.rec)}
	bc.tok = db.track()
	bc.w = db.log.AppendAsync(enc.rec)
	select {
	case <-bc.w.Done():
		// Written already, or refused (too large for a segment, the log
		// closed or failed): in either case nothing is chained to it yet.
		if _, err := bc.w.Wait(context.Background()); err != nil {
			db.untrack(bc.tok)
			if tooLargeForLog(err) {
				return nil, nil, fmt.Errorf("%w: engine: commit run %q branch %q: %w", ErrTooLarge, r.id, b.Name, err)
			}
			err = advise(err)
			db.failLog(err)
			return nil, nil, fmt.Errorf("engine: commit run %q branch %q: %w", r.id, b.Name, err)
		}
	default:
	}
	a.mu.Lock()
	a.mu.done = true // no Do after this: the record lists its actions
	a.mu.Unlock()
	return br.Enqueue(b, writes, enc.head, bound, r.mu.lastSeq, bc), nil, nil
}

// enqueueCheckLocked is what enqueue checks before it writes: the run's
// state, the conflict rule, the delta against the frame. A conflict ends
// the branch.
func (a *Atom) enqueueCheckLocked(br *branchSet, d *frame.Delta, writes []StateKey) error {
	r, b := a.run, a.branch
	if err := br.Failed(); err != nil {
		return err
	}
	if r.mu.broken != nil {
		return r.mu.broken
	}
	if err := r.materializeLocked(); err != nil {
		return err
	}
	if c := br.Conflict(b, writes); c != nil {
		err := &ConflictError{Run: r.id, Branch: b.Name, Base: b.Base, Seq: c.Seq, Key: c.Key, Lost: c.Lost}
		a.endBranchLocked(br)
		a.observeFail(err.Error())
		return err
	}
	// The atoms queued before it wrote none of what it writes (the
	// conflict check), so it applies to the frame they will leave exactly
	// as to the frame published now.
	if err := r.mu.frame.CanApply(d); err != nil {
		return fmt.Errorf("%w: run %q branch %q: %v", ErrInvalidDelta, r.id, b.Name, err)
	}
	return nil
}

// endBranchLocked ends branch a without a commit: its name is free again.
func (a *Atom) endBranchLocked(br *branchSet) {
	br.End(a.branch, a.run.mu.lastSeq)
	a.mu.Lock()
	a.mu.done = true
	a.mu.Unlock()
	a.run.branchIdleLocked()
}

// publishBranchesLocked applies, in seq order, every queued commit that is
// durable and whose predecessors are applied.
func (r *Run) publishBranchesLocked() {
	r.mu.br.Publish((*branchCore)(r), r.mu.lastSeq)
	r.branchIdleLocked()
}

// branchCore is a run as its branch set's branch.Core (the run's lock
// held).
type branchCore Run

// Durable reports whether q's record is durable already, and marks it so:
// the commit that publishes the records before it publishes it too, in
// the same hold of the run's lock, rather than wait for q's own goroutine
// to be scheduled. A failure is left to that goroutine to report.
func (c *branchCore) Durable(q *queuedBranch) bool {
	db := c.db
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

// Apply publishes q's atom to the run's state.
func (c *branchCore) Apply(q *queuedBranch) error {
	bc := q.Payload
	return bc.a.publishLocked(q.Seq, bc.d, bc.c, bc.enc.head, q.Pos, bc.enc.grown)
}

// Release drops q's hold on the engine checkpoint's replay position.
func (c *branchCore) Release(q *queuedBranch) { c.db.untrack(q.Payload.tok) }

// Committed is the work after a commit (afterCommitLocked).
func (c *branchCore) Committed(*queuedBranch) { (*Run)(c).afterCommitLocked() }

// failBranch is Fail of a branch: it ends the branch, which reserved no
// seq, without a record.
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

// otherBranchKey reports whether key is a default key of another branch
// of the run than a's.
func (a *Atom) otherBranchKey(key string) bool {
	return branch.OtherKey(a.run.id, a.branch.Name, key)
}
