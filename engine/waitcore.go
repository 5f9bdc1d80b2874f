package engine

// The conduct of waits (waits.go) over internal/wait: the index's load
// and Source, the writing of wait, event and wake records under their
// run's write mark, and Open's replay of them.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/internal/wait"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// ErrNoRun is returned by SendEvent for a run the store does not have.
var ErrNoRun = errors.New("engine: no such run")

// waitsReady makes the index of waits usable: on the first call after
// Open, it loads it (internal/wait, Load: WAITS and the log's tail, or the
// whole log). Its error is sticky.
func (db *DB) waitsReady(ctx context.Context) error {
	if err := db.checkOpen(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := db.waitsLoad(); err != nil {
		return err
	}
	return db.waits.idx.Err() // a rebuild's, after a damaged WAITS met late
}

// waitsLoad loads the index once, even while the DB closes (the final
// checkpoint captures it).
func (db *DB) waitsLoad() error {
	s := &db.waits
	x := s.index(db)
	s.load.Do(func() {
		s.err = x.Load(db.waitsSource())
		s.ready.Store(x)
	})
	return s.err
}

// index returns the DB's index of waits, loaded or not.
func (s *waitState) index(db *DB) *wait.Index {
	s.made.Do(func() { s.idx = wait.New(db.opts.Clock) })
	return s.idx
}

// waitsFrom tells the index, at Open, the checkpoint its load starts
// from (cp nil: none, the whole log).
func (db *DB) waitsFrom(cp *layout.Checkpoint, from wal.Pos) {
	if cp == nil {
		db.waits.index(db).From(0, wal.Pos{})
		return
	}
	db.waits.index(db).From(cp.Gen, from)
}

// writeWaitsFile writes WAITS for the checkpoint of generation gen at
// replay position floor (internal/wait, WriteFile), after every run's row
// is captured (rows, sorted by id): a wait its run's row says an atom
// took, and a run that ended, leave the index and the file; the file
// becomes the index's table, read from the file but after Close's own
// checkpoint. CHECKPOINT's directory fsync makes its rename durable.
func (db *DB) writeWaitsFile(gen uint64, floor wal.Pos, rows []layout.CheckpointRun) error {
	if err := db.waitsLoad(); err != nil {
		return fmt.Errorf("engine: checkpoint: waits: %w", err)
	}
	return db.waits.idx.WriteFile(db.fs, db.path(layout.WaitsName), db.sealer, gen, floor, func(run string) (uint64, bool, bool) {
		i, ok := slices.BinarySearchFunc(rows, run, func(c layout.CheckpointRun, id string) int { return strings.Compare(c.ID, id) })
		if !ok {
			return 0, false, false
		}
		return rows[i].LastSeq, rows[i].Status != 0, true
	}, db.opts.NoSync, !db.closed.Load())
}

// waitsClose lets go of the index's table (WAITS, mapped) at Close, so
// that nothing of the store's files stays mapped after it.
func (db *DB) waitsClose() {
	if x := db.waitIndex(); x != nil {
		x.Close()
	}
}

// waitIndex returns the index once it is loaded, else nil.
func (db *DB) waitIndex() *wait.Index { return db.waits.ready.Load() }

// waitGone is the gone hook, and the replayed one's for an end or a
// deletion (k): nothing of run waits any more. Before the index is
// loaded only a deletion is noted for it (an erased run's kept events
// must not reach WAITS); an end is left to the next capture, which drops
// a run its row says ended, so that ends do not pile up in memory in a
// store whose waits are never used.
func (db *DB) waitGone(k record.Kind, run string) {
	if k == record.KindEnd && db.waitIndex() == nil {
		return
	}
	db.waits.index(db).Gone(run)
}

// replayWait checks a wait, event or wake record of Open's replay
// against its run r (internal/wait, CheckReplayed). The index is loaded
// on first use, not here.
func (db *DB) replayWait(r *Run, rec *record.Record) string {
	return wait.CheckReplayed(rec, db.hasher.Link(rec.Run, rec.Seq, rec.Final, rec.Payload), r.mu.lastSeq, r.mu.head, r.mu.end != nil)
}

// currentWait is the run's wait after its last atom, if it has one and
// the run has not ended (the index loaded).
func (r *Run) currentWait() (wait.Wait, bool) {
	x := r.db.waits.idx
	r.mu.Lock()
	last, ended := r.mu.lastSeq, r.mu.end != nil
	r.mu.Unlock()
	if ended {
		x.Gone(r.id)
		return wait.Wait{}, false
	}
	return x.Current(r.id, last)
}

// waitTaken is the applied hook: an atom at seq of r is part of the
// run's state, so the wait before it is taken.
func (r *Run) waitTaken(seq uint64) {
	if x := r.db.waitIndex(); x != nil {
		x.Taken(r.id, seq)
	}
}

// waitRun returns run id, which must exist and not be deleted.
func (db *DB) waitRun(id string) (*Run, error) {
	db.mu.Lock()
	if db.deletedLocked(id) {
		db.mu.Unlock()
		return nil, fmt.Errorf("%w: run %q", ErrRunDeleted, id)
	}
	r := db.runLocked(id)
	if r == nil && db.reg != nil && !db.reg.checked.Load() {
		// A run the log holds and CHECKPOINT omits exists too (as in
		// DB.Run): known once the log's table of runs is checked.
		db.mu.Unlock()
		if err := db.checkRegistry(); err != nil {
			return nil, err
		}
		return db.waitRun(id)
	}
	db.mu.Unlock()
	if r == nil {
		return nil, fmt.Errorf("%w: run %q", ErrNoRun, id)
	}
	return r, nil
}

// waitStale reports whether w is no wait to act on any more: its run
// moved on (an atom took it) or ended, or is gone; the index then forgets
// it.
func (db *DB) waitStale(w *wait.Wait) bool {
	r, err := db.waitRun(w.Run)
	if err != nil {
		return db.waitIndex().Stale(w, 0, false, true)
	}
	r.mu.Lock()
	last, ended := r.mu.lastSeq, r.mu.end != nil
	r.mu.Unlock()
	return db.waitIndex().Stale(w, last, ended, false)
}

// lastLinkLocked returns the seq and head of the run's newest atom in the
// log: its last one's, or, with branches in flight, the newest a branch
// appended (applied or not), so that a wait record written now follows it
// in the log and names it (r.mu held).
func (r *Run) lastLinkLocked() (uint64, chain.Hash) {
	if br := r.mu.br; br != nil {
		t := br.Tail()
		return t.Seq, t.Head
	}
	return r.mu.lastSeq, r.mu.head
}

// waitRec is a record of waits to write, with an event's plaintext.
type waitRec = wait.Rec

var waitRecs = wait.Recs

// writeWaits writes the records build returns for r, durably, under the
// run's write mark (so that they and the run's atoms and end are in the
// log, and applied to the index, in one order), and applies them to the
// index. locked, if set, runs first under the run's lock; build gets the
// run's last seq and head and the index's clock reading, and returns the
// records with, for an event, its plaintext payload.
func (r *Run) writeWaits(ctx context.Context, locked func() error, build func(seq uint64, head chain.Hash, now int64) ([]waitRec, error)) error {
	db := r.db
	x := db.waitIndex()
	if err := r.lockIdle(ctx); err != nil {
		return err
	}
	switch {
	case r.mu.broken != nil:
		r.mu.Unlock()
		return r.mu.broken
	case r.mu.end != nil:
		s := r.mu.end.status
		r.mu.Unlock()
		return fmt.Errorf("%w: run %q is %v", ErrRunEnded, r.id, s)
	case r.mu.ending:
		r.mu.Unlock()
		return fmt.Errorf("%w: run %q is ending", ErrRunEnded, r.id)
	}
	if locked != nil {
		if err := locked(); err != nil {
			r.mu.Unlock()
			return err
		}
	}
	seq, head := r.lastLinkLocked()
	r.startWriteLocked()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.endWriteLocked()
		r.mu.Unlock()
	}()

	recs, err := build(seq, head, x.Now())
	if err != nil || len(recs) == 0 {
		return err
	}
	raws := make([][]byte, len(recs))
	for i, w := range recs {
		raws[i] = w.Rec.Raw
	}
	// Untracked once the index reflects them: a checkpoint's WAITS holds
	// every record below its replay position.
	tok := db.track()
	defer db.untrack(tok)
	poss, err := db.appendBatch(ctx, raws)
	if err != nil {
		return fmt.Errorf("engine: run %q: write a %s record: %w", r.id, recs[0].Rec.Kind, err)
	}
	for i, w := range recs {
		w.Rec.Pos = poss[i]
		x.Apply(w.Rec, w.Plain)
		db.waitObserved(w.Rec.Kind, r.id, seq)
	}
	db.waitsChanged()
	return nil
}

// declareWait is Wait and Sleep.
func (r *Run) declareWait(ctx context.Context, name string, deadline time.Time) (Wait, error) {
	db := r.db
	w, err := wait.DeclareFields(name, deadline)
	if err != nil {
		return Wait{}, fmt.Errorf("%w: run %q: %v", ErrInvalidOptions, r.id, err)
	}
	if err := db.waitsReady(ctx); err != nil {
		return Wait{}, err
	}
	x := db.waitIndex()
	var out wait.Wait
	err = r.writeWaits(ctx, func() error {
		switch {
		case r.mu.atom != nil:
			return fmt.Errorf("%w: run %q: commit or fail it before the run waits", ErrAtomInProgress, r.id)
		case r.mu.br != nil && !r.mu.br.Idle():
			return fmt.Errorf("%w: run %q has branches in flight: commit or fail them before the run waits", ErrAtomInProgress, r.id)
		}
		return nil
	}, func(seq uint64, head chain.Hash, now int64) ([]waitRec, error) {
		cur, recs, err := x.DeclareRecords(db.hasher.Link, r.id, seq, head, now, w)
		if errors.Is(err, wait.ErrOtherWait) {
			return nil, fmt.Errorf("%w: run %q waits after seq %d for %q, not %q", ErrWaitExists, r.id, seq, cur.Name, name)
		}
		out = cur
		return waitRecs(recs, nil), err
	})
	if err != nil {
		return Wait{}, err
	}
	if out.Run == "" {
		out, _ = x.Current(r.id, r.LastSeq())
	}
	return exportWait(&out), nil
}

// wake ends the run's open wait after its last atom, as a timeout
// (reason WakeTimeout: only once its deadline passed by the index's
// clock) or a cancel, and returns the wait. ifDue: a wait not due, or
// none, is no error (the timeout's caller raced another's).
func (r *Run) wake(ctx context.Context, reason uint8, ifDue bool) (Wait, error) {
	db := r.db
	if err := db.waitsReady(ctx); err != nil {
		return Wait{}, err
	}
	x := db.waitIndex()
	var out wait.Wait
	err := r.writeWaits(ctx, nil, func(seq uint64, head chain.Hash, now int64) ([]waitRec, error) {
		cur, recs, err := x.WakeRecords(db.hasher.Link, r.id, seq, head, now, reason, ifDue)
		if errors.Is(err, wait.ErrNoWait) {
			return nil, fmt.Errorf("%w: run %q", ErrNoWait, r.id)
		}
		out = cur
		return waitRecs(recs, nil), err
	})
	if err != nil {
		return Wait{}, err
	}
	if out.Run == "" {
		out, _ = x.Current(r.id, r.LastSeq())
	}
	return exportWait(&out), nil
}

// fireDue records the timeout of every open wait whose deadline passed
// (internal/wait, FireDue), in batches of up to maxFireBatch wake records,
// one fsync each.
func (db *DB) fireDue(ctx context.Context) error {
	return db.waitIndex().FireDue(ctx, &waitRuns{db: db, held: map[string]*Run{}}, maxFireBatch)
}

// waitRuns is the DB as FireDue's Runs.
type waitRuns struct {
	db   *DB
	held map[string]*Run
}

// Hold implements wait.Runs.
func (h *waitRuns) Hold(ctx context.Context, run string) (uint64, chain.Hash, bool, error) {
	r, err := h.db.waitRun(run)
	if err != nil {
		return 0, chain.Hash{}, false, nil
	}
	if err := r.lockIdle(ctx); err != nil {
		return 0, chain.Hash{}, false, err
	}
	if r.mu.end != nil || r.mu.ending || r.mu.broken != nil {
		r.mu.Unlock()
		return 0, chain.Hash{}, false, nil
	}
	seq, head := r.lastLinkLocked()
	r.startWriteLocked()
	r.mu.Unlock()
	h.held[run] = r
	return seq, head, true, nil
}

// Release implements wait.Runs.
func (h *waitRuns) Release(run string) {
	r := h.held[run]
	delete(h.held, run)
	r.mu.Lock()
	r.endWriteLocked()
	r.mu.Unlock()
}

// Append implements wait.Runs: tracked (the checkpoint's replay position
// stays below the records) until done.
func (h *waitRuns) Append(ctx context.Context, raws [][]byte) ([]wal.Pos, func(), error) {
	db := h.db
	tok := db.track()
	poss, err := db.appendBatch(ctx, raws)
	if err != nil {
		db.untrack(tok)
		return nil, nil, err
	}
	return poss, func() { db.untrack(tok); db.waitsChanged() }, nil
}

// Link implements wait.Runs.
func (h *waitRuns) Link(run string, seq uint64, head chain.Hash, payload []byte) chain.Hash {
	return h.db.hasher.Link(run, seq, head, payload)
}

// Recorded implements wait.Runs: the observer.
func (h *waitRuns) Recorded(rec *record.Record) { h.db.waitObserved(rec.Kind, rec.Run, rec.Seq) }

// waitObserved tells the observer (a WaitObserver) of a record of kind k
// of run after seq, written and applied.
func (db *DB) waitObserved(k record.Kind, run string, seq uint64) {
	if obs, ok := db.opts.Observer.(WaitObserver); ok {
		cur, _ := db.waitIndex().Current(run, seq)
		obs.WaitRecorded(k, run, seq, exportWait(&cur))
	}
}

// maxFireBatch bounds the timeouts one batch of fireDue records.
const maxFireBatch = 1024

// waitsChanged wakes the callers blocked on ReadyChanged.
func (db *DB) waitsChanged() {
	s := &db.waits
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.changed != nil {
		close(s.mu.changed)
		s.mu.changed = nil
	}
}

// armWaitTimerLocked arms the wall-clock timer for the earliest deadline
// of an open wait (s.mu held).
func (db *DB) armWaitTimerLocked() {
	s := &db.waits
	x := db.waitIndex()
	if x == nil {
		return
	}
	at, ok := x.NextDeadline()
	if !ok || (s.mu.timer != nil && s.mu.timerAt == at) {
		return
	}
	if s.mu.timer != nil {
		s.mu.timer.Stop()
	}
	d := time.Duration(at - x.Now())
	s.mu.timerAt = at
	s.mu.timer = time.AfterFunc(max(d, 0), func() {
		s.mu.Lock()
		if s.mu.timerAt == at {
			s.mu.timer, s.mu.timerAt = nil, 0
		}
		s.mu.Unlock()
		db.waitsChanged()
	})
}

// exportWait is w as the API returns it.
func exportWait(w *wait.Wait) Wait {
	out := Wait{Run: w.Run, Seq: w.Seq, Name: w.Name, Declared: time.Unix(0, w.Declared), Outcome: w.Outcome}
	if w.Deadline != 0 {
		out.Deadline = time.Unix(0, w.Deadline)
	}
	if w.Outcome != WaitOpen {
		out.Ended = time.Unix(0, w.Ended)
	}
	if e := w.Event; e != nil {
		out.Event = &Event{Run: e.Run, Name: e.Name, Sender: e.Sender, Seq: e.Seq, Sent: time.Unix(0, e.Sent),
			Payload: append([]byte(nil), e.Payload...)}
	}
	return out
}

// waitsSource is the store as the index of waits reads it (as
// waitsLoad hands it), and for the check's read of the records of waits.
func (db *DB) waitsSource() wait.LogSource {
	return wait.LogSource{FS: db.fs, Waits: db.path(layout.WaitsName), Sealer: db.sealer, Log: db.log,
		File: db.segmentFile, Decoder: func() *record.Decoder { return db.decoder(false) }, Logger: db.logger,
		Map: db.opts.FS == vfs.Default}
}
