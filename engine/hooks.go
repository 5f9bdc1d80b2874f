package engine

import (
	"fmt"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/mailbox"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// capability is what the core knows of a capability that is not on every
// atom's path: its hooks into the core's paths. The core calls the hooks of
// every capability in capabilities, in that order, and nothing else of
// them on those paths; each capability's package (internal/...) holds its
// logic behind the interface its doc.go writes, and the engine file named
// beside each entry adapts it. Every hook is optional.
//
// A new capability (waits, timers, streams, blobs) is an entry here and a
// package; the commit path, Open's replay and Fail do not change.
type capability struct {
	name string

	// kinds are the record kinds whose replay the capability owns: Open's
	// replay hands each such record to replay, under db.mu, on Open's
	// goroutine. If run is set the record names a run that must exist
	// (run names the record in errors): the core looks it up, refuses or
	// sets aside a record of a run the log never created (the orphan rule)
	// and passes it. why != "" is damage at the record; the core reports it
	// as a CHECKPOINT that disagrees with the log, or as corruption.
	kinds  []record.Kind
	run    string
	replay func(db *DB, r *Run, rec *record.Record) (why string)
	// replayed sees every replayed record that changes a run's history
	// (an atom, an end, a deletion), with the atom's body (nil if not
	// kept) and whether CHECKPOINT reflects it already.
	replayed func(db *DB, rec *record.Record, body []byte, reflected bool)

	// prepare may replace an atom's delta before anything checks or
	// encodes it (Commit, a branch's commit); own says the engine built it.
	prepare func(a *Atom, d *frame.Delta, own bool) (*frame.Delta, error)
	// check runs under the run's and the atom's locks before the atom's
	// record is written; an error leaves the atom running and nothing
	// written.
	check func(a *Atom, c *pendingCommit) error
	// applied runs under the run's lock once an atom at seq is part of the
	// run's state: after its commit, and when Open replays it.
	applied func(r *Run, seq uint64)
	// published runs under the run's lock once a committed atom's record
	// is durable at pos and its state published.
	published func(a *Atom, seq uint64, pos wal.Pos, c *pendingCommit)
	// failed runs under the run's lock once a Fail's record is durable.
	failed func(a *Atom)
	// gone runs once the end (k = KindEnd) or deletion (KindDelete,
	// KindErase) of run is durable.
	gone func(db *DB, k record.Kind, run string)
}

// capabilities is the one list of the core's hooks.
var capabilities = []capability{
	{ // erasure of runs and memory keys (erase.go, erasekey.go; internal/erasure)
		name:   "erasure",
		kinds:  []record.Kind{record.KindEraseKey},
		replay: func(db *DB, _ *Run, rec *record.Record) string { db.eraser.Replayed(rec); return "" },
		prepare: func(a *Atom, d *frame.Delta, own bool) (*frame.Delta, error) {
			return a.run.db.eraser.Seal(a.run.id, d, own)
		},
	},
	{ // deletions and erasures of runs as retention sees them (delete.go; internal/retention)
		name:   "retention",
		kinds:  []record.Kind{record.KindDelete, record.KindErase},
		replay: func(db *DB, _ *Run, rec *record.Record) string { return db.applyDeletionLocked(rec) },
	},
	{ // rollback with compensations (rollback.go; internal/saga)
		name:    "saga",
		kinds:   []record.Kind{record.KindRollback},
		run:     "rollback",
		replay:  func(db *DB, r *Run, rec *record.Record) string { return db.replayRollback(r, rec, rec.Pos) },
		applied: func(r *Run, seq uint64) { r.completeRollbackLocked(seq) },
	},
	{ // messages between runs (messages.go; internal/mailbox, its LogSource)
		name: "mailbox",
		replayed: func(db *DB, rec *record.Record, body []byte, reflected bool) {
			switch rec.Kind {
			case record.KindAtom, record.KindEnd, record.KindDelete, record.KindErase:
				db.msgs.Replayed(rec, body, reflected)
			}
		},
		check: func(a *Atom, c *pendingCommit) error {
			if err := a.run.db.msgs.Consumable(a.run.id, a.seq, &a.msgs); err != nil {
				return err
			}
			c.sent, c.consumed = a.msgs.Record()
			return nil
		},
		published: func(a *Atom, seq uint64, pos wal.Pos, c *pendingCommit) {
			if c.sent != nil || c.consumed != nil {
				a.run.db.msgs.Publish(a.run.id, seq, pos, c.sent, c.consumed)
			}
			a.msgs = mailbox.Draft{}
		},
		failed: func(a *Atom) { a.run.db.msgs.Release(a.run.id, &a.msgs) },
		gone:   func(db *DB, k record.Kind, run string) { db.msgs.Gone(k, run) },
	},
	{ // chain checkpoints in the log (background.go; internal/checkpoint)
		name:  "checkpoint",
		kinds: []record.Kind{record.KindCheckpoint},
		replay: func(db *DB, _ *Run, rec *record.Record) string {
			if r := db.runLocked(rec.Run); r != nil && rec.Seq > r.mu.book.CkptSeq {
				r.mu.book.CkptSeq, r.mu.book.CkptHead = rec.Seq, rec.Checkpoint.Head
			}
			return ""
		},
	},
	{ // large values in blobs outside the log (blobs.go; package blob)
		name: "blobs",
		prepare: func(a *Atom, d *frame.Delta, _ bool) (*frame.Delta, error) {
			return a.run.db.blobs.Delta(a.blobHolder(), d)
		},
		published: func(a *Atom, _ uint64, _ wal.Pos, _ *pendingCommit) { a.run.db.blobs.Release(a) },
		failed:    func(a *Atom) { a.run.db.blobs.Release(a) },
	},
	{ // waits, events and timers (waits.go, waitcore.go; internal/wait)
		name:   "waits",
		kinds:  []record.Kind{record.KindWait, record.KindEvent, record.KindWake},
		run:    "wait",
		replay: func(db *DB, r *Run, rec *record.Record) string { return db.replayWait(r, rec) },
		replayed: func(db *DB, rec *record.Record, _ []byte, _ bool) {
			switch rec.Kind {
			case record.KindEnd, record.KindDelete, record.KindErase:
				db.waits.Gone(rec.Kind, rec.Run)
			}
		},
		applied: func(r *Run, seq uint64) { r.db.waits.Taken(r.id, seq) }, // the wait before the atom is taken
		gone:    func(db *DB, k record.Kind, run string) { db.waits.Gone(k, run) },
	},
	{ // streams out of runs (streams.go; internal/stream)
		name:  "stream",
		kinds: []record.Kind{record.KindStreamChunk, record.KindStreamAbandon},
		run:   "stream record",
		// The index is built from the log on first use (internal/stream);
		// the replay notes that the log holds streams (the marker file is
		// derived from that).
		replay:    func(db *DB, _ *Run, _ *record.Record) string { db.streams.Seen(); return "" },
		check:     func(a *Atom, _ *pendingCommit) error { return a.run.db.streamCheck(a) },
		published: func(a *Atom, seq uint64, pos wal.Pos, _ *pendingCommit) { a.run.db.streamDone(a, seq, pos, false) },
		failed:    func(a *Atom) { a.run.db.streamDone(a, a.seq, wal.Pos{}, true) },
		gone:      func(db *DB, k record.Kind, run string) { db.streams.Gone(k, run) },
	},
}

// replayOwner is the capability that replays each record kind, from
// capabilities.
var replayOwner = func() map[record.Kind]*capability {
	m := map[record.Kind]*capability{}
	for i := range capabilities {
		for _, k := range capabilities[i].kinds {
			if m[k] != nil {
				panic(fmt.Sprintf("engine: record kind %v replayed by both %s and %s", k, m[k].name, capabilities[i].name))
			}
			m[k] = &capabilities[i]
		}
	}
	return m
}()

// replayCapability replays rec, of a kind c owns (see capability.kinds).
func (db *DB) replayCapability(c *capability, rec *record.Record, fromCheckpoint bool) error {
	var r *Run
	if c.run != "" {
		if r = db.runLocked(rec.Run); r == nil {
			return db.refuseRecord(rec, fromCheckpoint, true, fmt.Sprintf("the log has a %s of run %q at %v, a run it does not list", c.run, rec.Run, rec.Pos),
				rec.Seq, c.run+" of a run whose creation record is not in the log")
		}
	}
	if why := c.replay(db, r, rec); why != "" {
		return db.refuseRecord(rec, fromCheckpoint, false, fmt.Sprintf("run %q: %s (%v)", rec.Run, why, rec.Pos), rec.Seq, why)
	}
	db.replayed(rec, nil, false)
	return nil
}

// replayed calls every capability's replayed hook.
func (db *DB) replayed(rec *record.Record, body []byte, reflected bool) {
	for i := range capabilities {
		if h := capabilities[i].replayed; h != nil {
			h(db, rec, body, reflected)
		}
	}
}

// prepareDelta runs every capability's prepare hook on an atom's delta.
func (a *Atom) prepareDelta(d *frame.Delta, own bool) (*frame.Delta, error) {
	for i := range capabilities {
		if h := capabilities[i].prepare; h != nil {
			var err error
			if d, err = h(a, d, own); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

// checkCommitLocked runs every capability's check hook.
func (a *Atom) checkCommitLocked(c *pendingCommit) error {
	for i := range capabilities {
		if h := capabilities[i].check; h != nil {
			if err := h(a, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// appliedLocked runs every capability's applied hook.
func (r *Run) appliedLocked(seq uint64) {
	for i := range capabilities {
		if h := capabilities[i].applied; h != nil {
			h(r, seq)
		}
	}
}

// publishedLocked runs every capability's published hook.
func (a *Atom) publishedLocked(seq uint64, pos wal.Pos, c *pendingCommit) {
	for i := range capabilities {
		if h := capabilities[i].published; h != nil {
			h(a, seq, pos, c)
		}
	}
}

// publishRunGone runs every capability's gone hook: the end (k =
// KindEnd) or deletion (KindDelete, KindErase) of run is durable.
func (db *DB) publishRunGone(k record.Kind, run string) {
	for i := range capabilities {
		if h := capabilities[i].gone; h != nil {
			h(db, k, run)
		}
	}
}

// failedLocked runs every capability's failed hook.
func (a *Atom) failedLocked() {
	for i := range capabilities {
		if h := capabilities[i].failed; h != nil {
			h(a)
		}
	}
}
