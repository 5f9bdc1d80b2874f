package wait

// The records the engine writes, and the timeouts of due waits, recorded
// in batches.

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
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

// Runs is what FireDue needs of the engine: the runs' write marks and the
// log. Hold and Release are called with no lock of the index held.
type Runs interface {
	// Hold takes run's write mark once no atom of it runs, and returns
	// the run's newest seq and head in the log; ok false: the run does
	// not exist, ended, is ending or is broken, and nothing is held.
	Hold(ctx context.Context, run string) (seq uint64, head chain.Hash, ok bool, err error)
	// Release gives back what Hold took.
	Release(run string)
	// Append writes the records durably, in one batch, and returns their
	// positions; done is called once the index has applied them.
	Append(ctx context.Context, raws [][]byte) (poss []wal.Pos, done func(), err error)
	// Link is the chain's link of a record.
	Link(run string, seq uint64, head chain.Hash, payload []byte) chain.Hash
	// Recorded is told of each record once applied.
	Recorded(rec *record.Record)
}

// FireDue records the timeout of every open wait whose deadline passed by
// the index's clock, earliest first, up to batch in one durable batch of
// wake records (one fsync for them all), holding the write mark of each
// of their runs for the batch; then the next batch. One FireDue at a time
// (so that no two callers each hold marks the other waits for). A wait
// whose run moved on (an atom took it) or is gone leaves the index.
func (x *Index) FireDue(ctx context.Context, rs Runs, batch int) error {
	x.fire.Lock()
	defer x.fire.Unlock()
	for {
		now := x.Now()
		due := x.Due(now, batch)
		if len(due) == 0 {
			return nil
		}
		var held []string
		var recs []*record.Record
		release := func() {
			for _, run := range held {
				rs.Release(run)
			}
		}
		for i := range due {
			w := &due[i]
			seq, head, ok, err := rs.Hold(ctx, w.Run)
			if err != nil {
				release()
				return err
			}
			if !ok {
				x.Gone(w.Run)
				continue
			}
			cur, ok := x.Current(w.Run, seq)
			if !ok || cur.Seq != seq || cur.Outcome != Open || cur.Deadline == 0 || cur.Deadline > now {
				rs.Release(w.Run)
				x.Taken(w.Run, seq) // an atom went on after it
				continue
			}
			held = append(held, w.Run)
			recs = append(recs, NewRecord(rs.Link, record.KindWake, w.Run, seq, head, &record.WaitFields{At: now, Reason: record.WakeTimeout}))
		}
		if len(recs) == 0 {
			continue
		}
		raws := make([][]byte, len(recs))
		for i, rec := range recs {
			raws[i] = rec.Raw
		}
		poss, done, err := rs.Append(ctx, raws)
		if err != nil {
			release()
			return fmt.Errorf("engine: record %d timeouts: %w", len(recs), err)
		}
		for i, rec := range recs {
			rec.Pos = poss[i]
			x.Apply(rec, nil)
			rs.Recorded(rec)
		}
		done()
		release()
	}
}
