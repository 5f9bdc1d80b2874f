package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/internal/runview"
	"github.com/continuumdb/continuum/record"
)

// Runs is the store's table of runs as a deletion (or an erasure) takes
// runs out of it: the engine's adapter over its DB (engine/gc.go's
// gcCore, also its Core). The runs it hands out are runview.Runs (ChainHead gives a
// deletion its link).
type Runs interface {
	// A deletion starts only once the deleted runs are known, the
	// directories' fsyncs started (the records wait for them) and if the
	// log has not failed (Writable).
	Health
	// Track holds the engine checkpoint's replay position at or below
	// the writes about to happen until release: the records and the
	// withdrawal are one write for the checkpoint.
	Track() (release func())
	// Take, under the table's lock, hands choose every run of the store
	// (as a Candidate) and the registry of deleted runs (to read), and
	// withdraws at once the runs choose returns, their ids marked being
	// deleted: Run and Fork of them fail from then on. An error is
	// choose's, or the store's being closed.
	Take(choose func(runs []Candidate, deleted *Registry) ([]string, error)) ([]runview.Run, error)
	// Append writes recs durably, all or none.
	Append(ctx context.Context, recs [][]byte) error
	// Restore puts back runs Take withdrew, whose records failed.
	Restore(runs []runview.Run)
	// Gone records the deletions (k: record.KindDelete) or erasures
	// (KindErase) of ids as durable, gone[i] ids[i]'s, in the registry,
	// and finishes the withdrawal of runs (those of them Take withdrew): a
	// handle a caller kept serves nothing more.
	Gone(k record.Kind, ids []string, gone []*Gone, runs []runview.Run)
}

// Writable returns why no deletion (or erasure) may write its records
// now: the deleted runs before CHECKPOINT's replay position unknown, or
// the log failed earlier; it starts the directories' fsyncs.
func Writable(h Health) error {
	if err := h.CheckRegistry(); err != nil {
		return err
	}
	h.StartDirSyncs()
	if err := h.LogFailed(); err != nil {
		return fmt.Errorf("engine: the log failed earlier; reopen the store: %w", err)
	}
	return nil
}

// Signing is what a delete or erase record's link and note are made
// with: the store's hasher, id and signing key (nil: notes unsigned).
type Signing struct {
	Hasher  *chain.Hasher
	StoreID string
	Signer  *chain.Signer
}

// Note is the chain checkpoint of run's link head at seq, signed when
// s.Signer is not nil; final marks the run's last link (a deletion's or
// an erasure's). An error is the signer's.
func (s Signing) Note(run string, seq uint64, head chain.Hash, final bool) ([]byte, error) {
	c := chain.Checkpoint{StoreID: s.StoreID, RunID: run, Seq: seq, Head: head, Final: final}
	if s.Signer == nil {
		return chain.MarshalCheckpoint(c), nil
	}
	return s.Signer.SignCheckpoint(c)
}

// Delete deletes the runs sel selects, all of them or none: it waits for
// runs to be ready, takes GC's lock (one deletion at a time, and none
// during a collection), takes the runs Choose picks out of the table at
// once, and writes one delete record per run in one batch; a failure puts
// the runs back. It returns the deletions, durable, in the order Choose
// picked the runs (none: nothing selected).
func Delete(ctx context.Context, gc *GC, runs Runs, sel Selection, errs Errors, sign Signing) ([]Deletion, error) {
	if err := sel.Check(errs); err != nil {
		return nil, err
	}
	if err := Writable(runs); err != nil {
		return nil, err
	}
	gc.Lock()
	defer gc.Unlock()
	release := runs.Track()
	defer release()
	parents := map[string]string{}
	chosen, err := runs.Take(func(c []Candidate, deleted *Registry) ([]string, error) {
		ids, err := Choose(sel, c, deleted.Has, errs)
		for _, c := range c {
			if c.Parent != "" && len(ids) > 0 {
				parents[c.ID] = c.Parent // a Gone's Parent
			}
		}
		return ids, err
	})
	if err != nil || len(chosen) == 0 {
		return nil, err
	}
	now := time.Now()
	recs := make([][]byte, 0, len(chosen))
	out := make([]Deletion, 0, len(chosen))
	for _, r := range chosen {
		seq, final, _ := r.ChainHead()
		d := NewDeletion(sign.Hasher, r.ID(), seq, final, now, sel.ReasonText())
		rec, err := d.Record(sign.StoreID, sign.Signer)
		if err != nil {
			runs.Restore(chosen)
			return nil, err
		}
		recs = append(recs, rec)
		out = append(out, d)
	}
	if err := runs.Append(ctx, recs); err != nil {
		runs.Restore(chosen)
		return nil, fmt.Errorf("engine: delete %d runs: %w", len(chosen), err)
	}
	ids, gone := make([]string, len(out)), make([]*Gone, len(out))
	for i, d := range out {
		ids[i], gone[i] = d.Run, &Gone{Seq: d.Seq, Final: d.Final, Head: d.Head, At: d.At, Reason: d.Reason, Parent: parents[d.Run]}
	}
	runs.Gone(record.KindDelete, ids, gone, chosen)
	return out, nil
}
