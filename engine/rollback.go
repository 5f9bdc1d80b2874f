package engine

// Rollback: returning a run to the state of an earlier seq and undoing,
// newest first, the effects of the actions certified after it (a saga's
// compensations). The record and its rules are record/rollback.go's; the
// plan and the pending rollback are internal/saga's. Its crash safety step
// by step (plan, the record's fsync, each compensation through the ledger,
// the completing atom) and the pin that keeps a pending rollback's record
// in the replayed tail are in docs/DESIGN.md ("Compensation and
// rollback").

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/saga"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Undo is one certified action a rollback reaches: the atom that
// performed it (Seq), its fingerprint and tool, and its compensation as
// its intent recorded it, with the key the compensation runs with (never
// empty). A nil Compensation: the action has none, and the rollback does
// not undo it.
type Undo = record.Undo

// RollbackOptions are the options of Run.Rollback.
type RollbackOptions struct {
	// Exec returns the exec that performs compensation u.Compensation
	// (u.Compensation.Tool, with its recorded args), undoing action
	// u.Action of seq u.Seq; it receives the compensation's idempotency
	// key. Required. It is asked only for compensations the rollback
	// still has to run (not for certified ones), and may return nil for
	// a tool it does not know: the rollback then stops with an error
	// before that compensation's intent is written.
	Exec func(u Undo) ledger.Exec
	// AllowNotUndone lets the rollback proceed when some certified
	// action it reaches has no compensation: their effects stay, and
	// RollbackResult.NotUndone lists them. Without it such a rollback
	// fails with ErrNotUndone and writes nothing.
	AllowNotUndone bool
}

// RollbackResult says what a rollback did.
type RollbackResult struct {
	To  uint64 // the seq the run was rolled back to
	Seq uint64 // the atom that completed the rollback: the run's LastSeq after it
	// Undone lists the actions compensated, in the order the compensations
	// ran (newest action first), and Results their compensations' results
	// (Results[i] is Undone[i]'s, the certificate's on a resumed rollback).
	Undone  []Undo
	Results [][]byte
	// NotUndone lists the certified actions that have no compensation,
	// newest first: their effects stay (see AllowNotUndone).
	NotUndone []Undo
	// Resumed says that the rollback's record was written earlier, by a
	// Rollback call that did not finish (an error, or a crash).
	Resumed bool
}

// pendingRollback is a rollback whose record is durable and whose
// completing atom is not (Run.mu.rollback).
type pendingRollback = saga.Pending

// Rollback returns the run to its state at seq to, undoing the actions
// certified after it: it runs the compensation (ledger.Action.Compensate)
// of each action this run certified after to, newest first, each through
// the ledger exactly once, then commits an atom at LastSeq+1 whose delta
// replaces the frame with StateAt(to). History is kept: StateAt of the
// seqs in between still reads them. A compensation's key is its
// Compensate's, or ledger.CompensationKey of the undone action's
// fingerprint, so every rollback that reaches an action runs its
// compensation with the same key.
//
// A certified action without a compensation is reported in
// RollbackResult.NotUndone and refuses the rollback (ErrNotUndone, nothing
// written) unless opts.AllowNotUndone. An in-doubt compensation follows
// Do's rules: an idempotent one is run again with the same key; another
// fails Rollback with an error matching ledger.ErrInDoubt, settled by
// ResolveCompensation or ResolveCompensationFailed. Once its record is
// durable the rollback is pending until its atom commits: Begin and End
// fail with ErrRollbackPending, and Rollback with the same to resumes it
// (RollbackResult.Resumed), running only what is not certified yet.
//
// to must be below LastSeq and, for a fork, at or after its fork point
// (ErrSeqOutOfRange). Rollback fails with ErrAtomInProgress while an atom
// or a branch runs, ErrRunEnded once the run ended, and ErrInDoubt while
// an action of the atom a crash interrupted is in doubt. docs/DESIGN.md
// ("Compensation and rollback") has which actions it undoes exactly.
func (r *Run) Rollback(ctx context.Context, to uint64, opts RollbackOptions) (*RollbackResult, error) {
	db := r.db
	if err := db.checkOpen(); err != nil {
		return nil, err
	}
	if opts.Exec == nil {
		return nil, fmt.Errorf("%w: rollback of run %q: RollbackOptions.Exec is nil", ErrInvalidOptions, r.id)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := r.waitCreated(ctx); err != nil {
		return nil, err
	}
	db.startDirSyncs() // the rollback's first write waits for them
	if err := db.logFailed(); err != nil {
		return nil, fmt.Errorf("engine: rollback of run %q: the log failed earlier; reopen the store: %w", r.id, err)
	}
	a, start, err := r.startRollback(ctx, to, true)
	if err != nil {
		return nil, err
	}
	res, err := saga.Conduct(ctx, &rollbackAtom{capView: (*capView)(r), a: a, st: start, exec: opts.Exec}, to, start.pending, opts.AllowNotUndone, ErrNotUndone)
	if err != nil {
		r.releaseRollbackAtom(a)
	}
	return (*RollbackResult)(res), err
}

// rollbackStart is what startRollback took from the run.
type rollbackStart struct {
	pending  *pendingRollback // the pending rollback to resume; nil: a new one
	head     chain.Hash       // h(a.seq-1)
	inflight []layout.InflightAction
}

// startRollback makes atom a, at LastSeq+1, the run's running atom for a
// rollback to to (or, with fresh false, for settling a compensation of
// the pending rollback), after the checks Rollback documents.
func (r *Run) startRollback(ctx context.Context, to uint64, fresh bool) (*Atom, rollbackStart, error) {
	if err := r.lockIdle(ctx); err != nil {
		return nil, rollbackStart{}, err
	}
	defer r.mu.Unlock()
	var st rollbackStart
	switch rb := r.mu.rollback; {
	case r.mu.broken != nil:
		return nil, st, r.mu.broken
	case r.mu.end != nil || r.mu.ending:
		return nil, st, fmt.Errorf("%w: rollback of run %q: the run has ended", ErrRunEnded, r.id)
	case r.mu.atom != nil:
		return nil, st, fmt.Errorf("%w: rollback of run %q: seq %d is running; commit or fail it first", ErrAtomInProgress, r.id, r.mu.atom.seq)
	case r.mu.br != nil:
		return nil, st, fmt.Errorf("%w: rollback of run %q: branches are in flight; commit or fail them first", ErrAtomInProgress, r.id)
	case !fresh && rb == nil:
		return nil, st, fmt.Errorf("%w: run %q has no pending rollback", ErrNotInDoubt, r.id)
	case rb != nil && fresh && rb.To != to:
		return nil, st, fmt.Errorf("%w: run %q: the rollback to seq %d is not finished (call Rollback with to = %d); a rollback to seq %d must wait for it",
			ErrRollbackPending, r.id, rb.To, rb.To, to)
	case rb == nil && (to >= r.mu.lastSeq || to < r.base):
		return nil, st, fmt.Errorf("%w: rollback of run %q to seq %d: the target must be below the last seq %d and at or after the fork point %d",
			ErrSeqOutOfRange, r.id, to, r.mu.lastSeq, r.base)
	}
	if err := r.materializeLocked(); err != nil {
		return nil, st, err
	}
	seq := r.mu.lastSeq + 1
	a := &Atom{run: r, seq: seq, resumed: r.mu.interruptedSeq == seq}
	if rb := r.mu.rollback; rb != nil {
		a.seal = rb.Seal[:]
		st.pending = rb
	}
	st.head = r.mu.head
	if r.mu.interruptedSeq == seq {
		st.inflight = append([]layout.InflightAction(nil), r.mu.inflight...)
	}
	r.mu.atom = a
	return a, st, nil
}

// releaseRollbackAtom ends atom a of a rollback that did not complete,
// without a record: the rollback stays pending (its record is durable) or,
// if its record was never written, never happened.
func (r *Run) releaseRollbackAtom(a *Atom) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.mu.Lock()
	a.mu.done = true
	a.mu.Unlock()
	if r.mu.atom == a {
		r.mu.atom = nil
	}
}

// rollbackAtom is the atom of a rollback as saga.Conduct drives it.
type rollbackAtom struct {
	*capView
	a    *Atom
	st   rollbackStart
	exec func(Undo) ledger.Exec
}

func (x *rollbackAtom) Seq() uint64 { return x.a.seq }

func (x *rollbackAtom) Plan(ctx context.Context, to uint64) ([]record.Undo, error) {
	return (*Run)(x.capView).planRollback(ctx, to, x.a.seq, x.st.inflight)
}

func (x *rollbackAtom) Write(ctx context.Context, to uint64, undo []record.Undo) (*pendingRollback, error) {
	return (*Run)(x.capView).writeRollback(ctx, x.a, to, x.st.head, undo)
}

func (x *rollbackAtom) Compensate(ctx context.Context, u *Undo) ([]byte, error) {
	return x.a.compensate(ctx, u, x.exec)
}

func (x *rollbackAtom) Complete(ctx context.Context, f *frame.Frame) error {
	return x.a.commit(ctx, new(frame.Delta).ReplaceFrame(f), true)
}

// writeRollback appends the rollback record of atom a and waits for its
// fsync; the rollback is then pending (see the file's comment).
func (r *Run) writeRollback(ctx context.Context, a *Atom, to uint64, head chain.Hash, undo []record.Undo) (*pendingRollback, error) {
	db := r.db
	started := time.Now().UnixNano()
	rec, err := saga.Record(db.sealer, r.id, a.seq, to, head, started, undo)
	if err != nil {
		return nil, err
	}
	if err := checkRecordSize(r.id, a.seq, "the rollback record", rec); err != nil {
		return nil, err
	}
	// Tracked from before the append to the completing atom's commit: the
	// replay floor stays at or below the record (the pin).
	tok := db.track()
	written := rec
	if forgeRollbackRecord != nil {
		written = forgeRollbackRecord(rec)
	}
	if _, err := db.append(ctx, written); err != nil {
		db.untrack(tok)
		return nil, fmt.Errorf("engine: rollback of run %q to seq %d: writing its record: %w", r.id, to, err)
	}
	rb := saga.NewPending(rec, a.seq, to, head, undo, tok)
	r.mu.Lock()
	r.mu.rollback = rb
	r.mu.Unlock()
	a.seal = rb.Seal[:] // before the atom's first action: nothing reads it concurrently
	return rb, nil
}

// compensate runs compensation u.Compensation through the ledger as an
// action of a (Do's rules, with the compensation's intent).
func (a *Atom) compensate(ctx context.Context, u *Undo, execFor func(Undo) ledger.Exec) ([]byte, error) {
	db := a.run.db
	if err := db.checkOpen(); err != nil {
		return nil, err
	}
	if err := db.waitLedger(ctx); err != nil {
		return nil, err
	}
	done, index, err := a.takeIndex(ctx, ledger.Fingerprint{}, false)
	if err != nil {
		return nil, err
	}
	if done {
		return nil, fmt.Errorf("%w: run %q seq %d", ErrAtomDone, a.run.id, a.seq)
	}
	in, err := ledger.CompensationIntent(u.Compensation, u.Action, a.run.id, a.seq, index)
	if err != nil {
		return nil, err
	}
	var exec ledger.Exec
	if e, ok := db.ledger.Lookup(in.Fingerprint); !ok || !(e.Status == ledger.StatusDone || e.Status == ledger.StatusResolved) {
		if exec = execFor(*u); exec == nil {
			return nil, fmt.Errorf("engine: RollbackOptions.Exec gave no exec for tool %q", u.Compensation.Tool)
		}
	} else {
		exec = func(context.Context, string) ([]byte, error) {
			return nil, errors.New("engine: a certified compensation was asked to run again") // never called: the ledger has its certificate
		}
	}
	return a.doIntent(ctx, in, false, exec)
}

// completeRollbackLocked ends the pending rollback that atom seq
// completes, if any: its pin is released.
func (r *Run) completeRollbackLocked(seq uint64) {
	if rb := r.mu.rollback; rb != nil && rb.Seq == seq {
		r.mu.rollback = nil
		r.db.untrack(rb.Pin)
	}
}

// replayRollback applies a rollback record found in the log (recovery,
// saga.Replay): a record of the run's next seq, from its current head, is
// pending until its atom is replayed, and pins the replay floor again
// (pos); one of a seq the run has already committed is reflected.
func (db *DB) replayRollback(r *Run, rec *record.Record, pos wal.Pos) string {
	rb, why := saga.Replay(rec, r.mu.lastSeq, r.mu.head, r.mu.rollback)
	if rb != nil {
		rb.Pin = db.pin(pos)
		r.mu.rollback = rb
	}
	return why
}

// PendingRollback reports the rollback of the run that is begun and not
// finished (its record is durable, its completing atom is not): its
// target, which Rollback takes to resume it. After a restart, an agent
// that finds one calls Rollback(ctx, to, opts) before anything else:
// Begin and End fail with ErrRollbackPending meanwhile.
func (r *Run) PendingRollback() (to uint64, pending bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rb := r.mu.rollback; rb != nil {
		return rb.To, true
	}
	return 0, false
}

// ResolveCompensation settles a compensation of the pending rollback that
// Rollback reported in doubt as e (an *ledger.InDoubtError): the agent
// asked the downstream, with e.Key, and found the compensation happened,
// with result. The resumed Rollback then takes result and does not run it
// again. ResolveCompensationFailed records instead that it did not
// happen: the resumed Rollback runs it again, with the same key. Both fail
// with ErrNotInDoubt when the run has no pending rollback or e is not one
// of its compensations in doubt.
func (r *Run) ResolveCompensation(ctx context.Context, e *ledger.InDoubtError, result []byte) error {
	a, err := r.compensationAtom(ctx)
	if err != nil {
		return err
	}
	defer r.releaseRollbackAtom(a)
	return a.ResolveInDoubt(ctx, e, result)
}

// ResolveCompensationFailed: see ResolveCompensation.
func (r *Run) ResolveCompensationFailed(ctx context.Context, e *ledger.InDoubtError, reason string) error {
	a, err := r.compensationAtom(ctx)
	if err != nil {
		return err
	}
	defer r.releaseRollbackAtom(a)
	return a.ResolveInDoubtFailed(ctx, e, reason)
}

// compensationAtom is the atom of the pending rollback, to settle one of
// its compensations through.
func (r *Run) compensationAtom(ctx context.Context) (*Atom, error) {
	if err := r.db.checkOpen(); err != nil {
		return nil, err
	}
	a, _, err := r.startRollback(ctx, 0, false)
	return a, err
}

// forgeRollbackRecord, set, replaces the rollback record the log gets
// with what it returns, while the completing atom is sealed over the
// original: what a rewrite of the record in the log leaves. Tests of
// tamper evidence only.
var forgeRollbackRecord func(rec []byte) []byte

// pin holds the replay floor at or below pos until untrack(token): what a
// pending rollback's record, replayed from pos, needs.
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
