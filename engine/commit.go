package engine

// The commit path: an atom's Commit from its checks to the log and back
// to the run's state, its Fail, and the work after a commit. docs/DESIGN.md
// ("Write path") walks one delta through it hop by hop.

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Commit makes the atom durable: it encodes the delta, links it into the
// run's chain, appends it to the log, waits for the group commit's fsync and
// only then applies it to the in-memory frame. A message text or tool
// output of the delta equal to the certified result of one of the atom's
// actions (a tool message holding the result Do returned) is stored as a
// reference to that certificate rather than a second copy
// (frame.Delta.ReferResults); every reader resolves it, so State, StateAt
// and snapshots hold the text. A delta that does not apply
// to the frame (an unknown subgoal, say) is refused with ErrInvalidDelta and
// the atom stays running, as it does after any other error.
//
// The run's lock is not held while the record is encoded, written and
// synced: until the record is durable the run's readers (LastSeq, Head,
// Info, State, StateAt) see it as of the previous atom, and then see the
// new atom in all of them at once, before Commit returns. Begin, Fail,
// another Commit and the atom's Do and Resolve calls wait for the outcome.
func (a *Atom) Commit(ctx context.Context, d *frame.Delta) error {
	return a.commit(ctx, d, false)
}

// commit is Commit; own says the engine built d (a rollback's
// replace_frame, from the run's own frame, whose sealed values it keeps).
func (a *Atom) commit(ctx context.Context, d *frame.Delta, own bool) error {
	r, db := a.run, a.run.db
	start := a.commitStart()
	if d == nil {
		return fmt.Errorf("%w: run %q seq %d", ErrNilDelta, r.id, a.seq)
	}
	if err := db.checkOpen(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The values of erasable memory keys are sealed with their own data
	// keys before anything checks or writes the delta (erasekey.go).
	d, err := a.prepareDelta(d, own)
	if err != nil {
		return err
	}
	if a.branch != nil {
		return a.commitBranch(ctx, d)
	}
	c, err := a.startCommit(ctx, d)
	if err != nil {
		return err
	}

	// The run is unlocked from here to publishLocked: nothing but this
	// Commit moves its head or frame meanwhile (Run.mu.writing).
	buf := getBuf()
	defer putBuf(buf)
	enc, err := db.encodeAtom(buf, r.id, a.seq, c.prev, c.actions, d, buf.messageExts(c.sent, c.consumed), a.seal)
	if err != nil {
		r.mu.Lock()
		r.endWriteLocked()
		r.mu.Unlock()
		return err
	}
	rec, head, grown := enc.rec, enc.head, enc.grown

	// Registered before the append, released once the state shows the
	// atom: an engine checkpoint that captures the run before that replays
	// from below the record.
	tok := db.track()
	pos, err := db.append(ctx, rec)
	r.mu.Lock()
	if err != nil {
		err = fmt.Errorf("engine: commit run %q seq %d: %w", r.id, a.seq, err)
	} else {
		err = a.publishLocked(a.seq, d, c, head, pos, grown)
	}
	db.untrack(tok)
	r.endWriteLocked()
	if err == nil {
		r.afterCommitLocked()
	}
	r.mu.Unlock()
	if err != nil {
		return err
	}
	db.counters.atoms.Add(1)
	db.sample(enc.body)
	a.observeCommit(start, len(rec), enc.deltaLen, len(c.actions))
	return nil
}

// pendingCommit is what a Commit takes from its run and atom, under their
// locks, before it writes.
type pendingCommit struct {
	prev      chain.Hash   // the run's head, h(seq-1), which the record links to
	actions   []atomAction // the atom's actions the record covers; read only
	sizeBound int64        // the frame's size bound after the delta (checkFrameSizeLocked)
	// sent and consumed are the atom's messages (messages.go); nil for
	// an atom without. Read only.
	sent     []record.SentMessage
	consumed []MessageID
}

// startCommit checks that the atom may commit d and marks the run as
// writing (startWriteLocked). Every error leaves the atom running and
// the run as it was.
func (a *Atom) startCommit(ctx context.Context, d *frame.Delta) (pendingCommit, error) {
	r := a.run
	if err := r.lockIdle(ctx); err != nil {
		return pendingCommit{}, err
	}
	defer r.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.done || r.mu.atom != a {
		return pendingCommit{}, fmt.Errorf("%w: run %q seq %d", ErrAtomDone, r.id, a.seq)
	}
	if r.mu.broken != nil {
		return pendingCommit{}, r.mu.broken
	}
	if err := r.mu.frame.CanApply(d); err != nil {
		return pendingCommit{}, fmt.Errorf("%w: run %q seq %d: %v", ErrInvalidDelta, r.id, a.seq, err)
	}
	sizeBound, err := r.checkFrameSizeLocked(d, a.seq)
	if err != nil {
		return pendingCommit{}, err
	}
	n := len(a.mu.actions)
	a.hookArg = pendingCommit{prev: r.mu.head, actions: a.mu.actions[:n:n], sizeBound: sizeBound}
	if err := a.checkCommitLocked(&a.hookArg); err != nil {
		return pendingCommit{}, err
	}
	r.startWriteLocked()
	return a.hookArg, nil
}

// publishLocked applies the atom, whose record is durable at pos as seq
// (a.seq, or a branch's seq: Seq), to the run's state in memory: its
// frame, last seq, head and positions change together, under r.mu. The
// atom is then done. deltaLen is d's encoded size, its certified results
// inline.
func (a *Atom) publishLocked(seq uint64, d *frame.Delta, c pendingCommit, head chain.Hash, pos wal.Pos, deltaLen int) error {
	r := a.run
	if r.mu.broken != nil {
		// Set while the record was written (the registry found the log and
		// CHECKPOINT in disagreement): the state in memory is not the log's
		// and must not take the atom.
		return fmt.Errorf("engine: commit run %q seq %d: the atom is in the log, but the run's state in memory is no longer trusted: %w",
			r.id, seq, r.mu.broken)
	}
	if err := r.mu.frame.Apply(d); err != nil {
		// CanApply accepted the delta and the frame has not changed since,
		// so this is a bug, and the frame in memory is no longer the
		// durable one.
		r.mu.broken = fmt.Errorf("engine: run %q seq %d: delta validated but did not apply: %w", r.id, seq, err)
		return r.mu.broken
	}
	r.mu.lastSeq = seq
	r.appliedLocked(seq)
	r.noteFrameSizeLocked(c.sizeBound)
	r.mu.head = head
	r.mu.book.Applied(pos, deltaLen)
	a.hookArg = c
	a.publishedLocked(seq, pos, &a.hookArg)
	r.mu.atom = nil
	if r.mu.interruptedSeq == seq {
		r.mu.interruptedSeq, r.mu.inflight = 0, nil
	}
	r.mu.failed.Committed(seq)
	a.mu.Lock()
	a.mu.done = true
	a.mu.Unlock()
	return nil
}

// Fail ends the atom without committing it: its seq is not consumed (the
// next Begin gets the same seq), its delta never happened, and the actions
// it performed stay certified in the ledger, so a retry with the same
// default keys does not repeat them. The failure and its reason are
// recorded durably. As for Commit, the run's readers do not wait for the
// record's fsync; on an error the atom stays running.
func (a *Atom) Fail(ctx context.Context, reason string) error {
	r, db := a.run, a.run.db
	if err := db.checkOpen(); err != nil {
		return err
	}
	if len(reason) > record.MaxFailReason {
		reason = reason[:record.MaxFailReason]
	}
	if a.branch != nil {
		return a.failBranch(reason)
	}
	stored := reason
	if db.sealer != nil {
		b, err := db.sealer.Seal(nil, []byte(reason), record.KindFail, r.id, a.seq)
		if err != nil {
			return fmt.Errorf("engine: fail run %q seq %d: %w", r.id, a.seq, err)
		}
		stored = string(b)
	}
	if err := r.lockIdle(ctx); err != nil {
		return err
	}
	a.mu.Lock()
	done := a.mu.done || r.mu.atom != a
	a.mu.Unlock()
	if done {
		r.mu.Unlock()
		return fmt.Errorf("%w: run %q seq %d", ErrAtomDone, r.id, a.seq)
	}
	r.startWriteLocked()
	r.mu.Unlock()

	rec := record.AppendFail(nil, r.id, a.seq, stored)
	tok := db.track()
	_, err := db.append(ctx, rec)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		a.mu.Lock()
		a.mu.done = true
		r.mu.failed.Note(a.seq, a.mu.started)
		a.mu.Unlock()
		r.mu.atom = nil
		if r.mu.interruptedSeq == a.seq {
			r.mu.failed.Note(a.seq, r.mu.inflight)
			r.mu.interruptedSeq, r.mu.inflight = 0, nil
		}
		a.failedLocked()
	}
	db.untrack(tok)
	r.endWriteLocked()
	if err != nil {
		return fmt.Errorf("engine: fail run %q seq %d: %w", r.id, a.seq, err)
	}
	db.counters.fails.Add(1)
	a.observeFail(reason)
	return nil
}

// afterCommitLocked schedules the background work an atom may make due: a
// snapshot, a chain checkpoint.
func (r *Run) afterCommitLocked() {
	r.queueSnapshotLocked()
	if every := r.db.opts.CheckpointEvery; every > 0 && r.mu.lastSeq%uint64(every) == 0 {
		r.db.writeChainCheckpointLocked(r)
	}
}

// queueSnapshotLocked queues the run's snapshot when atoms since the last
// one make it due (snapshotDueLocked) and none is queued yet.
func (r *Run) queueSnapshotLocked() {
	if r.mu.book.QueueDue(r.db.snapshotPolicy(), r.mu.lastSeq) {
		select {
		case r.db.bg.snapJobs <- r:
			r.mu.book.SnapQueued = true
		default: // the queue is full: the periodic sweep picks it up
		}
	}
}

// snapshotDueLocked applies the snapshot policy, with one guard: a snapshot
// waits until the deltas since the last one add up to a quarter of the
// frame, so that snapshotting a large frame every SnapshotEvery atoms never
// costs more than a few times the bytes the atoms themselves wrote.
func (r *Run) snapshotDueLocked(since int) bool {
	return r.mu.book.SnapshotDue(r.db.snapshotPolicy(), since)
}

// track registers a log write about to happen; the engine checkpoint replays
// from below every registered write until untrack. The returned token is
// passed to untrack once the in-memory state reflects the write.
func (db *DB) track() uint64 { return db.pin(db.log.End()) }

// pin holds the replay floor at or below pos until untrack(token) (track,
// and a pending rollback's record after a restart).
func (db *DB) pin(pos wal.Pos) uint64 {
	db.active.Lock()
	defer db.active.Unlock()
	if db.active.pos == nil { // a DB assembled by hand (replay fuzzing) has none yet
		db.active.pos = map[uint64]wal.Pos{}
	}
	db.active.next++
	db.active.pos[db.active.next] = pos
	return db.active.next
}

func (db *DB) untrack(tok uint64) {
	db.active.Lock()
	delete(db.active.pos, tok)
	db.active.Unlock()
}

// replayFloor returns a log position such that every record below it is
// reflected in the in-memory state, or belongs to a write whose state the
// caller will capture after waiting for it.
func (db *DB) replayFloor() wal.Pos {
	db.active.Lock()
	defer db.active.Unlock()
	floor := db.log.End()
	for _, p := range db.active.pos {
		if p.Less(floor) {
			floor = p
		}
	}
	return floor
}
