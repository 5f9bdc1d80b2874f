package engine

// Deleting ended runs (docs/DESIGN.md, "Retention"): retention.Delete
// over gcCore (gc.go), its table of runs here.

import (
	"context"
	"errors"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/internal/runview"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Errors of deletion (errors.Is; the error names the run).
var (
	// ErrRunNotEnded is returned by Delete of a run that is still active:
	// only ended runs are deleted (End it first).
	ErrRunNotEnded = errors.New("engine: run has not ended")
	// ErrRunHasForks is returned by Delete of a run with a fork that is
	// not deleted with it (in the same call, or before): the fork reads
	// the parent's history and certificates.
	ErrRunHasForks = errors.New("engine: run has forks that are not deleted")
	// ErrRunDeleted is returned by Run and Fork for the id of a deleted
	// run (a deleted id is never created again), and by Delete of one.
	ErrRunDeleted = errors.New("engine: run was deleted")
)

// MaxDeleteReason bounds DeleteOptions.Reason, in bytes.
const MaxDeleteReason = record.MaxDeleteReason

// DeleteOptions select the ended runs DeleteRuns deletes: IDs, or every
// one matching Status and EndedBefore (one of them set).
type DeleteOptions struct {
	// IDs names the runs to delete: ended, their forks deleted with
	// them or before, or DeleteRuns deletes nothing.
	IDs []string
	// Status selects runs that ended with one of these statuses
	// (StatusCompleted, StatusFailed, StatusCancelled); empty: any.
	Status []Status
	// EndedBefore selects runs that ended before it; zero: any time.
	EndedBefore time.Time
	// Reason is recorded (at most MaxDeleteReason bytes; "": the selection).
	Reason string
}

// DeletedRun is one run DeleteRuns deleted, as its delete record says.
type DeletedRun struct {
	ID     string
	Seq    uint64     // the deletion's link: the end's seq + 1
	Final  chain.Hash // the run's head at its end
	Head   chain.Hash // the deletion's link
	At     time.Time
	Reason string
	// Erasure is the run's erasure (Erase), if any: after its deletion,
	// or by it (Erasure.Seq == Seq).
	Erasure *Erasure
}

// Delete deletes the ended runs ids (see DeleteOptions.IDs). It returns
// once their delete records are durable.
func (db *DB) Delete(ctx context.Context, ids ...string) ([]DeletedRun, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return db.DeleteRuns(ctx, DeleteOptions{IDs: ids})
}

// DeleteRuns deletes the ended runs o selects, all or none, durable when it
// returns (docs/DESIGN.md, "Retention"). Errors: ErrRunNotEnded,
// ErrRunHasForks, ErrRunDeleted, ErrInvalidOptions.
func (db *DB) DeleteRuns(ctx context.Context, o DeleteOptions) ([]DeletedRun, error) {
	if err := db.checkOpen(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sel := retention.Selection{IDs: o.IDs, EndedBefore: o.EndedBefore, Reason: o.Reason}
	for _, s := range o.Status {
		sel.Status = append(sel.Status, retention.Status{Name: s.String(), Final: s >= StatusCompleted && s <= StatusCancelled})
	}
	c := gcCore{db}
	ds, err := retention.Delete(ctx, &db.gc, c, sel, retentionErrs, c.Signing())
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	out := make([]DeletedRun, len(ds))
	for i, d := range ds {
		out[i] = DeletedRun{ID: d.Run, Seq: d.Seq, Final: d.Final, Head: d.Head, At: d.At, Reason: d.Reason}
	}
	return out, nil
}

// Deleted lists the runs the store deleted (and erased), by id.
func (db *DB) Deleted() ([]DeletedRun, error) {
	if err := db.checkRegistry(); err != nil {
		return nil, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.mu.closed {
		return nil, ErrClosed
	}
	ids, gone := db.mu.deleted.Sorted()
	out := make([]DeletedRun, len(ids))
	for i, id := range ids {
		out[i] = deletedRun(id, gone[i])
	}
	return out, nil
}

// deletedRun is d, the deletion of run id, as DeletedRun lists it.
func deletedRun(id string, d *retention.Gone) DeletedRun {
	out := DeletedRun{ID: id, Seq: d.Seq, Final: d.Final, Head: d.Head, At: d.At, Reason: d.Reason}
	if e := d.Erasure; e != nil {
		out.Erasure = &Erasure{Seq: e.Seq, Head: e.Head, At: e.At, Reason: e.Reason}
	}
	return out
}

// retentionErrs are the sentinels package retention's refusals match.
var retentionErrs = retention.Errors{NotEnded: ErrRunNotEnded, HasForks: ErrRunHasForks, Deleted: ErrRunDeleted, Invalid: ErrInvalidOptions,
	Erased: ErrRunErased}

func (c gcCore) Track() func() {
	tok := c.track()
	return func() { c.untrack(tok) }
}

func (c gcCore) Take(choose func([]retention.Candidate, *retention.Registry) ([]string, error)) ([]runview.Run, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, ErrClosed
	}
	c.allRunsLocked()
	cands := make([]retention.Candidate, 0, len(c.mu.runs))
	for _, r := range c.mu.runs {
		cands = append(cands, candidate(r))
	}
	ids, err := choose(cands, &c.mu.deleted)
	if err != nil {
		return nil, err
	}
	chosen := make([]*Run, len(ids))
	out := make([]runview.Run, len(ids))
	for i, id := range ids {
		chosen[i] = c.mu.runs[id]
		out[i] = (*capView)(chosen[i])
	}
	c.withdrawLocked(true, chosen...)
	return out, nil
}

func (c gcCore) Append(ctx context.Context, recs [][]byte) error {
	_, err := c.appendBatch(ctx, recs)
	return err
}

func (c gcCore) Restore(runs []runview.Run) { c.restoreRuns(unviews(runs)...) }

func (c gcCore) Gone(k record.Kind, ids []string, gone []*retention.Gone, runs []runview.Run) {
	c.mu.Lock()
	c.mu.deleted.MarkGone(ids, gone)
	c.mu.Unlock()
	c.withdrawn(k, retentionErrs.Gone(k), unviews(runs)...)
}

// Find is erasure.KeyRuns's: run id, or whether it is deleted.
func (c gcCore) Find(id string) (runview.Run, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, false, ErrClosed
	}
	if r := c.runLocked(id); r != nil && !c.deletedLocked(id) {
		return (*capView)(r), false, nil
	}
	return nil, c.deletedLocked(id), nil
}

func unviews(vs []runview.Run) []*Run {
	out := make([]*Run, len(vs))
	for i, v := range vs {
		out[i] = (*Run)(v.(*capView))
	}
	return out
}

// candidate is r as package retention's choice of runs sees it.
func candidate(r *Run) retention.Candidate {
	c := retention.Candidate{ID: r.id, Parent: r.parent}
	if r.created != nil {
		select {
		case <-r.created:
			if r.createErr != nil {
				return c
			}
		default:
			c.Creating = true // createErr is create's until created closes
			return c
		}
	}
	r.mu.Lock()
	if e := r.mu.end; e != nil && r.mu.broken == nil {
		c.Ended, c.Status, c.EndedAt = true, e.StatusName(), e.At
	}
	r.mu.Unlock()
	return c
}

// appendBatch writes recs durably, all or none, like append.
func (db *DB) appendBatch(ctx context.Context, recs [][]byte) ([]wal.Pos, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	poss, err := db.log.AppendBatch(context.WithoutCancel(ctx), recs)
	if err == nil {
		err = db.dirsDurable()
	}
	if err != nil {
		return nil, db.logError(err, "")
	}
	n := 0
	for _, r := range recs {
		n += len(r)
	}
	db.noteAppended(n)
	return poss, nil
}

// applyDeletionLocked replays a delete or erase record (Registry.Replay).
func (db *DB) applyDeletionLocked(rec *record.Record) string {
	r := db.runLocked(rec.Run)
	if r == nil {
		return db.mu.deleted.Replay(rec, nil, "")
	}
	why := db.mu.deleted.Replay(rec, (*capView)(r), r.parent)
	if why == "" {
		db.withdrawLocked(false, r)
	}
	return why
}
