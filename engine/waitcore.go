package engine

// The adapter of waits (waits.go) to internal/wait: the DB as its Core,
// a run as its Run, the index's load and Source, WAITS at each
// checkpoint, and Open's replay of the records of waits.

import (
	"context"
	"errors"
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

// waitErrs are the engine's sentinels the conduct of waits returns.
var waitErrs = wait.Errors{Closed: ErrClosed, Invalid: ErrInvalidOptions, TooLarge: ErrTooLarge, WaitExists: ErrWaitExists,
	NoWait: ErrNoWait, NotEnded: ErrWaitNotEnded, Mismatch: ErrEventMismatch, RunEnded: ErrRunEnded, InProgress: ErrAtomInProgress,
	NoRun: ErrNoRun, Deleted: ErrRunDeleted}

// writeWaitsFile writes WAITS for the checkpoint of generation gen at
// replay position floor (internal/wait, WriteFile), after every run's row
// is captured (rows, sorted by id): a wait its run's row says an atom
// took, and a run that ended, leave the index and the file; the file
// becomes the index's table, read from the file but after Close's own
// checkpoint. CHECKPOINT's directory fsync makes its rename durable.
func (db *DB) writeWaitsFile(gen uint64, floor wal.Pos, rows []layout.CheckpointRun) error {
	return db.waits.WriteFile(gen, floor, wait.CheckpointRows(rows), db.opts.NoSync, !db.closed.Load())
}

// replayWait checks a wait, event or wake record of Open's replay
// against its run r (internal/wait, CheckReplayed). The index is loaded
// on first use, not here.
func (db *DB) replayWait(r *Run, rec *record.Record) string {
	return wait.CheckReplayed(rec, db.hasher.Link(rec.Run, rec.Seq, rec.Final, rec.Payload), r.mu.lastSeq, r.mu.head, r.mu.end != nil)
}

// waitCore is the DB as the conduct of waits' Core.
type waitCore struct{ db *DB }

func (c waitCore) Open() error { return c.db.checkOpen() }

// Run returns run id (nil: none) and whether it was deleted.
func (c waitCore) Run(id string) (wait.Run, bool, error) {
	r, deleted, err := c.db.knownRun(id) // messages.go
	if r == nil {
		return nil, deleted, err // a nil wait.Run, not a waitRun of none
	}
	return waitRun{r}, deleted, err
}

// Append writes raws in one durable batch, tracked (the checkpoint's
// replay position stays below them) until done.
func (c waitCore) Append(ctx context.Context, raws [][]byte) ([]wal.Pos, func(), error) {
	db := c.db
	tok := db.track()
	poss, err := db.appendBatch(ctx, raws)
	if err != nil {
		db.untrack(tok)
		return nil, nil, err
	}
	return poss, func() { db.untrack(tok) }, nil
}

func (c waitCore) Link(run string, seq uint64, head chain.Hash, payload []byte) chain.Hash {
	return c.db.hasher.Link(run, seq, head, payload)
}

func (c waitCore) Source() wait.LogSource { return c.db.waitsSource() }

// Recorded tells the observer (a WaitObserver) of a record of kind k of
// run after seq, written and applied.
func (c waitCore) Recorded(k record.Kind, run string, seq uint64) {
	if obs, ok := c.db.opts.Observer.(WaitObserver); ok {
		cur, _ := c.db.waits.Loaded().Current(run, seq)
		obs.WaitRecorded(k, run, seq, exportWait(&cur))
	}
}

// Checking reports whether the check of WAITS against the log
// (checkRegistry's checkWaitsFile) is set up and has not ended.
func (c waitCore) Checking() bool { rc := c.db.reg; return rc != nil && !rc.WaitsDone() }

func (c waitCore) CheckLog() error { return c.db.checkRegistry() }

// waitRun is a run as the conduct of waits' Run.
type waitRun struct{ r *Run }

func (h waitRun) ID() string { return h.r.id }

// Hold takes the run's write mark once no atom of it writes, and returns
// the seq and head of its newest atom in the log: its last one's, or,
// with branches in flight, the newest a branch appended (applied or not),
// so that a record of waits written now follows it in the log and names
// it. refused (wait.Errors.Refused): a broken run, an end, an ending, or
// (declare) an atom or branches running.
func (h waitRun) Hold(ctx context.Context, declare bool) (uint64, chain.Hash, error, error) {
	r := h.r
	if err := r.lockIdle(ctx); err != nil {
		return 0, chain.Hash{}, nil, err
	}
	st := wait.Holding{Broken: r.mu.broken, Ending: r.mu.ending, Atom: r.mu.atom != nil, Branches: r.mu.br != nil && !r.mu.br.Idle()}
	if r.mu.end != nil {
		st.Ended = Status(r.mu.end.Status)
	}
	if refused := waitErrs.Refused(r.id, st, declare); refused != nil {
		r.mu.Unlock()
		return 0, chain.Hash{}, refused, nil
	}
	seq, head := r.mu.lastSeq, r.mu.head
	if br := r.mu.br; br != nil {
		t := br.Tail()
		seq, head = t.Seq, t.Head
	}
	r.startWriteLocked()
	r.mu.Unlock()
	return seq, head, nil, nil
}

func (h waitRun) Release() {
	h.r.mu.Lock()
	h.r.endWriteLocked()
	h.r.mu.Unlock()
}

func (h waitRun) Last() (uint64, bool) {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	return h.r.mu.lastSeq, h.r.mu.end != nil
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

// exported is a Wait and an error of the conduct of waits as the API
// returns them: no Wait with an error but ErrWaitNotEnded's.
func exported(w wait.Wait, err error) (Wait, error) {
	if err != nil && w.Run == "" {
		return Wait{}, err
	}
	return exportWait(&w), err
}

// waitsSource is the store as the index of waits reads it (its load),
// and for the check's read of the records of waits.
func (db *DB) waitsSource() wait.LogSource {
	return wait.LogSource{FS: db.fs, Waits: db.path(layout.WaitsName), Sealer: db.sealer, Log: db.log,
		File: db.segmentFile, Decoder: func() *record.Decoder { return db.decoder(false) }, Logger: db.logger,
		Map: db.opts.FS == vfs.Default}
}

// The conduct of waits bounds an event's payload by its own constant: a
// compile error here if it is not MaxEventSize.
var _ = [1]struct{}{}[wait.MaxEventSize-MaxEventSize]
