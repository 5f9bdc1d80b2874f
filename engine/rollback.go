package engine

// Rollback (docs/DESIGN.md, "Compensation and rollback"): internal/saga
// conducts it over rollbackAtom.

import (
	"context"
	"fmt"
	"slices"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/saga"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Undo is one certified action a rollback reaches, with its compensation
// (nil: none) and the key that runs with (record.Undo).
type Undo = record.Undo

// RollbackOptions are the options of Run.Rollback.
type RollbackOptions struct {
	// Exec returns the exec of compensation u.Compensation (required),
	// asked only for those still to run; nil for a tool it does not know
	// stops the rollback before that compensation's intent is written.
	Exec func(u Undo) ledger.Exec
	// AllowNotUndone lets actions without a compensation stay undone
	// (RollbackResult.NotUndone); without it they fail the rollback
	// with ErrNotUndone, nothing written.
	AllowNotUndone bool
}

// RollbackResult says what a rollback did.
type RollbackResult struct {
	To  uint64 // the seq the run was rolled back to
	Seq uint64 // the atom that completed the rollback: the run's LastSeq after it
	// Undone lists the actions compensated, newest first; Results[i] is
	// Undone[i]'s compensation's result.
	Undone  []Undo
	Results [][]byte
	// NotUndone lists the actions without a compensation, newest first.
	NotUndone []Undo
	// Resumed: the record was written by an earlier call (an error, a crash).
	Resumed bool
}

var sagaErrs = saga.Errors{RunEnded: ErrRunEnded, AtomInProgress: ErrAtomInProgress, NotInDoubt: ErrNotInDoubt,
	RollbackPending: ErrRollbackPending, SeqOutOfRange: ErrSeqOutOfRange, NotUndone: ErrNotUndone, TooLarge: ErrTooLarge}

// Rollback returns the run to its state at seq to: the compensations of
// the actions certified after to, newest first, each once, then an atom at
// LastSeq+1 with StateAt(to). Pending (PendingRollback) once its record is
// durable; Rollback with the same to resumes it. docs/DESIGN.md
// ("Run.Rollback's contract in full") has the rest.
//
// Errors: ErrInvalidOptions (no opts.Exec); ErrNotUndone (an action
// without a compensation and no opts.AllowNotUndone: nothing written);
// ErrSeqOutOfRange (to not below LastSeq, or before a fork's fork
// point); ErrAtomInProgress (an atom or a branch runs); ErrRunEnded;
// ErrRollbackPending (a rollback to another target is pending);
// ledger.ErrInDoubt (a compensation, or an action of an interrupted
// atom, in doubt: ResolveCompensation settles the former).
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
	if err := db.writable("rollback of run", r.id); err != nil {
		return nil, err
	}
	x, err := r.startRollback(ctx, to, true)
	if err != nil {
		return nil, err
	}
	x.exec = opts.Exec
	var res *saga.Result
	if err = db.waitLedger(ctx); err == nil {
		res, err = saga.Conduct(ctx, x, to, x.pending, x.inflight, opts.AllowNotUndone, sagaErrs)
	}
	if err != nil {
		r.releaseRollbackAtom(x.a)
	}
	return (*RollbackResult)(res), err
}

// PendingRollback reports the run's rollback begun and not finished, and
// its target, to resume with Rollback (Begin and End fail with
// ErrRollbackPending meanwhile).
func (r *Run) PendingRollback() (to uint64, pending bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.rollback.Target()
}

// ResolveCompensation settles the pending rollback's compensation in doubt
// e as done, with result; ResolveCompensationFailed as not done (the
// resumed Rollback runs it again, same key). Both fail with ErrNotInDoubt
// when e is not one of its compensations in doubt.
func (r *Run) ResolveCompensation(ctx context.Context, e *ledger.InDoubtError, result []byte) error {
	return r.settleCompensation(ctx, func(a *Atom) error { return a.ResolveInDoubt(ctx, e, result) })
}

// ResolveCompensationFailed: see ResolveCompensation.
func (r *Run) ResolveCompensationFailed(ctx context.Context, e *ledger.InDoubtError, reason string) error {
	return r.settleCompensation(ctx, func(a *Atom) error { return a.ResolveInDoubtFailed(ctx, e, reason) })
}

// settleCompensation runs settle over the atom of the pending rollback.
func (r *Run) settleCompensation(ctx context.Context, settle func(*Atom) error) error {
	x, err := r.startRollback(ctx, 0, false)
	if err != nil {
		return err
	}
	defer r.releaseRollbackAtom(x.a)
	return settle(x.a)
}

// startRollback makes atom LastSeq+1 the run's running atom for a
// rollback (fresh) or a settling, once the store is open, after
// saga.Start's checks.
func (r *Run) startRollback(ctx context.Context, to uint64, fresh bool) (*rollbackAtom, error) {
	if err := r.db.checkOpen(); err != nil {
		return nil, err
	}
	if err := r.lockIdle(ctx); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	st := saga.State{Run: r.id, Broken: r.mu.broken, Ended: r.mu.end != nil || r.mu.ending, Branches: r.mu.br != nil,
		Pending: r.mu.rollback.Pending(), LastSeq: r.mu.lastSeq, Base: r.base}
	if r.mu.atom != nil {
		st.Running = r.mu.atom.seq
	}
	if err := saga.Start(st, to, fresh, sagaErrs); err != nil {
		return nil, err
	}
	if err := r.materializeLocked(); err != nil {
		return nil, err
	}
	seq := r.mu.lastSeq + 1
	x := &rollbackAtom{capView: (*capView)(r), ledgerView: (*ledgerView)(r.db), a: &Atom{run: r, seq: seq, resumed: r.mu.interruptedSeq == seq},
		pending: r.mu.rollback.Pending(), dec: r.db.decoder(false)}
	x.inflight = slices.Clone(r.interruptedLocked(seq))
	if x.pending != nil {
		x.a.seal = x.pending.Seal[:]
	}
	r.mu.atom = x.a
	return x, nil
}

// releaseRollbackAtom ends atom a of a rollback that did not complete,
// without a record.
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

// rollbackAtom is the atom of a rollback as saga.Conduct drives it, and
// its run's history as saga.Plan reads it (a saga.Store).
type rollbackAtom struct {
	*capView
	*ledgerView
	a        *Atom
	pending  *saga.Pending           // the pending rollback to resume; nil: a new one
	inflight []layout.InflightAction // the actions of the atom a crash interrupted at a.seq
	exec     func(Undo) ledger.Exec
	dec      *record.Decoder
	buf      []byte // the decoded body of the last atom Actions read
}

func (x *rollbackAtom) Seq() uint64 { return x.a.seq }

func (x *rollbackAtom) Sealer() *record.Sealer { return x.db.sealer }

// Append appends the rollback record, durably; tracked until the
// completing atom commits (the replay floor's pin).
func (x *rollbackAtom) Append(ctx context.Context, rec []byte) (uint64, error) {
	if err := checkRecordSize(x.id, x.a.seq, "the rollback record", rec); err != nil {
		return 0, err
	}
	tok, written := x.db.track(), rec
	if forgeRollbackRecord != nil {
		written = forgeRollbackRecord(rec)
	}
	if _, err := x.db.append(ctx, written); err != nil {
		x.db.untrack(tok)
		return 0, err
	}
	return tok, nil
}

func (x *rollbackAtom) Pend(rb *saga.Pending) {
	r := (*Run)(x.capView)
	r.mu.Lock()
	r.mu.rollback.Pend(rb)
	r.mu.Unlock()
	x.a.seal = rb.Seal[:] // before the atom's first action: nothing reads it concurrently
}

// Compensate runs u.Compensation through the ledger as an action of the
// atom (Do's rules, with the compensation's intent).
func (x *rollbackAtom) Compensate(ctx context.Context, u *Undo) ([]byte, error) {
	index, err := x.a.nextIndex(ctx)
	if err != nil {
		return nil, err
	}
	in, exec, err := saga.Compensation(x.db.ledger, u, x.id, x.a.seq, index, x.exec)
	if err != nil {
		return nil, err
	}
	return x.a.doIntent(ctx, in, false, exec)
}

func (x *rollbackAtom) Complete(ctx context.Context, f *frame.Frame) error {
	return x.a.commit(ctx, new(frame.Delta).ReplaceFrame(f), true)
}

// Actions reads committed atom seq; valid until the next call.
func (x *rollbackAtom) Actions(ctx context.Context, seq uint64) (fps []ledger.Fingerprint, err error) {
	x.buf, fps, err = (*Run)(x.capView).committedActions(ctx, seq, x.dec, x.buf)
	return fps, err
}

// Certified reads the log from atom to's record (or the run's start).
func (x *rollbackAtom) Certified(ctx context.Context, to uint64) ([]saga.Certified, error) {
	r, db := (*Run)(x.capView), x.db
	from := wal.Pos{}
	if to > r.base {
		p, err := r.committedAtomPos(ctx, to)
		if err != nil {
			return nil, fmt.Errorf("atom %d: %w", to, err)
		}
		from = p
	}
	dec := db.decoder(true)
	dec.Skip = func(k record.Kind, _ []byte) bool { return k != record.KindCert }
	c, err := record.NewCursor(db.log, db.segmentFile, from, dec)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return saga.ScanCertified(ctx, c, r.id, to)
}

// completeRollbackLocked ends the pending rollback that atom seq
// completes, if any (saga.Slot.Complete): its pin is released.
func (r *Run) completeRollbackLocked(seq uint64) {
	if pin, ok := r.mu.rollback.Complete(seq); ok {
		r.db.untrack(pin)
	}
}

// replayRollback applies a rollback record found in the log (recovery,
// saga.Slot.Replay); a pending one pins the replay floor at pos again.
func (db *DB) replayRollback(r *Run, rec *record.Record, pos wal.Pos) string {
	return r.mu.rollback.Replay(rec, r.mu.lastSeq, r.mu.head, func() uint64 { return db.pin(pos) })
}

// forgeRollbackRecord, set by tamper tests, replaces the record the log
// gets; the completing atom is sealed over the original.
var forgeRollbackRecord func(rec []byte) []byte

// ledgerView is the store's ledger as saga's Store, lineage's Ledger and
// resumekey's Ledger read it: its entries and the intents and
// certificates they locate.
type ledgerView DB

func (l *ledgerView) Lookup(fp ledger.Fingerprint) (ledger.Entry, bool) { return l.ledger.Lookup(fp) }

func (l *ledgerView) Intent(loc ledger.Loc) (*ledger.Intent, error) { return (*DB)(l).readIntent(loc) }

func (l *ledgerView) Certificate(loc ledger.Loc) (*ledger.Certificate, error) {
	return (*DB)(l).readCertificate(loc)
}
