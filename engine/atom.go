package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
	"github.com/zeebo/blake3"
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

	mu struct {
		sync.Mutex
		done  bool   // committed or failed
		calls uint32 // Do calls with a default key so far: the next default key's index
		// retry holds, by the index-0 fingerprint of an action (its tool
		// and sanitized args), the sorted indexes of its failed default-key
		// Do calls, for a retry of it to take again (takeIndex).
		retry   map[ledger.Fingerprint][]uint32
		actions []atomAction
	}
}

type atomAction struct {
	index  uint32
	fp     ledger.Fingerprint
	result []byte
}

// Seq returns the atom's seq.
func (a *Atom) Seq() uint64 { return a.seq }

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
	if index != 0 {
		in = in.WithDefaultKey(index)
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
	action := in.WithDefaultKey(0).Fingerprint // as prepare named it
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

// prepareResolve is prepare for Resolve and ResolveFailed. An action with
// an explicit key is named by it. An action with a default key names the
// in-doubt default-key action of this atom with the same tool and
// sanitized args (contract v1): the one Do just reported, one the crash
// interrupted, or the atom's next default-key Do. Exactly one must match:
// none is ErrNotInDoubt, two or more (the atom made the same call twice
// and both are in doubt) is ErrAmbiguousResolve.
func (a *Atom) prepareResolve(ctx context.Context, act ledger.Action) (*ledger.Intent, error) {
	in, err := a.prepare(ctx, act, false)
	if err != nil || act.Key != "" {
		return in, err
	}
	db := a.run.db
	a.mu.Lock()
	last := a.mu.calls // the next default-key Do's index is a candidate too
	a.mu.Unlock()
	a.run.mu.Lock()
	if a.run.mu.interruptedSeq == a.seq {
		for _, x := range a.run.mu.inflight {
			last = max(last, x.Index)
		}
	}
	a.run.mu.Unlock()
	var found []*ledger.Intent
	for i := uint32(0); i <= last; i++ {
		c := in
		if i != in.Index {
			var err error
			if c, err = a.lineageIntent(ctx, in.WithDefaultKey(i)); err != nil {
				return nil, err
			}
		}
		if e, ok := db.ledger.Lookup(c.Fingerprint); ok && e.Status == ledger.StatusIntent && !e.InFlight {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("%w: no default-key call of %q with these args is in doubt in run %q seq %d "+
			"(calls 0..%d checked); an action with an explicit key is resolved with that key",
			ErrNotInDoubt, act.Tool, a.run.id, a.seq, last)
	}
	keys := make([]string, len(found))
	for i, c := range found {
		keys[i] = c.Key
	}
	return nil, fmt.Errorf("%w: %d default-key calls of %q with these args are in doubt in run %q seq %d (keys %q); "+
		"use ResolveInDoubt with the InDoubtError of the one to settle, or Resolve with its key",
		ErrAmbiguousResolve, len(found), act.Tool, a.run.id, a.seq, keys)
}

// prepareInDoubt is prepare for ResolveInDoubt and ResolveInDoubtFailed:
// the intent of the action e reports, which must be in doubt in this atom.
func (a *Atom) prepareInDoubt(ctx context.Context, e *ledger.InDoubtError) (*ledger.Intent, error) {
	db := a.run.db
	if e == nil {
		return nil, fmt.Errorf("%w: nil InDoubtError (run %q seq %d)", ErrNotInDoubt, a.run.id, a.seq)
	}
	if e.RunID != a.run.id || e.Seq != a.seq {
		return nil, fmt.Errorf("%w: the InDoubtError names run %q seq %d, this atom is run %q seq %d",
			ErrNotInDoubt, e.RunID, e.Seq, a.run.id, a.seq)
	}
	if err := db.checkOpen(); err != nil {
		return nil, err
	}
	done, _, err := a.takeIndex(ctx, ledger.Fingerprint{}, false)
	if err != nil {
		return nil, err
	}
	if done {
		return nil, fmt.Errorf("%w: run %q seq %d", ErrAtomDone, a.run.id, a.seq)
	}
	if err := db.waitLedger(ctx); err != nil {
		return nil, err
	}
	if en, ok := db.ledger.Lookup(e.Fingerprint); !ok || en.Status != ledger.StatusIntent {
		return nil, fmt.Errorf("%w: %q with key %q (fingerprint %s) in run %q seq %d",
			ErrNotInDoubt, e.Tool, e.Key, e.Fingerprint.String()[:16], a.run.id, a.seq)
	}
	return &ledger.Intent{Fingerprint: e.Fingerprint, RunID: e.RunID, Seq: e.Seq, Index: e.Index, Tool: e.Tool, Key: e.Key}, nil
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
// agent reconciles with the downstream and calls Resolve.
//
// The returned slice belongs to the caller.
func (a *Atom) Do(ctx context.Context, act ledger.Action, exec ledger.Exec) ([]byte, error) {
	db := a.run.db
	if exec == nil {
		return nil, fmt.Errorf("engine: run %q seq %d: nil exec for %q", a.run.id, a.seq, act.Tool)
	}
	in, err := a.prepare(ctx, act, true)
	if err != nil {
		return nil, err
	}
	j := &journal{db: db}
	if db.opts.Durability == Relaxed {
		j.relaxed, j.landed = true, make(chan struct{})
		defer close(j.landed)
	}
	var ran bool
	// recorded is the result as its certificate holds it (scrubbed of the
	// action's secrets): the atom chains its digest, so that verify, which
	// reads the certificate, finds the same.
	result, recorded, err := db.ledger.DoRecorded(ctx, j, in, func(ctx context.Context, key string) ([]byte, error) {
		ran = true
		res, err := exec(ctx, key)
		if err == nil && len(res) > db.maxResult() {
			// Too large to certify: certify a failure that says so rather
			// than leave the action in doubt (see MaxResultSize).
			return nil, fmt.Errorf("%w: run %q seq %d: %q returned a result of %d bytes, the limit is %d (engine.MaxResultSize); "+
				"the action ran, and is recorded as failed for this reason: a later Do calls exec again with key %q",
				ErrTooLarge, a.run.id, a.seq, act.Tool, len(res), db.maxResult(), key)
		}
		return res, err
	})
	db.counters.actions.Add(1)
	if !ran && err == nil {
		db.counters.deduped.Add(1)
	}
	if err != nil {
		if act.Key == "" {
			a.releaseIndex(in)
		}
		return nil, actionError(in, err)
	}
	a.record(in, recorded) // only hashed at Commit, never changed
	return append([]byte(nil), result...), nil
}

// Resolve records the outcome of an in-doubt action that the agent found by
// asking the downstream: from then on Do of that action returns result
// without calling exec. The action is matched by fingerprint, so it must be
// the same action (tool, args, key) that Do reported in doubt. With an
// explicit key it names the action with that key. With a default key
// (Action.Key empty) it names the in-doubt default-key action of this atom
// with the same tool and sanitized args: the one Do just reported
// (Do -> ErrInDoubt -> ask the downstream -> Resolve(act)), one the crash
// interrupted, or the atom's next default-key Do. If none is in doubt it
// fails with ErrNotInDoubt rather than certify an action that was never
// dispatched (and leave the real one in doubt, for a later Do to run
// again); if two are (the atom made the same call twice), it fails with
// ErrAmbiguousResolve, and the agent settles each with ResolveInDoubt.
// Resolve takes no default-key index: later default keys never move.
func (a *Atom) Resolve(ctx context.Context, act ledger.Action, result []byte) error {
	in, err := a.prepareResolve(ctx, act)
	if err != nil {
		return err
	}
	return a.resolve(ctx, in, result)
}

// ResolveFailed records that an in-doubt action did not take effect (the
// agent asked the downstream and found no trace of it): the action is
// closed as failed, and a later Do calls exec again with the same key. The
// action is named as for Resolve.
func (a *Atom) ResolveFailed(ctx context.Context, act ledger.Action, reason string) error {
	in, err := a.prepareResolve(ctx, act)
	if err != nil {
		return err
	}
	return a.resolveFailed(ctx, in, reason)
}

// ResolveInDoubt is Resolve of the action that Do reported in doubt as e,
// which it names exactly (by fingerprint): the agent need not rebuild the
// action or its key. The action counts as done in this atom with result,
// which the agent goes on with; a Do of the same action (its key: e.Key)
// returns result too. It fails with ErrNotInDoubt if e is of another atom
// or its action is no longer in doubt.
//
//	out, err := atom.Do(ctx, act, exec)
//	var doubt *ledger.InDoubtError
//	if errors.As(err, &doubt) {
//		if res, ok := askDownstream(doubt.Key); ok {
//			out, err = res, atom.ResolveInDoubt(ctx, doubt, res)
//		}
//	}
func (a *Atom) ResolveInDoubt(ctx context.Context, e *ledger.InDoubtError, result []byte) error {
	in, err := a.prepareInDoubt(ctx, e)
	if err != nil {
		return err
	}
	return a.resolve(ctx, in, result)
}

// ResolveInDoubtFailed is ResolveFailed of the action that Do reported in
// doubt as e. To try the action again, the agent calls Do with Key set to
// e.Key: exec is then called with that key, and no later default key moves.
func (a *Atom) ResolveInDoubtFailed(ctx context.Context, e *ledger.InDoubtError, reason string) error {
	in, err := a.prepareInDoubt(ctx, e)
	if err != nil {
		return err
	}
	return a.resolveFailed(ctx, in, reason)
}

func (a *Atom) resolve(ctx context.Context, in *ledger.Intent, result []byte) error {
	db := a.run.db
	if err := db.ledger.Resolve(ctx, &journal{db: db}, in, result); err != nil {
		return fmt.Errorf("engine: resolve %q (key %q) in run %q seq %d: %w", in.Tool, in.Key, a.run.id, a.seq, err)
	}
	a.record(in, append([]byte(nil), result...))
	return nil
}

func (a *Atom) resolveFailed(ctx context.Context, in *ledger.Intent, reason string) error {
	db := a.run.db
	if err := db.ledger.ResolveFailed(ctx, &journal{db: db}, in, reason); err != nil {
		return fmt.Errorf("engine: resolve %q (key %q) in run %q seq %d as failed: %w", in.Tool, in.Key, a.run.id, a.seq, err)
	}
	return nil
}

// Commit makes the atom durable: it encodes the delta, links it into the
// run's chain, appends it to the log, waits for the group commit's fsync and
// only then applies it to the in-memory frame. A delta that does not apply
// to the frame (an unknown subgoal, say) is refused with ErrInvalidDelta and
// the atom stays running, as it does after any other error.
//
// The run's lock is not held while the record is encoded, written and
// synced: until the record is durable the run's readers (LastSeq, Head,
// Info, State, StateAt) see it as of the previous atom, and then see the
// new atom in all of them at once, before Commit returns. Begin, Fail,
// another Commit and the atom's Do and Resolve calls wait for the outcome.
func (a *Atom) Commit(ctx context.Context, d *frame.Delta) error {
	r, db := a.run, a.run.db
	if d == nil {
		return fmt.Errorf("%w: run %q seq %d", ErrNilDelta, r.id, a.seq)
	}
	if err := db.checkOpen(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := a.startCommit(ctx, d)
	if err != nil {
		return err
	}

	// The run is unlocked from here to publishLocked: nothing but this
	// Commit moves its head or frame meanwhile (Run.mu.writing).
	buf := getBuf()
	defer putBuf(buf)
	fps := make([]ledger.Fingerprint, len(c.actions))
	for i, act := range c.actions {
		fps[i] = act.fp
	}
	delta := frame.AppendDelta(buf.delta[:0], d)
	body := record.AppendAtomBody(buf.body[:0], fps, delta)
	if err := checkRecordSize(r.id, a.seq, "the atom's record (delta and action fingerprints)", body); err != nil {
		buf.delta, buf.body = delta, body
		r.mu.Lock()
		r.endWriteLocked()
		r.mu.Unlock()
		return err
	}
	payload := append(buf.payload[:0], body...)
	for _, act := range c.actions {
		sum := blake3.Sum256(act.result)
		payload = append(payload, sum[:]...)
	}
	head := db.hasher.Link(r.id, a.seq, c.prev, payload)
	rec := record.AppendAtomHeader(buf.rec[:0], r.id, a.seq, head)
	rec = db.comp.Compress(rec, body, db.curDict.Load())
	buf.delta, buf.body, buf.payload, buf.rec = delta, body, payload, rec

	// Registered before the append, released once the state shows the
	// atom: an engine checkpoint that captures the run before that replays
	// from below the record.
	tok := db.track()
	pos, err := db.append(ctx, rec)
	r.mu.Lock()
	if err != nil {
		err = fmt.Errorf("engine: commit run %q seq %d: %w", r.id, a.seq, err)
	} else {
		err = a.publishLocked(d, c, head, pos, len(delta))
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
	db.sample(body)
	return nil
}

// pendingCommit is what a Commit takes from its run and atom, under their
// locks, before it writes.
type pendingCommit struct {
	prev      chain.Hash   // the run's head, h(seq-1), which the record links to
	actions   []atomAction // the atom's actions the record covers; read only
	sizeBound int64        // the frame's size bound after the delta (checkFrameSizeLocked)
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
	r.startWriteLocked()
	n := len(a.mu.actions)
	return pendingCommit{prev: r.mu.head, actions: a.mu.actions[:n:n], sizeBound: sizeBound}, nil
}

// publishLocked applies the atom, whose record is durable at pos, to the
// run's state in memory: its frame, last seq, head and positions change
// together, under r.mu. The atom is then done.
func (a *Atom) publishLocked(d *frame.Delta, c pendingCommit, head chain.Hash, pos wal.Pos, deltaLen int) error {
	r := a.run
	if r.mu.broken != nil {
		// Set while the record was written (the registry found the log and
		// CHECKPOINT in disagreement): the state in memory is not the log's
		// and must not take the atom.
		return fmt.Errorf("engine: commit run %q seq %d: the atom is in the log, but the run's state in memory is no longer trusted: %w",
			r.id, a.seq, r.mu.broken)
	}
	if err := r.mu.frame.Apply(d); err != nil {
		// CanApply accepted the delta and the frame has not changed since,
		// so this is a bug, and the frame in memory is no longer the
		// durable one.
		r.mu.broken = fmt.Errorf("engine: run %q seq %d: delta validated but did not apply: %w", r.id, a.seq, err)
		return r.mu.broken
	}
	r.mu.lastSeq = a.seq
	r.noteFrameSizeLocked(c.sizeBound)
	r.mu.head = head
	r.mu.positions = append(r.mu.positions, pos)
	r.mu.deltaBytes += int64(deltaLen)
	r.mu.atom = nil
	if r.mu.interruptedSeq == a.seq {
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

	rec := record.AppendFail(nil, r.id, a.seq, reason)
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
	}
	db.untrack(tok)
	r.endWriteLocked()
	if err != nil {
		return fmt.Errorf("engine: fail run %q seq %d: %w", r.id, a.seq, err)
	}
	db.counters.fails.Add(1)
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
	if !r.db.snapshotPolicy().Due(since, time.Since(r.mu.snapTime)) {
		return false
	}
	return r.mu.deltaBytes*4 >= r.mu.snapFrameBytes || time.Since(r.mu.snapTime) >= r.db.opts.SnapshotInterval
}

// journal is the ledger's durable side, over the engine's log. The ledger
// runs each write and applies its outcome under its checkpoint gate, so an
// engine checkpoint never sees a record written but not applied.
type journal struct {
	db      *DB
	relaxed bool
	// landed is closed when the ledger call this journal serves returned,
	// so the ledger has applied what the journal wrote.
	landed chan struct{}
}

func (j *journal) write(ctx context.Context, kind record.Kind, body []byte, c *ledger.Certificate, wait bool) (ledger.Loc, error) {
	db := j.db
	if err := ctx.Err(); err != nil {
		return ledger.Loc{}, err
	}
	if len(body) > MaxSize {
		return ledger.Loc{}, fmt.Errorf("%w: %s record of %d bytes, the limit is %d (engine.MaxSize); nothing was written",
			ErrTooLarge, kind, len(body), MaxSize)
	}
	rec := record.AppendLedger(make([]byte, 0, 1+len(body)/2+16), kind, body, db.comp, db.curDict.Load())
	db.sample(body)
	if !wait {
		// Relaxed: enqueue and return at once. The fsync of the atom's
		// commit covers this record (one ordered log); the goroutine tells
		// the ledger where the certificate landed. An engine checkpoint
		// waits for these goroutines before it takes the ledger's table, so
		// the table never names a record that is not durable.
		db.relaxed.Add(1)
		w := db.log.AppendAsync(rec)
		landed := j.landed
		go func() {
			defer db.relaxed.Done()
			ps, err := w.Wait(context.Background())
			if err != nil {
				// The log's error is sticky: the commit reports it. The ledger
				// holds this certificate without a location, so no engine
				// checkpoint may persist its table from now on. (A record too
				// large for a segment is the same: the ledger believes it.)
				db.failLog(err)
				return
			}
			db.noteAppended(len(rec))
			if c != nil {
				// After the ledger applied the certificate itself, or it
				// would ignore this update of an action still in flight.
				<-landed
				db.ledger.ApplyCertificate(c, ps[0], true)
			}
		}()
		return ledger.Loc{}, nil
	}
	pos, err := db.append(ctx, rec)
	if err != nil {
		return ledger.Loc{}, err
	}
	return pos, nil
}

func (j *journal) WriteIntent(ctx context.Context, in *ledger.Intent) (ledger.Loc, error) {
	return j.write(ctx, record.KindIntent, ledger.AppendIntent(nil, in), nil, !(j.relaxed && in.Idempotent))
}

func (j *journal) WriteCertificate(ctx context.Context, c *ledger.Certificate) (ledger.Loc, error) {
	return j.write(ctx, record.KindCert, ledger.AppendCertificate(nil, c), c, !j.relaxed)
}

func (j *journal) ReadCertificate(loc ledger.Loc) (*ledger.Certificate, error) {
	return j.db.readCertificate(loc)
}

// readRecord reads and decodes the record of kind at pos; the ledger's
// records are decoded too. The record is the caller's.
func (db *DB) readRecord(pos wal.Pos, kind record.Kind) (*record.Record, error) {
	raw, err := db.log.ReadAt(pos)
	if err != nil {
		return nil, fmt.Errorf("engine: read %s at %v: %w", kind, pos, err)
	}
	var r record.Record
	if err := db.decoder(true).Decode(raw, pos, db.segmentFile(pos.Segment), &r); err != nil {
		return nil, err
	}
	if r.Kind != kind {
		return nil, &CorruptionError{File: db.segmentFile(pos.Segment), Offset: pos.Offset, Run: r.Run, Seq: r.Seq,
			Reason: fmt.Sprintf("the record is a %s, not the %s the index names", r.Kind, kind)}
	}
	return &r, nil
}

func (db *DB) readCertificate(loc ledger.Loc) (*ledger.Certificate, error) {
	r, err := db.readRecord(loc, record.KindCert)
	if err != nil {
		return nil, err
	}
	return r.Cert, nil // a view of r.Plain, which is this call's own
}

func (db *DB) readIntent(loc ledger.Loc) (*ledger.Intent, error) {
	r, err := db.readRecord(loc, record.KindIntent)
	if err != nil {
		return nil, err
	}
	return r.Intent, nil
}

// applyAtomBody decompresses an atom's body and applies its delta to f.
func (db *DB) applyAtomBody(f *frame.Frame, run string, seq uint64, compressed []byte) error {
	return record.ApplyAtom(db.comp, f, run, seq, compressed, db.path(layout.WALDir))
}

// encBuf holds the scratch buffers of one Commit.
type encBuf struct{ delta, body, payload, rec []byte }

var bufPool = sync.Pool{New: func() any { return &encBuf{} }}

func getBuf() *encBuf { return bufPool.Get().(*encBuf) }

func putBuf(b *encBuf) {
	const keep = 1 << 20 // don't pin huge buffers
	if cap(b.rec) > keep || cap(b.payload) > keep {
		return
	}
	bufPool.Put(b)
}
