package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/checkpoint"
	"github.com/continuumdb/continuum/internal/mailbox"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Atom is one thought-action cycle of a run, the unit of durability: after
// a crash it is wholly present (committed) or absent. Its methods are safe
// for concurrent use, but default idempotency keys depend on the order of
// Do calls, so an agent that relies on them issues its calls in a
// deterministic order.
//
// A default key numbers the atom's Do calls with a default key, and
// nothing else: Resolve, ResolveFailed, ResolveInDoubt,
// ResolveInDoubtFailed and Do calls with an explicit key take no number,
// nor does a Do rejected before it could write an intent; a Do whose exec
// failed gives its number to the atom's next Do of the same action (Do).
// An atom re-begun after a crash therefore derives the keys of the run that
// never crashed, however it settled an in-doubt action on the way.
type Atom struct {
	run     *Run
	seq     uint64
	resumed bool
	obs     AtomObserver // Options.Observer's for this atom; nil: none (observer.go)
	// msgs is what the atom sent and received (messages.go); guarded by
	// run.mu.
	msgs mailbox.Draft
	// seal is set on the atom that completes a rollback: its rollback
	// record's seal, which the atom's chained payload ends with
	// (record.RollbackSeal). Immutable.
	seal []byte
	// branch is set for an atom of Run.Branch (seq is then 0: a branch
	// takes its seq when it commits); nil for Begin's. Immutable.
	branch *atomBranch

	mu struct {
		sync.Mutex
		done  bool   // committed or failed
		calls uint32 // Do calls with a default key so far: the next default key's index
		// retry holds, by the index-0 fingerprint of an action (its tool
		// and sanitized args), the sorted indexes of its failed default-key
		// Do calls, for a retry of it to take again (takeIndex).
		retry   map[ledger.Fingerprint][]uint32
		actions []atomAction
		// started lists the actions whose intent this atom wrote, from the
		// moment it is durable: an engine checkpoint taken while their
		// exec runs lists them with the interrupted atom (Run.Interrupted
		// after a restart), as a replay of their intents would.
		started []layout.InflightAction
	}
}

// noteStarted records that in's intent is written (see started).
func (a *Atom) noteStarted(in *ledger.Intent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.mu.started {
		if s.FP == in.Fingerprint {
			return
		}
	}
	a.mu.started = append(a.mu.started, layout.InflightAction{Index: in.Index, FP: in.Fingerprint})
}

type atomAction struct {
	index  uint32
	fp     ledger.Fingerprint
	result []byte
}

// Seq returns the atom's seq. A branch has none until its Commit
// returned nil: Seq is 0 until then.
func (a *Atom) Seq() uint64 {
	if a.branch != nil {
		return a.branch.Seq()
	}
	return a.seq
}

// Interrupted reports whether this atom's seq is the one a crash
// interrupted: it was running when the previous process stopped, and its
// actions are those Run.Interrupted lists.
func (a *Atom) Interrupted() bool { return a.resumed }

// Resumed is Interrupted.
//
// Deprecated: use Interrupted, the one name for the atom a crash stopped
// (Run.Interrupted, RunInfo.Interrupted, RunSummary.Interrupted). Resumed
// will be removed in the release after next.
func (a *Atom) Resumed() bool { return a.Interrupted() }

// prepare checks that the store and the atom are open, validates an action,
// fills in its default key, and waits for the ledger's table: it returns
// the intent the ledger records for the action. For a Do (take), a default
// key takes a default-key index (takeIndex says which); an explicit key
// takes none, nor does a Resolve (take false: prepareResolve finds the
// index). The intent's Index is that index (for an explicit key: the
// number of default-key Do calls before it).
//
// The index is taken last, once the action is valid and the ledger ready:
// a call rejected before it could write an intent (invalid args, a closed
// store, a done atom, a cancelled context) moves no default key. One that
// fails after taking it (the lineage lookup) gives it back (releaseIndex).
func (a *Atom) prepare(ctx context.Context, act ledger.Action, take bool) (*ledger.Intent, error) {
	db := a.run.db
	if err := db.checkOpen(); err != nil {
		return nil, err
	}
	// Validated at index 0: the args, tool and secrets do not depend on
	// the index, and the index-0 fingerprint names the action (tool and
	// sanitized args) among the atom's default-key calls (retryOf).
	in, err := ledger.NewIntent(act, a.run.id, a.seq, 0)
	if err != nil {
		return nil, fmt.Errorf("engine: run %q seq %d (%s): %w", a.run.id, a.seq, act.Tool, err)
	}
	if err := db.waitLedger(ctx); err != nil {
		return nil, err
	}
	take = take && act.Key == ""
	done, index, err := a.takeIndex(ctx, in.Fingerprint, take)
	if err != nil {
		return nil, err
	}
	if done {
		return nil, fmt.Errorf("%w: run %q seq %d", ErrAtomDone, a.run.id, a.seq)
	}
	if act.Key != "" {
		in.Index = index
		return in, nil
	}
	if index != 0 || a.branch != nil {
		in = a.withDefaultKey(in, index)
	}
	if take && a.resumed && a.branch == nil {
		// A call that differs from the interrupted attempt's at its index
		// (resumekey.go).
		c, err := a.resumedCall(ctx, in)
		if err != nil {
			a.untakeIndex(index)
			return nil, err
		}
		if c != in {
			return c, nil // its own key: no lineage's call had it
		}
	}
	c, err := a.lineageIntent(ctx, in) // a fork's repeat of its parent's action
	if err != nil && take {
		a.releaseIndex(in)
	}
	return c, err
}

// takeIndex reports whether the atom is done, and otherwise the index of
// a default key for the action whose index-0 fingerprint is action; with
// take set, it takes it. A Commit or Fail of the atom in flight is waited
// for, as its lock was before: a Do that comes meanwhile finds the atom
// done if it committed, rather than start an action that the committed
// record does not cover.
//
// The index taken is the lowest one that an earlier Do of the same action
// (same tool, same sanitized args, default key) in this atom took and gave
// back because it failed without leaving the action in doubt (releaseIndex),
// and otherwise the next new one. A retry of a failed Do therefore calls
// exec again with the failed call's key, and the indexes of the calls after
// it are those of an atom whose first try succeeded.
func (a *Atom) takeIndex(ctx context.Context, action ledger.Fingerprint, take bool) (done bool, index uint32, err error) {
	if err := a.run.lockIdle(ctx); err != nil {
		return false, 0, err
	}
	defer a.run.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.done {
		return true, 0, nil
	}
	if !take {
		return false, a.mu.calls, nil
	}
	if free := a.mu.retry[action]; len(free) > 0 {
		index = free[0] // the lowest: the slice is kept sorted
		if len(free) == 1 {
			delete(a.mu.retry, action)
		} else {
			a.mu.retry[action] = free[1:]
		}
		return false, index, nil
	}
	index = a.mu.calls
	a.mu.calls++
	return false, index, nil
}

// releaseIndex gives back the default-key index of in, a Do that returned
// an error, for the next Do of the same action in this atom (takeIndex),
// unless the ledger holds the action in doubt (an intent without a
// certificate): that one is settled by Resolve, and a new key for a retry
// is what the contract promises there. An action recorded as failed
// (StatusFailed: exec returned an error, or its result was too large) or
// never recorded (the call stopped before its intent was durable) is given
// back.
func (a *Atom) releaseIndex(in *ledger.Intent) {
	if e, ok := a.run.db.ledger.Lookup(in.Fingerprint); ok && e.Status != ledger.StatusFailed && e.Status != ledger.StatusNone {
		return
	}
	action := a.withDefaultKey(in, 0).Fingerprint // as prepare named it
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.done {
		return
	}
	if a.mu.retry == nil {
		a.mu.retry = make(map[ledger.Fingerprint][]uint32)
	}
	free := a.mu.retry[action]
	if i, found := slices.BinarySearch(free, in.Index); !found {
		a.mu.retry[action] = slices.Insert(free, i, in.Index)
	}
}

// record adds an action to the atom's list, which the chain covers. An
// action is listed once, however often the atom calls it (a Resolve then a
// Do of the same action, say).
func (a *Atom) record(in *ledger.Intent, result []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, act := range a.mu.actions {
		if act.fp == in.Fingerprint {
			return
		}
	}
	a.mu.actions = append(a.mu.actions, atomAction{index: in.Index, fp: in.Fingerprint, result: result})
}

// Do performs an external action at most once. If the ledger holds a
// certificate for the action's fingerprint, Do returns the certified result
// and exec is not called. Otherwise it writes a durable intent, calls exec
// with the idempotency key, writes a durable certificate and returns the
// result. An exec error is recorded and returned, wrapped in an
// *ActionError that names the run, seq, tool and key (errors.Is and
// errors.As still match the exec's own error); a later Do may try again.
// A retry, a later Do in the same atom of the same tool and sanitized args
// with a default key, calls exec with the failed call's key: the atom gives
// a failed call's index to the next Do of the same action. A Do rejected
// before its intent is written (invalid args, a done atom, a closed store)
// takes no index at all.
//
// The certificate stores the result and an exec error scrubbed of the
// action's secrets (ledger.Action's Redact values where exec echoed them,
// and its RedactResult values): this Do returns exec's result and error as
// they were, and every later Do of the action, in this process or after a
// restart, returns the certificate's result. An agent that needs a
// redacted part again must get it from the downstream, not from the store.
//
// An action whose intent is durable but whose certificate is not (the
// process stopped between dispatch and completion) is in doubt: if it is
// declared Idempotent, exec is called again with the same key; otherwise Do
// returns an error matching ledger.ErrInDoubt that carries the key, and the
// agent reconciles with the downstream and calls Resolve. Either happens
// only once the writer that left it in doubt can no longer be executing
// it (Fence.InDoubtAfter, for a replicated store); exec's context carries
// the writer's fencing token and is cancelled when the writer loses its
// lease or at its bound on a call's duration (see FencingToken).
//
// The returned slice belongs to the caller.
func (a *Atom) Do(ctx context.Context, act ledger.Action, exec ledger.Exec) ([]byte, error) {
	if exec == nil {
		return nil, fmt.Errorf("engine: run %q seq %d: nil exec for %q", a.run.id, a.seq, act.Tool)
	}
	in, err := a.prepare(ctx, act, true)
	if err != nil {
		return nil, err
	}
	return a.doIntent(ctx, in, act.Key == "", exec)
}

// doIntent is Do of the intent prepare (or, for a compensation,
// prepareCompensation) built; defaultKey says whether its key is a default
// key, whose index a failed call gives back.
func (a *Atom) doIntent(ctx context.Context, in *ledger.Intent, defaultKey bool, exec ledger.Exec) ([]byte, error) {
	db := a.run.db
	j := &journal{db: db, atom: a}
	if db.opts.Durability == Relaxed {
		j.relaxed, j.landed = true, make(chan struct{})
		defer close(j.landed)
	}
	ctx, obs := a.observeAction(ctx, in, in.Idempotent, false)
	var ran bool
	// prior: the action's intent is in the ledger already (in doubt, or
	// failed): an earlier writer may still be executing it (fencing.go).
	prior := db.fence.Fenced() && db.priorIntent(in)
	if err := db.waitInDoubt(ctx, in); err != nil {
		return nil, actionError(in, err)
	}
	// recorded is the result as its certificate holds it (scrubbed of the
	// action's secrets): the atom chains its digest, so that verify, which
	// reads the certificate, finds the same.
	result, recorded, err := db.ledger.DoRecorded(ctx, j, in, func(ctx context.Context, key string) ([]byte, error) {
		ran = true
		res, err := db.fencedExec(ctx, in, prior, key, exec)
		if err == nil && len(res) > db.maxResult() {
			// Too large to certify: certify a failure that says so rather
			// than leave the action in doubt (see MaxResultSize).
			return nil, fmt.Errorf("%w: run %q seq %d: %q returned a result of %d bytes, the limit is %d (engine.MaxResultSize); "+
				"the action ran, and is recorded as failed for this reason: a later Do calls exec again with key %q",
				ErrTooLarge, a.run.id, a.seq, in.Tool, len(res), db.maxResult(), key)
		}
		return res, err
	})
	db.counters.actions.Add(1)
	if !ran && err == nil {
		db.counters.deduped.Add(1)
	}
	doEnded(obs, ran, err)
	if err != nil {
		if defaultKey {
			a.releaseIndex(in)
		}
		return nil, actionError(in, err)
	}
	a.record(in, recorded) // only hashed at Commit, never changed
	return append([]byte(nil), result...), nil
}

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
	c := pendingCommit{prev: r.mu.head, actions: a.mu.actions[:n:n], sizeBound: sizeBound}
	if err := a.checkCommitLocked(&c); err != nil {
		return pendingCommit{}, err
	}
	r.startWriteLocked()
	return c, nil
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
	r.mu.positions = append(r.mu.positions, pos)
	r.mu.deltaBytes += int64(deltaLen)
	a.publishedLocked(seq, pos, &c)
	r.mu.atom = nil
	if r.mu.interruptedSeq == seq {
		r.mu.interruptedSeq, r.mu.inflight = 0, nil
	}
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
		a.mu.Unlock()
		r.mu.atom = nil
		if r.mu.interruptedSeq == a.seq {
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
	db := r.db
	since := int(r.mu.lastSeq - r.mu.snapSeq)
	if !r.mu.snapQueued && r.snapshotDueLocked(since) {
		select {
		case db.bg.snapJobs <- r:
			r.mu.snapQueued = true
		default: // the queue is full: the periodic sweep picks it up
		}
	}
	if every := db.opts.CheckpointEvery; every > 0 && r.mu.lastSeq%uint64(every) == 0 {
		db.writeChainCheckpointLocked(r)
	}
}

// snapshotDueLocked applies the snapshot policy, with one guard: a snapshot
// waits until the deltas since the last one add up to a quarter of the
// frame, so that snapshotting a large frame every SnapshotEvery atoms never
// costs more than a few times the bytes the atoms themselves wrote.
func (r *Run) snapshotDueLocked(since int) bool {
	return checkpoint.SnapshotDue(r.db.snapshotPolicy(), since, time.Since(r.mu.snapTime), r.mu.deltaBytes, r.mu.snapFrameBytes)
}
