package saga

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Store is what planning reads of a run's history: the ledger and the
// log. The engine implements it over one run; its errors are returned,
// wrapped with the run's name, by Plan.
type Store interface {
	// Lookup returns the ledger's entry of the action fp.
	Lookup(fp ledger.Fingerprint) (ledger.Entry, bool)
	// Intent and Certificate read the intent or certificate record at loc.
	Intent(loc ledger.Loc) (*ledger.Intent, error)
	Certificate(loc ledger.Loc) (*ledger.Certificate, error)
	// Actions returns the actions committed atom seq of the run lists,
	// in call order.
	Actions(ctx context.Context, seq uint64) ([]ledger.Fingerprint, error)
	// Certified returns, in log order, the certificates in the log after
	// the run's committed atom to (from the run's start when to is its
	// first seq's base) that Counts: the effects of attempts after to that
	// may have committed nowhere.
	Certified(ctx context.Context, to uint64) ([]Certified, error)
}

// Certified is a certificate Store.Certified found: its action and the
// seq it names (0: a branch's, which had no seq yet).
type Certified struct {
	Seq uint64
	FP  ledger.Fingerprint
}

// Counts reports whether certificate c is one Store.Certified returns
// for a rollback of run to to: of that run, at a seq after to (or a
// branch's, seq 0), and an effect (done or resolved, not failed).
func Counts(c *ledger.Certificate, run string, to uint64) bool {
	return c != nil && c.RunID == run && (c.Seq == 0 || c.Seq > to) &&
		(c.Status == ledger.StatusDone || c.Status == ledger.StatusResolved)
}

// ScanCertified reads c, a cursor over the log from the run's committed
// atom to (or its start), to its end, and returns the certificates that
// Counts, in log order: what Store.Certified returns. c's decoder skips
// what is not a certificate, and opens those it keeps.
func ScanCertified(ctx context.Context, c *record.Cursor, run string, to uint64) ([]Certified, error) {
	var out []Certified
	for c.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if cert := c.Record().Cert; Counts(cert, run, to) {
			out = append(out, Certified{Seq: cert.Seq, FP: cert.Fingerprint})
		}
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// TooManyError is Plan's error for a rollback that reaches more actions
// than a rollback record holds (record.MaxRollbackUndo). The engine
// reports it as too large.
type TooManyError struct {
	Run string
	To  uint64
	N   int
}

func (e *TooManyError) Error() string {
	return fmt.Sprintf("rollback of run %q to seq %d reaches %d actions, the limit is %d (record.MaxRollbackUndo)",
		e.Run, e.To, e.N, record.MaxRollbackUndo)
}

// Plan lists what a rollback of run to to, completed by the atom at seq
// (the run's last seq + 1), undoes, newest first (seq down, and within a
// seq the last certified first): the certified actions of the atom a
// crash interrupted at seq (inflight, in call order), of the committed
// atoms seq-1 down to to+1, and of the attempts after to's atom that never
// committed (an atom that failed, a branch that lost a conflict), each
// once. It leaves out what is not an effect of the history rolled back (a
// certificate of another run, of a seq at or before to) and compensations
// (an undo is never undone). An action without a compensation is listed
// with a nil Compensation; a compensation without a key gets
// ledger.CompensationKey of its action. An action of the interrupted atom
// in doubt is an error matching ledger.ErrInDoubt: it must be settled
// first. Plan writes nothing.
func Plan(ctx context.Context, st Store, run string, to, seq uint64, inflight []ledger.Fingerprint) ([]record.Undo, error) {
	var undo []record.Undo
	certAt := map[ledger.Fingerprint]wal.Pos{} // where each undone action's certificate is
	seen := make(map[ledger.Fingerprint]bool)
	add := func(at uint64, fp ledger.Fingerprint) error {
		if seen[fp] {
			return nil
		}
		seen[fp] = true
		e, ok := st.Lookup(fp)
		switch {
		case ok && at == seq && e.Status == ledger.StatusIntent:
			in, err := st.Intent(e.IntentLoc)
			if err != nil {
				return fmt.Errorf("engine: rollback of run %q: the intent of action %x: %w", run, fp[:8], err)
			}
			return fmt.Errorf("engine: rollback of run %q: an action of the interrupted atom %d is in doubt; settle it first (Begin, then the Resolve family, then Fail): %w",
				run, seq, &ledger.InDoubtError{Key: in.Key, Tool: in.Tool, RunID: in.RunID, Seq: in.Seq, Index: in.Index, Fingerprint: fp})
		case !ok || (e.Status != ledger.StatusDone && e.Status != ledger.StatusResolved):
			return nil // no effect to undo (failed, or never dispatched)
		}
		c, err := st.Certificate(e.CertLoc)
		if err != nil {
			return fmt.Errorf("engine: rollback of run %q: the certificate of action %x: %w", run, fp[:8], err)
		}
		if c.RunID != run || c.Seq != 0 && c.Seq <= to {
			// Certified before the target, or by another run: not an effect
			// of what is rolled back. A branch's certificate has seq 0 (the
			// branch had none yet): it is the effect of the atom that lists
			// it, at > to (a branch name reused after an atom <= to that
			// certified the same action would repeat it from the cache and
			// have it undone here: branch names are one piece of work).
			return nil
		}
		u := record.Undo{Seq: at, Action: fp}
		if e.IntentLoc != (ledger.Loc{}) { // a Resolve of an action never dispatched has no intent
			in, err := st.Intent(e.IntentLoc)
			if err != nil {
				return fmt.Errorf("engine: rollback of run %q: the intent of action %x: %w", run, fp[:8], err)
			}
			if in.Undoes != (ledger.Fingerprint{}) {
				return nil // a compensation: an undo is never undone
			}
			u.Tool = in.Tool
			if comp := in.Compensation; comp != nil {
				cc := *comp
				if cc.Key == "" {
					cc.Key = ledger.CompensationKey(fp)
				}
				u.Compensation = &cc
			}
		}
		undo = append(undo, u)
		certAt[fp] = e.CertLoc
		return nil
	}
	for i := len(inflight) - 1; i >= 0; i-- {
		if err := add(seq, inflight[i]); err != nil {
			return nil, err
		}
	}
	for s := seq - 1; s > to; s-- {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		actions, err := st.Actions(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("engine: rollback of run %q: atom %d: %w", run, s, err)
		}
		for i := len(actions) - 1; i >= 0; i-- {
			if err := add(s, actions[i]); err != nil {
				return nil, err
			}
		}
	}
	// Actions certified after the target by attempts that never committed
	// (an atom that failed and whose seq then committed without them, a
	// branch that conflicted and was not retried) are in no atom's list:
	// the log after the target's atom holds their certificates.
	orphans, err := st.Certified(ctx, to)
	if err != nil {
		return nil, fmt.Errorf("engine: rollback of run %q: %w", run, err)
	}
	for i := len(orphans) - 1; i >= 0; i-- { // newest first
		o := orphans[i]
		at := o.Seq
		if at == 0 {
			// A branch that never committed has no seq: its actions count
			// as of the run's last atom when the rollback began.
			at = seq - 1
		}
		if err := add(at, o.FP); err != nil {
			return nil, err
		}
	}
	// Newest first: seq down, and within a seq in the order the
	// certificates were written, last first (an atom's call order
	// reversed, after the actions of its seq's attempts that failed).
	slices.SortStableFunc(undo, func(a, b record.Undo) int {
		if c := cmp.Compare(b.Seq, a.Seq); c != 0 {
			return c
		}
		pa, pb := certAt[a.Action], certAt[b.Action]
		switch {
		case pb.Less(pa):
			return -1
		case pa.Less(pb):
			return 1
		}
		return 0
	})
	if len(undo) > record.MaxRollbackUndo {
		return nil, &TooManyError{Run: run, To: to, N: len(undo)}
	}
	return undo, nil
}

// NotUndone returns the entries of undo without a compensation, in
// undo's order: the actions whose effects a rollback leaves.
func NotUndone(undo []record.Undo) []record.Undo {
	var out []record.Undo
	for _, u := range undo {
		if u.Compensation == nil {
			out = append(out, u)
		}
	}
	return out
}

// Record returns the rollback record of run: the atom seq completes the
// rollback to to, begun from head h(seq-1) at started (Unix ns), undoing
// undo. With a sealer (an encrypted store) the undo list, agent data, is
// sealed with the run's key.
func Record(sealer *record.Sealer, run string, seq, to uint64, head chain.Hash, started int64, undo []record.Undo) ([]byte, error) {
	if sealer == nil {
		return record.AppendRollback(nil, run, seq, to, head, started, undo), nil
	}
	rec, err := sealer.AppendSealedRollback(nil, run, seq, to, head, started, undo)
	if err != nil {
		return nil, fmt.Errorf("engine: run %q: the rollback record: %w", run, err)
	}
	return rec, nil
}

// Pending is a rollback whose record is durable and whose completing atom
// is not. Immutable once built.
type Pending struct {
	Seq, To uint64     // the completing atom's seq and the target
	Head    chain.Hash // h(Seq-1): the run's head when it began
	Undo    []record.Undo
	Seal    [32]byte // record.RollbackSeal of its record, which the completing atom is chained over
	Pin     uint64   // the engine's token that holds the replay floor at or below the record
}

// NewPending returns the rollback that record rec (Record's, as written
// to the log) starts once durable; pin is the engine's hold on the replay
// floor.
func NewPending(rec []byte, seq, to uint64, head chain.Hash, undo []record.Undo, pin uint64) *Pending {
	return &Pending{Seq: seq, To: to, Head: head, Undo: undo, Seal: record.RollbackSeal(rec), Pin: pin}
}

// Replay checks a rollback record rec found in the log against the run's
// state as replayed so far (its last seq and head, its pending rollback):
// a record of the run's next seq, from its current head, starts a pending
// rollback (p, its Pin left for the engine to set: the record's position
// must stay replayed); one of a seq the run has already committed is
// reflected (nil, ""). why, when not empty, says how the record
// contradicts the run.
func Replay(rec *record.Record, lastSeq uint64, head chain.Hash, pending *Pending) (p *Pending, why string) {
	switch {
	case rec.Seq <= lastSeq:
		return nil, "" // completed: its atom is reflected already
	case rec.Seq != lastSeq+1:
		return nil, fmt.Sprintf("rollback completed by seq %d, the run's last atom is %d", rec.Seq, lastSeq)
	case rec.Head != head:
		return nil, fmt.Sprintf("rollback begun from head %x, the run's head at seq %d is %x", rec.Head[:8], lastSeq, head[:8])
	case pending != nil:
		return nil, fmt.Sprintf("a second rollback record for seq %d", rec.Seq)
	}
	undo := make([]record.Undo, len(rec.Undo))
	for i, u := range rec.Undo { // rec aliases the read buffer
		undo[i] = u
		if c := u.Compensation; c != nil {
			cc := *c
			cc.Args = append([]byte(nil), c.Args...)
			undo[i].Compensation = &cc
		}
	}
	return NewPending(rec.Raw, rec.Seq, rec.To, rec.Head, undo, 0), ""
}
