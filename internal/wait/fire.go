package wait

// The records the engine writes, and the timeouts of due waits, recorded
// in batches.

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

// LinkFunc is the chain's link of a record (chain.Hasher.Link).
type LinkFunc func(run string, seq uint64, head chain.Hash, payload []byte) chain.Hash

// NewRecord builds a wait, event or wake record of run at seq, whose head
// is head (the run's newest atom's), linked by link.
func NewRecord(link LinkFunc, k record.Kind, run string, seq uint64, head chain.Hash, w *record.WaitFields) *record.Record {
	payload := record.AppendWaitPayload(nil, k, w)
	l := link(run, seq, head, payload)
	raw := record.AppendWaitRecord(nil, k, run, seq, head, l, w)
	return &record.Record{Kind: k, Raw: raw, Run: run, Seq: seq, Final: head, Head: l, Payload: payload, Wait: w}
}

// maxFireBatch bounds the timeouts one batch of fireDue records.
const maxFireBatch = 1024

// fireDue records the timeout of every open wait whose deadline passed by
// the index's clock, earliest first, up to maxFireBatch in one durable
// batch of wake records (one fsync for them all), holding the write mark
// of each of their runs for the batch; then the next batch. One fireDue
// at a time (so that no two callers each hold marks the other waits
// for). A wait whose run moved on (an atom took it) or is gone leaves the
// index.
func (w *Waits) fireDue(ctx context.Context) error {
	x := w.idx
	x.fire.Lock()
	defer x.fire.Unlock()
	for {
		now := x.Now()
		due := x.Due(now, maxFireBatch)
		if len(due) == 0 {
			return nil
		}
		var held []Run
		var recs []*record.Record
		release := func() {
			for _, r := range held {
				r.Release()
			}
		}
		for i := range due {
			d := &due[i]
			r, err := w.run(d.Run)
			if err != nil {
				x.Gone(d.Run)
				continue
			}
			seq, head, refused, err := r.Hold(ctx, false)
			if err != nil {
				release()
				return err
			}
			if refused != nil {
				x.Gone(d.Run)
				continue
			}
			cur, ok := x.Current(d.Run, seq)
			if !ok || cur.Seq != seq || cur.Outcome != Open || cur.Deadline == 0 || cur.Deadline > now {
				r.Release()
				x.Taken(d.Run, seq) // an atom went on after it
				continue
			}
			held = append(held, r)
			recs = append(recs, NewRecord(w.core.Link, record.KindWake, d.Run, seq, head, &record.WaitFields{At: now, Reason: record.WakeTimeout}))
		}
		if len(recs) == 0 {
			continue
		}
		raws := make([][]byte, len(recs))
		for i, rec := range recs {
			raws[i] = rec.Raw
		}
		poss, done, err := w.core.Append(ctx, raws)
		if err != nil {
			release()
			return fmt.Errorf("engine: record %d timeouts: %w", len(recs), err)
		}
		for i, rec := range recs {
			rec.Pos = poss[i]
			x.Apply(rec, nil)
			w.core.Recorded(rec.Kind, rec.Run, rec.Seq)
		}
		done()
		w.changed()
		release()
	}
}
