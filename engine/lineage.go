package engine

// No duplicate effects across a lineage (I10). A default key is derived
// from the run, the seq and the call's index, so a fork that repeats an
// action of its parent at the same position would call it again under a
// new key. lineageIntent gives such an action the key its parent used
// there, when the parent's action at that position has the same tool and
// sanitized args: the fingerprint is then the parent's, and the ledger
// returns the parent's certificate (or reports the parent's action in
// doubt) without calling exec. An action that differs keeps the fork's own
// key, which no run of the lineage used: a downstream that deduplicates by
// key never sees one key with two different requests. Explicit keys are
// the caller's, as everywhere.

import (
	"bytes"
	"context"
	"fmt"

	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
)

// lineageIntent returns in (a default-key intent of this atom) with the
// key the run's parent used at the same seq and index for the same action,
// or in itself.
func (a *Atom) lineageIntent(ctx context.Context, in *ledger.Intent) (*ledger.Intent, error) {
	r := a.run
	if a.branch != nil {
		return a.lineageBranchIntent(in)
	}
	if r.parent == "" || a.seq <= r.base {
		return in, nil
	}
	p, err := r.parentRun()
	if err != nil {
		return nil, err
	}
	pins, err := p.actionsAt(ctx, a.seq, in.Index)
	if err != nil {
		return nil, fmt.Errorf("engine: run %q seq %d call %d: the action of parent %q at this position: %w", r.id, a.seq, in.Index, p.id, err)
	}
	// An explicit-key action takes no index of its own (it shares the
	// next default-key call's): of the parent's actions at this index, the
	// one with this tool and args is the one repeated.
	// The compensation is part of the action (and of its fingerprint): one
	// that differs makes another action, which never takes the parent's key.
	var pin *ledger.Intent
	for _, x := range pins {
		if x.Tool == in.Tool && bytes.Equal(x.Args, in.Args) && x.Compensation.Equal(in.Compensation) && x.Undoes == in.Undoes {
			pin = x
			break
		}
	}
	if pin == nil || pin.Key == in.Key {
		return in, nil
	}
	return in.WithKey(pin.Key, in.Index), nil
}

// actionsAt returns the intents of the run's actions with call index index
// in its atom seq (committed, or in flight): a default-key action and the
// explicit-key ones made just before it share an index.
func (r *Run) actionsAt(ctx context.Context, seq uint64, index uint32) ([]*ledger.Intent, error) {
	db := r.db
	r.mu.Lock()
	last, indexed := r.mu.lastSeq, r.mu.indexedSeq
	var fps []ledger.Fingerprint
	var pos wal.Pos
	switch {
	case seq <= r.base || seq > last+1:
		r.mu.Unlock()
		return nil, nil
	case seq == last+1:
		// The atom in flight: running now, or interrupted by a crash.
		if at := r.mu.atom; at != nil {
			at.mu.Lock()
			for _, x := range at.mu.actions {
				if x.index == index {
					fps = append(fps, x.fp)
				}
			}
			at.mu.Unlock()
		}
		if r.mu.interruptedSeq == seq {
			for _, x := range r.mu.inflight {
				if x.Index == index {
					fps = append(fps, x.FP)
				}
			}
		}
	case seq > indexed:
		pos = r.mu.positions[seq-indexed-1]
	}
	r.mu.Unlock()
	if seq <= last {
		if pos == (wal.Pos{}) {
			var err error
			if pos, err = r.atomPosition(ctx, seq); err != nil {
				return nil, err
			}
		}
		rec, err := db.readAtom(pos, r.id, seq)
		if err != nil {
			return nil, err
		}
		_, body, err := db.decoder(false).DecodeAtom(nil, rec, db.segmentFile(pos.Segment))
		if err != nil {
			return nil, err
		}
		fps = body.Actions
	}
	if err := db.waitLedger(ctx); err != nil {
		return nil, err
	}
	var out []*ledger.Intent
	for _, fp := range fps {
		e, ok := db.ledger.Lookup(fp)
		if !ok || e.IntentLoc == (ledger.Loc{}) {
			continue
		}
		in, err := db.readIntent(e.IntentLoc)
		if err != nil {
			return nil, err
		}
		if in.Index == index && in.Seq == seq {
			out = append(out, in)
		}
	}
	return out, nil
}

// lineageBranchIntent is lineageIntent for a branch's default-key action
// in (a branch has no seq until it commits): its position is the branch's
// name and the call index, so a fork's branch of the same name that makes
// the same call (tool, sanitized args, compensation) at the same index
// takes the key the nearest run of its lineage used there, and so its
// record: its certificate, or its being in doubt. The lineage is walked up
// to its root; the ledger knows every key it used.
func (a *Atom) lineageBranchIntent(in *ledger.Intent) (*ledger.Intent, error) {
	r := a.run
	for depth := 0; r.parent != "" && depth < maxLineage; depth++ {
		p, err := r.parentRun()
		if err != nil {
			return nil, err
		}
		c := in.WithKey(ledger.BranchKey(p.id, a.branch.Name, int(in.Index)), in.Index)
		if e, ok := a.run.db.ledger.Lookup(c.Fingerprint); ok && e.Status != ledger.StatusNone {
			return c, nil
		}
		r = p
	}
	return in, nil
}
