package engine

// What a rollback undoes: the plan it writes in its record.

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// planRollback lists what a rollback to to undoes, newest first (seq
// down, and within a seq the last certified first): the certified actions
// of the interrupted atom at seq (inflight), of atoms seq-1 down to to+1,
// and of the attempts after to's atom that never committed (see Rollback
// for which count).
func (r *Run) planRollback(ctx context.Context, to, seq uint64, inflight []layout.InflightAction) ([]record.Undo, error) {
	db := r.db
	if err := db.waitLedger(ctx); err != nil {
		return nil, err
	}
	var undo []record.Undo
	certAt := map[ledger.Fingerprint]wal.Pos{} // where each undone action's certificate is
	seen := make(map[ledger.Fingerprint]bool)
	add := func(at uint64, fp ledger.Fingerprint) error {
		if seen[fp] {
			return nil
		}
		seen[fp] = true
		e, ok := db.ledger.Lookup(fp)
		switch {
		case ok && at == seq && e.Status == ledger.StatusIntent:
			in, err := db.readIntent(e.IntentLoc)
			if err != nil {
				return fmt.Errorf("engine: rollback of run %q: the intent of action %x: %w", r.id, fp[:8], err)
			}
			return fmt.Errorf("engine: rollback of run %q: an action of the interrupted atom %d is in doubt; settle it first (Begin, then the Resolve family, then Fail): %w",
				r.id, seq, &ledger.InDoubtError{Key: in.Key, Tool: in.Tool, RunID: in.RunID, Seq: in.Seq, Index: in.Index, Fingerprint: fp})
		case !ok || (e.Status != ledger.StatusDone && e.Status != ledger.StatusResolved):
			return nil // no effect to undo (failed, or never dispatched)
		}
		c, err := db.readCertificate(e.CertLoc)
		if err != nil {
			return fmt.Errorf("engine: rollback of run %q: the certificate of action %x: %w", r.id, fp[:8], err)
		}
		if c.RunID != r.id || c.Seq != 0 && c.Seq <= to {
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
			in, err := db.readIntent(e.IntentLoc)
			if err != nil {
				return fmt.Errorf("engine: rollback of run %q: the intent of action %x: %w", r.id, fp[:8], err)
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
		if err := add(seq, inflight[i].FP); err != nil {
			return nil, err
		}
	}
	dec := db.decoder(false)
	var buf []byte
	for s := seq - 1; s > to; s-- {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pos, err := r.committedAtomPos(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("engine: rollback of run %q: atom %d: %w", r.id, s, err)
		}
		a, err := db.readAtom(pos, r.id, s)
		if err != nil {
			return nil, fmt.Errorf("engine: rollback of run %q: atom %d: %w", r.id, s, err)
		}
		var body *record.AtomBody
		if buf, body, err = dec.DecodeAtom(buf, a, db.segmentFile(pos.Segment)); err != nil {
			return nil, fmt.Errorf("engine: rollback of run %q: atom %d: %w", r.id, s, err)
		}
		for i := len(body.Actions) - 1; i >= 0; i-- {
			if err := add(s, body.Actions[i]); err != nil {
				return nil, err
			}
		}
	}
	// Actions certified after the target by attempts that never committed
	// (an atom that failed and whose seq then committed without them, a
	// branch that conflicted and was not retried) are in no atom's list:
	// the log after the target's atom holds their certificates.
	from := wal.Pos{}
	if to > r.base {
		p, err := r.committedAtomPos(ctx, to)
		if err != nil {
			return nil, fmt.Errorf("engine: rollback of run %q: atom %d: %w", r.id, to, err)
		}
		from = p
	}
	orphans, err := db.certifiedSince(ctx, r.id, to, from)
	if err != nil {
		return nil, fmt.Errorf("engine: rollback of run %q: %w", r.id, err)
	}
	for _, o := range orphans {
		at := o.seq
		if at == 0 {
			// A branch that never committed has no seq: its actions count
			// as of the run's last atom when the rollback began.
			at = seq - 1
		}
		if err := add(at, o.fp); err != nil {
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
		return nil, fmt.Errorf("%w: rollback of run %q to seq %d reaches %d actions, the limit is %d (record.MaxRollbackUndo)",
			ErrTooLarge, r.id, to, len(undo), record.MaxRollbackUndo)
	}
	return undo, nil
}

// certifiedAction is a certificate certifiedSince found.
type certifiedAction struct {
	seq uint64
	fp  ledger.Fingerprint
}

// certifiedSince returns the actions of run with a done or resolved
// certificate in the log at or after from whose seq is past to (or 0: a
// branch's), newest first. It reads the log from from to its end.
func (db *DB) certifiedSince(ctx context.Context, run string, to uint64, from wal.Pos) ([]certifiedAction, error) {
	dec := db.decoder(true)
	dec.Skip = func(k record.Kind, _ []byte) bool { return k != record.KindCert }
	c, err := record.NewCursor(db.log, db.segmentFile, from, dec)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var out []certifiedAction
	for c.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cert := c.Record().Cert
		if cert == nil || cert.RunID != run || cert.Seq != 0 && cert.Seq <= to ||
			cert.Status != ledger.StatusDone && cert.Status != ledger.StatusResolved {
			continue
		}
		out = append(out, certifiedAction{seq: cert.Seq, fp: cert.Fingerprint})
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}
