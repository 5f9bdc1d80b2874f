package engine

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/lifecycle"
	"github.com/continuumdb/continuum/internal/mailbox"
	"github.com/continuumdb/continuum/internal/registry"
	"github.com/continuumdb/continuum/internal/runstate"
	"github.com/continuumdb/continuum/internal/runtable"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// recover rebuilds the in-memory state: the runs as of the engine
// checkpoint, then every record of the log tail written after it. The tail
// is applied idempotently: a checkpoint captures state at or after its
// replay position, so records it already reflects are skipped by seq (atoms)
// or are no-ops (ledger records, run creations).
//
// CHECKPOINT is derived: when its tail disagrees with it (an atom of a run
// it does not list, a seq past a gap, a head other than the one it names)
// it is set aside and the whole log is replayed, which the log alone
// decides. The same checks failing on a whole replay are log damage.
func (db *DB) recover(cp *layout.Checkpoint, from wal.Pos) error {
	if cp != nil {
		err := db.replayFrom(cp, from)
		var m *registry.Mismatch
		if !errors.As(err, &m) {
			return err
		}
		db.ignoreCheckpoint(m.Error())
	}
	return db.replayFrom(nil, wal.Pos{})
}

// ignoreCheckpoint drops what was built from CHECKPOINT before a whole
// replay, and says why in the log and in OpenInfo.
func (db *DB) ignoreCheckpoint(why string) {
	db.logger.Warn("engine: CHECKPOINT does not match the log; replaying the whole log", "file", db.path(layout.CheckpointName), "reason", why)
	db.openInfo.CheckpointIgnored = why
	db.openInfo.CheckpointGen = 0
	db.openInfo.Replayed, db.openInfo.ReplayedBytes, db.openInfo.Interrupted = 0, 0, 0
	db.openGen, db.bg.ledgerGn = 0, 0
	db.mu.runs = map[string]*Run{}
	db.mu.lazy.Reset()
	db.ledger = ledger.New()
}

// replayFrom builds the runs of cp (nil: none) and replays the log from.
func (db *DB) replayFrom(cp *layout.Checkpoint, from wal.Pos) error {
	if cp != nil {
		// The runs are built on first use (runLocked): a restart pays for
		// the runs its tail touches, not for every run of the store.
		if why := cp.SortRuns(); why != "" {
			return &registry.Mismatch{Reason: why}
		}
		db.mu.lazy.Load(cp.Runs, time.Now())
	}

	db.msgs.Reset(mailbox.LogSource{FS: db.fs, Inbox: db.path(layout.InboxName), Sealer: db.sealer, Log: db.log,
		File: db.segmentFile, Decoder: func() *record.Decoder { return db.decoder(false) }, Logger: db.logger}, cp, from)
	db.waits.Index().FromCheckpoint(cp, from) // the load of waits starts from cp
	dec := db.decoder(true)
	if db.replayComp != nil {
		dec.Comp = db.replayComp // within Open's budget
	}
	c, err := record.NewCursor(db.log, db.segmentFile, from, dec)
	if err != nil {
		if cp != nil {
			return registry.Mismatchf("replay position %v: %v", from, err)
		}
		return fmt.Errorf("engine: replay from %v: %w", from, err)
	}
	defer c.Close()
	c.Known(db.replayedSeqs())
	db.gc.ResetOrphans()
	for c.Next() {
		r := c.Record()
		db.openInfo.Replayed++
		db.openInfo.ReplayedBytes += int64(len(r.Raw))
		if err := db.replay(r, cp != nil); err != nil {
			return err
		}
	}
	if err := c.Err(); err != nil {
		return err
	}
	if err := db.gc.CheckOrphans(db.deletedLocked); err != nil {
		return err
	}
	db.tailBytes.Store(db.openInfo.ReplayedBytes)
	for _, r := range db.mu.runs {
		if r.mu.interruptedSeq != 0 {
			db.openInfo.Interrupted++
		}
	}
	db.openInfo.Interrupted += db.mu.lazy.Interrupted(db.builtLocked)
	return nil
}

// runLocked returns the run named id, building it from the CHECKPOINT's
// table on its first use, or nil if the store has no such run.
func (db *DB) runLocked(id string) *Run {
	if r, ok := db.mu.runs[id]; ok {
		return r
	}
	c := db.mu.lazy.Take(id, &db.mu.deleted)
	if c == nil {
		return nil
	}
	r := new(Run)
	db.mu.runs[id] = r // before its parent is built: a cycle of rows ends here
	db.fillRun(r, c)
	return r
}

// allRunsLocked builds every run of the CHECKPOINT's table not built yet.
func (db *DB) allRunsLocked() {
	runs := make([]Run, db.mu.lazy.Left()) // one allocation for all of them
	db.mu.lazy.TakeAll(&db.mu.deleted, db.builtLocked, func(i int, c *layout.CheckpointRun) {
		db.fillRun(&runs[i], c)
		db.mu.runs[c.ID] = &runs[i]
	})
}

// builtLocked reports whether run id is built (not a row of lazy).
func (db *DB) builtLocked(id string) bool { _, ok := db.mu.runs[id]; return ok }

// fillRun sets r to the run c describes, as of the checkpoint. Not newRun:
// a run with atoms needs neither its genesis hash nor an empty frame.
func (db *DB) fillRun(r *Run, c *layout.CheckpointRun) {
	r.db, r.id, r.nonce, r.createdAt = db, c.ID, c.Nonce, time.Unix(0, c.Created)
	r.parent, r.base, r.baseHead = c.Parent, c.ForkedAt, c.BaseHead
	if c.Parent != "" {
		r.parentRef.Store(db.runLocked(c.Parent)) // nil: reported when the state is needed
	}
	r.mu.book.Start(db.mu.lazy.At())
	r.mu.book.CkptSeq, r.mu.book.CkptHead = c.CkptSeq, c.CkptHead
	var end *lifecycle.End
	if c.Status != 0 {
		end = &lifecycle.End{Status: c.Status, At: time.Unix(0, c.Ended), Result: c.Result, Head: c.EndHead}
		if db.sealer != nil {
			end.Result, end.Stored = db.openRowResult(c.ID, c.LastSeq+1, c.Result), c.Result
		}
	}
	r.setStateLocked(runtable.FromRow(c), end)
}

// setStateLocked sets r's state to s, ended by end (nil: not ended), as a
// restart finds it: CHECKPOINT's row (fillRun) or the log's (the
// reconciliation, registry.go).
func (r *Run) setStateLocked(s runtable.State, end *lifecycle.End) {
	r.mu.frame, r.mu.pending = nil, nil
	if s.Empty {
		r.mu.frame = newFrame()
	}
	r.mu.lastSeq, r.mu.head = s.Last, s.Head
	r.mu.book.Restored(s.Head, s.FrameSeq, s.FrameHead, s.IndexedSeq, s.Positions, s.SnapSeq)
	r.mu.inflight, r.mu.interruptedSeq = s.Inflight, s.Interrupted
	r.mu.end = end
}

// replay applies one record of the log. fromCheckpoint says the runs came
// from CHECKPOINT: a disagreement with it is then a *registry.Mismatch.
// Whether a run, fork, atom or end record is refused is registry's
// decision (CheckCreated, CheckAtom, CheckEnd, Unlisted).
func (db *DB) replay(rec *record.Record, fromCheckpoint bool) error {
	pos := rec.Pos
	switch rec.Kind {
	case record.KindFork, record.KindRun:
		r := db.runLocked(rec.Run)
		switch {
		case r != nil:
			return db.refuse(rec, fromCheckpoint, registry.CheckCreated(rec, r.replayedLocked()))
		case rec.Kind == record.KindRun:
			db.mu.runs[rec.Run] = newRun(db, rec.Run, rec.Nonce, time.Unix(0, rec.Created))
		default:
			p := db.runLocked(rec.Parent)
			if p == nil {
				return db.refuse(rec, fromCheckpoint, registry.Unlisted(rec))
			}
			db.mu.runs[rec.Run] = newForkRun(db, rec.Run, rec.Nonce, time.Unix(0, rec.Created), rec.Parent, p, rec.Seq, rec.ParentHead)
		}
	case record.KindIntent:
		in := rec.Intent // the ledger keeps no args
		if in == nil {
			return nil // sealed with an erased key: its run was erased
		}
		db.ledger.ApplyIntent(in, pos)
		if r := db.runLocked(in.RunID); r != nil && in.Seq == r.mu.lastSeq+1 {
			r.noteInflight(in.Index, in.Fingerprint)
		}
	case record.KindCert:
		c := rec.Cert // the ledger keeps no result here
		if c == nil {
			return nil // sealed with an erased key
		}
		db.ledger.ApplyCertificate(c, pos, false)
		if r := db.runLocked(c.RunID); r != nil && c.Seq == r.mu.lastSeq+1 {
			r.noteInflight(c.Index, c.Fingerprint)
		}
	case record.KindAtom:
		// The body is decompressed later, when a frame is needed.
		r := db.runLocked(rec.Run)
		switch step, no := registry.CheckAtom(rec, r.replayedLocked()); {
		case no != nil:
			return db.refuse(rec, fromCheckpoint, no)
		case step == registry.Reflected:
			db.replayed(rec, nil, true) // reflected by CHECKPOINT (and its INBOX)
		default:
			if r.mu.frame != nil && r.mu.lastSeq == r.base && len(r.mu.pending) == 0 {
				r.mu.frame = nil // rebuilt from the pending atoms when needed
			}
			body := append([]byte(nil), rec.Body...)
			r.mu.pending = append(r.mu.pending, pendingAtom{seq: rec.Seq, head: rec.Head, body: body})
			db.replayed(rec, body, false)
			r.mu.lastSeq, r.mu.head = rec.Seq, rec.Head
			r.mu.book.Positions = append(r.mu.book.Positions, pos)
			r.mu.inflight, r.mu.interruptedSeq = nil, 0
			r.mu.failed.Committed(rec.Seq)
			r.appliedLocked(rec.Seq)
		}
	case record.KindFail:
		if r := db.runLocked(rec.Run); r != nil && rec.Seq == r.mu.lastSeq+1 {
			if r.mu.interruptedSeq == rec.Seq {
				r.mu.failed.Note(rec.Seq, r.mu.inflight)
			}
			r.mu.inflight, r.mu.interruptedSeq = nil, 0
		}
	case record.KindEnd:
		r := db.runLocked(rec.Run)
		switch step, no := registry.CheckEnd(rec, r.replayedLocked()); {
		case no != nil:
			return db.refuse(rec, fromCheckpoint, no)
		case step == registry.Reflected:
			db.replayed(rec, nil, true) // for a rebuild of the inbox
		default:
			r.mu.end = &lifecycle.End{Status: rec.Status, At: time.Unix(0, rec.Ended), Result: append([]byte(nil), rec.Result...), Head: rec.Head, Stored: bytes.Clone(rec.Stored)}
			r.mu.inflight, r.mu.interruptedSeq = nil, 0
			db.replayed(rec, nil, false)
		}
	default:
		if c := replayOwner[rec.Kind]; c != nil {
			return db.replayCapability(c, rec, fromCheckpoint)
		}
	}
	return nil
}

// refuse returns no's error for rec (refuseRecord), nil if no is nil.
func (db *DB) refuse(rec *record.Record, fromCheckpoint bool, no *registry.Refusal) error {
	if no == nil {
		return nil
	}
	return db.refuseRecord(rec, fromCheckpoint && no.Mismatch != "", no.Orphan, no.Mismatch, no.Seq, no.Why)
}

// refuseRecord is rec disagreeing with the runs replayed so far: with runs
// from CHECKPOINT, a *registry.Mismatch saying mismatch; otherwise damage
// at rec for its run at seq (why), set aside as an orphan's if orphan and
// the log's start was trimmed (retention.GC.Orphan).
func (db *DB) refuseRecord(rec *record.Record, fromCheckpoint, orphan bool, mismatch string, seq uint64, why string) error {
	if fromCheckpoint {
		return &registry.Mismatch{Reason: mismatch}
	}
	err := &CorruptionError{File: db.segmentFile(rec.Pos.Segment), Offset: rec.Pos.Offset, Run: rec.Run, Seq: seq, Reason: why}
	if orphan {
		return db.gc.Orphan(db.logTrimmed(), rec.Run, err)
	}
	return err
}

// decoder returns a decoder of the log's records with the store's
// compressor and dictionaries; ledgerRecords asks for the intents and
// certificates decoded.
func (db *DB) decoder(ledgerRecords bool) *record.Decoder {
	return &record.Decoder{Comp: db.comp, Ledger: ledgerRecords, Dicts: db.dicts, Sealed: db.sealer != nil, Sealer: db.sealer,
		DictFile: func(id uint32) string { return db.fs.PathJoin(db.path(layout.DictsDir), layout.DictFileName(id)) }}
}

// replayedLocked is what the replay holds of r (nil: none), for
// registry's checks of its records.
func (r *Run) replayedLocked() *registry.Replayed {
	if r == nil {
		return nil
	}
	st := &registry.Replayed{Nonce: r.nonce, Parent: r.parent, Base: r.base, Last: r.mu.lastSeq, Head: r.mu.head}
	if e := r.mu.end; e != nil {
		st.Ended, st.Status, st.EndAt = true, e.Status, e.Head
	}
	return st
}

// noteInflight records an action of the atom at lastSeq+1 found in the log
// (runtable.NoteInflight): if nothing commits that seq, it was interrupted.
func (r *Run) noteInflight(index uint32, fp ledger.Fingerprint) {
	if in, added := runtable.NoteInflight(r.mu.inflight, index, fp); added {
		r.mu.inflight, r.mu.interruptedSeq = in, r.mu.lastSeq+1
	}
}

// frameFileName is the frame file of a run.
func (db *DB) frameFileName(run string) string {
	return db.path(layout.FramesDir, layout.FrameFileBase(run))
}

// decodeFrame decodes a stored frame of run at seq, opening it first in an
// encrypted store (runstate.DecodeFrame).
func (db *DB) decodeFrame(compressed []byte, run string, seq uint64, where string) (*frame.Frame, error) {
	return runstate.DecodeFrame(db.comp, db.sealer, compressed, run, seq, where)
}
