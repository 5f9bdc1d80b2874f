package engine

// Branches: several atoms of one run in flight at once, with optimistic
// concurrency (doc.go, "Branches").
//
// A branch reads the run's state as of its base (LastSeq when it began)
// and takes its seq only when it commits. Its Commit checks, under the
// run's lock, the write sets of the atoms after its base (a bounded window
// kept only while branches are in flight), encodes its record chained to
// the newest record appended for the run (durable or not), and enqueues
// it in the log; the run's lock is released for the fsync, so the
// branches of a run share group commits as separate runs do. Records are
// enqueued in seq order and the log makes them durable in that order;
// each is applied to the run's frame in seq order, once it and every
// record before it is durable (publishBranchesLocked).

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// atomBranch is what an atom begun by Run.Branch has besides an atom.
type atomBranch struct {
	name  string
	base  uint64
	reads []StateKey // declared, sorted, unique; immutable
	// seq is the seq the branch committed at, 0 until then (Atom.Seq).
	seq atomic.Uint64
}

// branchSet is a run's branches in flight and their commit pipeline. It
// exists (Run.mu.br) from the first Branch until no branch is in flight,
// so that a run without branches keeps none of it. Guarded by Run.mu.
type branchSet struct {
	// live holds the branches begun and not yet committing, by name.
	live map[string]*Atom
	// queue holds the commits whose record is appended and not yet
	// applied to the run's state, ascending by seq (lastSeq+1 ...).
	queue []*branchCommit
	// tailSeq and tailHead are the seq and head of the run's newest record
	// appended: the last of queue, or lastSeq and head when it is empty.
	// tailBound is the frame's size bound after it.
	tailSeq   uint64
	tailHead  chain.Hash
	tailBound int64
	// writes holds the write sets of every atom after winBase up to
	// tailSeq, ascending by seq: what a branch with base >= winBase is
	// checked against.
	winBase uint64
	writes  []atomWrites
	// failed is the log's error once a branch's record failed: the
	// records chained to it cannot be durable either.
	failed error
}

type atomWrites struct {
	seq  uint64
	keys []StateKey // sorted, unique
}

// branchCommit is one branch's Commit from the moment its record is
// appended until it is applied (or failed). Guarded by Run.mu.
type branchCommit struct {
	a        *Atom
	seq      uint64
	d        *frame.Delta
	c        pendingCommit
	enc      encodedAtom
	buf      *encBuf // holds enc until the log wrote it
	w        *wal.Waiter
	tok      uint64 // db.track's
	pos      wal.Pos
	durable  bool
	settled  bool          // applied or failed; done is closed
	err      error         // set when settled, nil if applied
	done     chan struct{} // closed when settled
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
	if err := record.CheckBranchName(name); err != nil {
		return nil, fmt.Errorf("engine: branch of run %q: %w", r.id, err)
	}
	if len(reads) > record.MaxBranchReads {
		return nil, fmt.Errorf("engine: branch %q of run %q declares %d reads, at most %d", name, r.id, len(reads), record.MaxBranchReads)
	}
	for _, k := range reads {
		if err := k.Check(); err != nil {
			return nil, fmt.Errorf("engine: branch %q of run %q: %w", name, r.id, err)
		}
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
			ErrRollbackPending, r.id, r.mu.rollback.to, r.mu.rollback.to)
	}
	if err := r.materializeLocked(); err != nil {
		return nil, err
	}
	br := r.mu.br
	if br == nil {
		br = &branchSet{live: map[string]*Atom{}, tailSeq: r.mu.lastSeq, tailHead: r.mu.head, winBase: r.mu.lastSeq}
		br.tailBound = r.frameBoundLocked()
		r.mu.br = br
	}
	if br.failed != nil {
		return nil, br.failed
	}
	if _, ok := br.live[name]; ok || slices.ContainsFunc(br.queue, func(c *branchCommit) bool { return c.a.branch.name == name }) {
		return nil, fmt.Errorf("%w: run %q branch %q is in flight", ErrAtomInProgress, r.id, name)
	}
	var sorted []StateKey
	if len(reads) > 0 {
		sorted = record.SortStateKeys(slices.Clone(reads))
	}
	a := &Atom{run: r, branch: &atomBranch{name: name, base: r.mu.lastSeq, reads: sorted}}
	br.live[name] = a
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
		return a.branch.base
	}
	return a.seq - 1
}

// Branch returns the atom's branch name, "" for an atom of Begin.
func (a *Atom) Branch() string {
	if a.branch != nil {
		return a.branch.name
	}
	return ""
}

// withDefaultKey returns in (an intent of this atom's) with the default
// key of call index index: the run's DefaultKey at the
// atom's seq, or a branch's BranchKey.
func (a *Atom) withDefaultKey(in *ledger.Intent, index uint32) *ledger.Intent {
	if a.branch != nil {
		return in.WithKey(ledger.BranchKey(a.run.id, a.branch.name, int(index)), index)
	}
	return in.WithDefaultKey(index)
}

// writeKeys returns the keys d writes, sorted and unique
// (record.DeltaWrites: the one definition, which verify uses too).
func writeKeys(d *frame.Delta) []StateKey { return record.DeltaWrites(d) }

// conflictLocked returns the conflict of branch b, which writes writes,
// with the atoms after its base, or nil.
func (br *branchSet) conflictLocked(run string, b *atomBranch, writes []StateKey) error {
	if b.base < br.winBase {
		first := br.winBase + 1
		return &ConflictError{Run: run, Branch: b.name, Base: b.base, Seq: first, Lost: true}
	}
	touched := writes
	if len(b.reads) > 0 {
		touched = record.SortStateKeys(append(slices.Clone(writes), b.reads...))
	}
	for _, w := range br.writes {
		if w.seq <= b.base {
			continue
		}
		if k, ok := record.Overlap(w.keys, touched); ok {
			return &ConflictError{Run: run, Branch: b.name, Base: b.base, Seq: w.seq, Key: k}
		}
	}
	return nil
}

// trimLocked drops the write sets no branch in flight or to come needs:
// those at or below every live branch's base and the run's last seq, and
// the oldest beyond MaxBranchWindow.
func (br *branchSet) trimLocked(lastSeq uint64) {
	floor := lastSeq
	for _, a := range br.live {
		floor = min(floor, a.branch.base)
	}
	i := 0
	for i < len(br.writes) && (br.writes[i].seq <= floor || len(br.writes)-i > branchWindow) {
		br.winBase = br.writes[i].seq
		i++
	}
	if i > 0 {
		br.writes = slices.Delete(br.writes, 0, i)
	}
	br.winBase = max(br.winBase, min(floor, br.tailSeq))
}

// branchIdleLocked drops the run's branch set once no branch is in flight.
func (r *Run) branchIdleLocked() {
	if br := r.mu.br; br != nil && len(br.live) == 0 && len(br.queue) == 0 && br.failed == nil {
		r.mu.br = nil
	}
}

// commitBranch is Commit of a branch.
func (a *Atom) commitBranch(ctx context.Context, d *frame.Delta) error {
	r, db := a.run, a.run.db
	start := a.commitStart()
	writes := writeKeys(d)
	bc, err := a.enqueue(ctx, d, writes)
	if err != nil {
		return err
	}
	ps, err := bc.w.Wait(context.Background()) // the record is in the log's queue: its outcome is the log's
	if err == nil {
		err = db.dirsDurable()
	}
	select {
	case <-bc.done: // applied (or failed) by the commit of a branch before it
	default:
		r.mu.Lock()
		switch {
		case bc.settled:
		case err != nil:
			if tooLargeForLog(err) {
				err = fmt.Errorf("%w: %w", ErrTooLarge, err)
			} else {
				err = advise(err)
			}
			db.failLog(err)
			r.failBranchesLocked(bc, fmt.Errorf("engine: commit run %q branch %q (seq %d): %w", r.id, a.branch.name, bc.seq, err))
		default:
			if !bc.durable {
				bc.durable, bc.pos = true, ps[0]
				db.noteAppended(len(bc.enc.rec))
			}
			r.publishBranchesLocked()
		}
		r.mu.Unlock()
	}
	<-bc.done
	if bc.err != nil {
		return bc.err
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
func (a *Atom) enqueue(ctx context.Context, d *frame.Delta, writes []StateKey) (*branchCommit, error) {
	r, db := a.run, a.run.db
	b := a.branch
	ext := []record.AtomExt{{Tag: record.ExtTagBase, Data: record.AppendBranchBase(nil, &record.BranchBase{Base: b.base, Branch: b.name, Reads: b.reads})}}
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
		bc, wait, err := a.enqueueLocked(d, writes, buf, &enc, actions)
		switch {
		case err != nil:
			putBuf(buf)
			return nil, err
		case bc != nil:
			return bc, nil
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
// are in flight), or nil and nil to encode again (a Do of the branch
// recorded an action meanwhile).
func (a *Atom) enqueueLocked(d *frame.Delta, writes []StateKey, buf *encBuf, enc *encodedAtom, actions []atomAction) (*branchCommit, <-chan struct{}, error) {
	r, db := a.run, a.run.db
	b := a.branch
	r.mu.Lock()
	defer r.mu.Unlock()
	br := r.mu.br
	a.mu.Lock()
	done, n := a.mu.done, len(a.mu.actions)
	a.mu.Unlock()
	switch {
	case done || br == nil || br.live[b.name] != a:
		return nil, nil, fmt.Errorf("%w: run %q branch %q", ErrAtomDone, r.id, b.name)
	case n != len(actions):
		return nil, nil, nil
	}
	if err := a.enqueueCheckLocked(br, d, writes); err != nil {
		return nil, nil, err
	}
	bound := br.tailBound + int64(frame.EncodedDeltaSize(d)) + 2*int64(d.Len())
	if bound > MaxSize && len(br.queue) > 0 {
		// Near the size limit: let the commits before it land, then take
		// the exact size from the frame they leave.
		return nil, br.queue[len(br.queue)-1].done, nil
	}
	seq := br.tailSeq + 1
	if bound > MaxSize {
		var err error
		if bound, err = r.checkFrameSizeLocked(d, seq); err != nil {
			return nil, nil, err
		}
	}
	c := pendingCommit{prev: br.tailHead, actions: actions, sizeBound: bound}
	if err := db.sealAtom(buf, enc, r.id, seq, c.prev); err != nil {
		return nil, nil, err
	}
	bc := &branchCommit{a: a, seq: seq, d: d, c: c, enc: *enc, buf: buf, done: make(chan struct{}), recBytes: len(enc.rec)}
	bc.tok = db.track()
	bc.w = db.log.AppendAsync(enc.rec)
	select {
	case <-bc.w.Done():
		// Written already, or refused (too large for a segment, the log
		// closed or failed): in either case nothing is chained to it yet.
		if _, err := bc.w.Wait(context.Background()); err != nil {
			db.untrack(bc.tok)
			if tooLargeForLog(err) {
				return nil, nil, fmt.Errorf("%w: engine: commit run %q branch %q: %w", ErrTooLarge, r.id, b.name, err)
			}
			err = advise(err)
			db.failLog(err)
			return nil, nil, fmt.Errorf("engine: commit run %q branch %q: %w", r.id, b.name, err)
		}
	default:
	}
	delete(br.live, b.name)
	a.mu.Lock()
	a.mu.done = true // no Do after this: the record lists its actions
	a.mu.Unlock()
	br.queue = append(br.queue, bc)
	br.writes = append(br.writes, atomWrites{seq: seq, keys: writes})
	br.tailSeq, br.tailHead, br.tailBound = seq, enc.head, bound
	br.trimLocked(r.mu.lastSeq)
	return bc, nil, nil
}

// enqueueCheckLocked is what enqueue checks before it writes: the run's
// state, the conflict rule, the delta against the frame. A conflict ends
// the branch.
func (a *Atom) enqueueCheckLocked(br *branchSet, d *frame.Delta, writes []StateKey) error {
	r := a.run
	if br.failed != nil {
		return br.failed
	}
	if r.mu.broken != nil {
		return r.mu.broken
	}
	if err := r.materializeLocked(); err != nil {
		return err
	}
	if err := br.conflictLocked(r.id, a.branch, writes); err != nil {
		a.endBranchLocked(br)
		a.observeFail(err.Error())
		return err
	}
	// The atoms queued before it wrote none of what it writes (the
	// conflict check), so it applies to the frame they will leave exactly
	// as to the frame published now.
	if err := r.mu.frame.CanApply(d); err != nil {
		return fmt.Errorf("%w: run %q branch %q: %v", ErrInvalidDelta, r.id, a.branch.name, err)
	}
	return nil
}

// endBranchLocked ends branch a without a commit: its name is free again.
func (a *Atom) endBranchLocked(br *branchSet) {
	delete(br.live, a.branch.name)
	a.mu.Lock()
	a.mu.done = true
	a.mu.Unlock()
	br.trimLocked(a.run.mu.lastSeq)
	a.run.branchIdleLocked()
}

// publishBranchesLocked applies, in seq order, every queued commit that is
// durable and whose predecessors are applied.
func (r *Run) publishBranchesLocked() {
	br := r.mu.br
	for len(br.queue) > 0 && (br.queue[0].durable || r.db.landed(br.queue[0])) {
		bc := br.queue[0]
		br.queue[0] = nil
		br.queue = br.queue[1:]
		bc.a.branch.seq.Store(bc.seq)
		err := bc.a.publishLocked(bc.seq, bc.d, bc.c, bc.enc.head, bc.pos, bc.enc.grown)
		r.db.untrack(bc.tok)
		bc.settled, bc.err = true, err
		close(bc.done)
		if err != nil {
			r.failBranchesLocked(nil, err)
			return
		}
		r.afterCommitLocked()
	}
	br.trimLocked(r.mu.lastSeq)
	r.branchIdleLocked()
}

// landed reports whether bc's record is durable already, and marks it so:
// the commit that publishes the records before it publishes it too, in
// the same hold of the run's lock, rather than wait for bc's own goroutine
// to be scheduled. A failure is left to that goroutine to report.
func (db *DB) landed(bc *branchCommit) bool {
	select {
	case <-bc.w.Done():
	default:
		return false
	}
	ps, err := bc.w.Wait(context.Background())
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
	bc.durable, bc.pos = true, ps[0]
	db.noteAppended(len(bc.enc.rec))
	return true
}

// failBranchesLocked fails bc (nil: the first queued) and every commit
// queued after it: their records are chained to its record, which is not
// durable (the log failed), so theirs are not either.
func (r *Run) failBranchesLocked(bc *branchCommit, err error) {
	br := r.mu.br
	if br.failed == nil {
		br.failed = err
	}
	i := 0
	if bc != nil {
		i = slices.Index(br.queue, bc)
	}
	for _, c := range br.queue[max(i, 0):] {
		if !c.settled {
			c.settled, c.err = true, err
			r.db.untrack(c.tok)
			close(c.done)
		}
	}
	br.queue = br.queue[:max(i, 0)]
}

// failBranch is Fail of a branch: it ends the branch, which reserved no
// seq, without a record.
func (a *Atom) failBranch(reason string) error {
	r := a.run
	r.mu.Lock()
	defer r.mu.Unlock()
	br := r.mu.br
	if br == nil || br.live[a.branch.name] != a {
		return fmt.Errorf("%w: run %q branch %q", ErrAtomDone, r.id, a.branch.name)
	}
	a.endBranchLocked(br)
	r.db.counters.fails.Add(1)
	a.observeFail(reason)
	return nil
}

// otherBranchKey reports whether key is a default key of another branch
// of the run than a's.
func (a *Atom) otherBranchKey(key string) bool {
	run := "ck1b-" + strconv.Itoa(len(a.run.id)) + ":" + a.run.id + ":" // BranchKey's of this run
	mine := ledger.BranchKey(a.run.id, a.branch.name, 0)
	return strings.HasPrefix(key, run) && !strings.HasPrefix(key, mine[:len(mine)-1])
}
