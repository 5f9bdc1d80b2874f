package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"

	jrn "github.com/continuumdb/continuum/internal/journal"
	"github.com/continuumdb/continuum/internal/mailbox"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
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
	// retried: an earlier attempt of this seq failed after writing
	// intents (Run's failed calls).
	retried bool
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
		// actions1 and started1 back actions and started for an atom of
		// one action, the common case: no allocation for either.
		actions1 [1]atomAction
		started1 [1]layout.InflightAction
	}
	// hookArg is the capability hooks' argument (checkCommitLocked,
	// publishedLocked): a pointer into the atom, which is on the heap
	// already, rather than to a copy that passing it to the hooks'
	// function values would move to the heap on every Commit. Written
	// only by the atom's one Commit in progress (Run.mu.writing), under
	// the run's lock.
	hookArg pendingCommit
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
	if a.mu.started == nil {
		a.mu.started = a.mu.started1[:0]
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
// takes none, nor does a Resolve (take false: settle.Resolve finds the
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
	if take && (a.resumed || a.retried) && a.branch == nil {
		// A call that differs from the interrupted or failed attempts' at
		// its index (resumekey.go).
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
	if a.mu.actions == nil {
		a.mu.actions = a.mu.actions1[:0]
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
	var j ledger.Journal = (*strictJournal)(a)
	if db.opts.Durability == Relaxed {
		landed := make(chan struct{})
		defer close(landed)
		rj := &relaxedJournal{Journal: db.journal(), a: a}
		rj.Relaxed, rj.Landed = true, landed
		j = rj
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
		if err == nil {
			res, err = db.blobs.Result(ctx, a.blobHolder(), res) // blobs.go
		}
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

// strictJournal is the ledger's Journal for a Do of atom a in a strict
// store: the DB's journal (journal.go), told to the atom of each intent
// written. A *Atom converts to it for nothing, where a journal per Do was
// an allocation.
type strictJournal Atom

func (s *strictJournal) WriteIntent(ctx context.Context, in *ledger.Intent) (ledger.Loc, error) {
	a := (*Atom)(s)
	loc, err := a.run.db.journal().WriteIntent(ctx, in)
	if err == nil {
		a.noteStarted(in)
	}
	return loc, err
}

func (s *strictJournal) WriteCertificate(ctx context.Context, c *ledger.Certificate) (ledger.Loc, error) {
	return (*Atom)(s).run.db.journal().WriteCertificate(ctx, c)
}

func (s *strictJournal) ReadCertificate(loc ledger.Loc) (*ledger.Certificate, error) {
	return (*Atom)(s).run.db.readCertificate(loc)
}

// ReadIntent reads back the intent at loc: a retried action's attempts
// are counted from its last intent (ledger.IntentReader).
func (s *strictJournal) ReadIntent(loc ledger.Loc) (*ledger.Intent, error) {
	return (*Atom)(s).run.db.readIntent(loc)
}

// relaxedJournal is the ledger's Journal for a Do of atom a in a relaxed
// store: the DB's journal, relaxed, told to the atom of each intent
// written.
type relaxedJournal struct {
	jrn.Journal
	a *Atom
}

func (j *relaxedJournal) WriteIntent(ctx context.Context, in *ledger.Intent) (ledger.Loc, error) {
	loc, err := j.Journal.WriteIntent(ctx, in)
	if err == nil {
		j.a.noteStarted(in)
	}
	return loc, err
}

// Both journals read intents back, or a retry policy's schedule is lost.
var (
	_ ledger.IntentReader = (*strictJournal)(nil)
	_ ledger.IntentReader = (*relaxedJournal)(nil)
)
