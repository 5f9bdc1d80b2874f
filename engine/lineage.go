package engine

// No duplicate effects across a lineage (I10): package internal/lineage
// gives a fork's action that repeats its parent's the parent's key; this
// file reads a run's actions at a position for it (capView's Intents).

import (
	"context"

	"github.com/continuumdb/continuum/internal/lineage"
	"github.com/continuumdb/continuum/ledger"
)

// lineageIntent returns in (a default-key intent of this atom) with the
// key the nearest run of its lineage used for the same action at the
// same position (lineage.Key, lineage.BranchKey), or in itself.
func (a *Atom) lineageIntent(ctx context.Context, in *ledger.Intent) (*ledger.Intent, error) {
	if a.branch != nil {
		return lineage.BranchKey((*capView)(a.run), a.branch.Name, in, a.run.db.ledger)
	}
	return lineage.Key(ctx, (*capView)(a.run), a.seq, in)
}

// actionsAt returns the intents of the run's actions with call index index
// in its atom seq (committed, or in flight): a default-key action and the
// explicit-key ones made just before it share an index.
func (r *Run) actionsAt(ctx context.Context, seq uint64, index uint32) ([]*ledger.Intent, error) {
	db := r.db
	r.mu.Lock()
	last := r.mu.lastSeq
	var fps []ledger.Fingerprint
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
	}
	r.mu.Unlock()
	if seq <= last {
		var err error
		if _, fps, err = r.committedActions(ctx, seq, db.decoder(false), nil); err != nil {
			return nil, err
		}
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
