package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
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
func (db *DB) recover(cp *checkpointFile, from wal.Pos) error {
	if cp != nil {
		err := db.replayFrom(cp, from)
		var m *checkpointMismatch
		if !errors.As(err, &m) {
			return err
		}
		db.ignoreCheckpoint(m.Error())
	}
	return db.replayFrom(nil, wal.Pos{})
}

// checkpointMismatch is a disagreement between CHECKPOINT and the log.
type checkpointMismatch struct{ reason string }

func (e *checkpointMismatch) Error() string { return e.reason }

func mismatchf(format string, args ...any) error {
	return &checkpointMismatch{reason: fmt.Sprintf(format, args...)}
}

// ignoreCheckpoint drops what was built from CHECKPOINT before a whole
// replay, and says why in the log and in OpenInfo.
func (db *DB) ignoreCheckpoint(why string) {
	db.logger.Warn("engine: CHECKPOINT does not match the log; replaying the whole log", "file", db.path(checkpointName), "reason", why)
	db.openInfo.CheckpointIgnored = why
	db.openInfo.CheckpointGen = 0
	db.openInfo.Replayed, db.openInfo.ReplayedBytes, db.openInfo.Interrupted = 0, 0, 0
	db.openGen, db.bg.ledgerGn = 0, 0
	db.mu.runs = map[string]*Run{}
	db.mu.lazy, db.mu.lazyLeft = nil, 0
	db.ledger = ledger.New()
}

// replayFrom builds the runs of cp (nil: none) and replays the log from.
func (db *DB) replayFrom(cp *checkpointFile, from wal.Pos) error {
	if cp != nil {
		// The runs are built on first use (runLocked): a restart pays for
		// the runs its tail touches, not for every run of the store.
		// Checkpoints list the runs sorted by id; a table that is not is
		// sorted here (linear when it already is).
		slices.SortFunc(cp.runs, func(a, b checkpointRun) int { return strings.Compare(a.id, b.id) })
		for i := range cp.runs {
			c := &cp.runs[i]
			if i > 0 && c.id == cp.runs[i-1].id {
				return mismatchf("run %q is listed twice", c.id)
			}
			if c.indexedSeq != c.lastSeq {
				return mismatchf("run %q: atoms %d..%d have no log position", c.id, c.indexedSeq+1, c.lastSeq)
			}
		}
		db.mu.lazy, db.mu.lazyLeft, db.mu.lazyTime = cp.runs, len(cp.runs), time.Now()
	}

	rd, err := db.log.NewReader(from)
	if err != nil {
		if cp != nil {
			return mismatchf("replay position %v: %v", from, err)
		}
		return fmt.Errorf("engine: replay from %v: %w", from, err)
	}
	defer rd.Close()
	for rd.Next() {
		rec := rd.Record()
		pos := rd.Pos()
		db.openInfo.Replayed++
		db.openInfo.ReplayedBytes += int64(len(rec))
		if err := db.replay(rec, pos, cp != nil); err != nil {
			return err
		}
	}
	if err := rd.Err(); err != nil {
		return db.logDamage(err, db.replayedSeqs())
	}
	db.tailBytes.Store(db.openInfo.ReplayedBytes)
	for _, r := range db.mu.runs {
		if r.mu.interruptedSeq != 0 {
			db.openInfo.Interrupted++
		}
	}
	for i := range db.mu.lazy {
		c := &db.mu.lazy[i]
		if _, built := db.mu.runs[c.id]; !built && len(c.inflight) > 0 {
			db.openInfo.Interrupted++
		}
	}
	return nil
}

// runLocked returns the run named id, building it from the CHECKPOINT's
// table on its first use, or nil if the store has no such run.
func (db *DB) runLocked(id string) *Run {
	if r, ok := db.mu.runs[id]; ok {
		return r
	}
	if db.mu.lazyLeft == 0 || db.mu.dropped[id] {
		return nil
	}
	i, ok := slices.BinarySearchFunc(db.mu.lazy, id, func(c checkpointRun, id string) int { return strings.Compare(c.id, id) })
	if !ok {
		return nil
	}
	r := new(Run)
	db.fillRun(r, &db.mu.lazy[i])
	db.mu.runs[id] = r
	if db.mu.lazyLeft--; db.mu.lazyLeft == 0 {
		db.mu.lazy = nil
	}
	return r
}

// allRunsLocked builds every run of the CHECKPOINT's table not built yet.
func (db *DB) allRunsLocked() {
	if db.mu.lazyLeft == 0 {
		return
	}
	runs := make([]Run, db.mu.lazyLeft) // one allocation for all of them
	for i := range db.mu.lazy {
		c := &db.mu.lazy[i]
		if _, ok := db.mu.runs[c.id]; !ok && !db.mu.dropped[c.id] {
			r := &runs[len(runs)-db.mu.lazyLeft]
			db.fillRun(r, c)
			db.mu.runs[c.id] = r
			db.mu.lazyLeft--
		}
	}
	db.mu.lazy = nil
}

// fillRun sets r to the run c describes, as of the checkpoint. Not newRun:
// a run with atoms needs neither its genesis hash nor an empty frame.
func (db *DB) fillRun(r *Run, c *checkpointRun) {
	r.db, r.id, r.nonce, r.createdAt = db, c.id, c.nonce, time.Unix(0, c.created)
	r.mu.snapTime, r.mu.ckptTime = db.mu.lazyTime, db.mu.lazyTime
	if c.lastSeq == 0 {
		r.mu.frame = newFrame()
	}
	r.mu.lastSeq, r.mu.head = c.lastSeq, c.head
	r.mu.frameSeq, r.mu.indexedSeq, r.mu.snapSeq = c.frameSeq, c.indexedSeq, c.snapSeq
	if c.frameSeq == c.lastSeq {
		r.mu.frameHead = c.head // a checkpoint's frame files are at the run's last seq
	}
	r.mu.ckptRowHead = c.head
	r.mu.windowFirst = c.snapSeq
	r.mu.ckptSeq, r.mu.ckptHead = c.ckptSeq, c.ckptHead
	if len(c.inflight) > 0 {
		r.mu.inflight = c.inflight
		r.mu.interruptedSeq = c.lastSeq + 1
	}
}

// replay applies one record of the log. fromCheckpoint says the runs came
// from CHECKPOINT: a disagreement with it is then a *checkpointMismatch.
func (db *DB) replay(rec []byte, pos wal.Pos, fromCheckpoint bool) error {
	where := func(err error) error {
		return &CorruptionError{File: db.segmentFile(pos.Segment), Offset: pos.Offset, Reason: err.Error()}
	}
	if len(rec) == 0 {
		return where(errors.New("empty record"))
	}
	loc := ledger.Loc{Segment: pos.Segment, Offset: pos.Offset}
	switch rec[0] {
	case kindRun:
		rr, err := decodeRunRecord(rec)
		if err != nil {
			return where(err)
		}
		if r := db.runLocked(rr.id); r == nil {
			db.mu.runs[rr.id] = newRun(db, rr.id, rr.nonce, time.Unix(0, rr.created))
		} else if r.nonce != rr.nonce {
			if fromCheckpoint {
				return mismatchf("run %q has another nonce in the log (%v)", rr.id, pos)
			}
			return &CorruptionError{File: db.segmentFile(pos.Segment), Offset: pos.Offset, Run: rr.id,
				Reason: "the run is created a second time"}
		}
	case kindIntent:
		body, err := db.comp.Decompress(nil, rec[1:])
		if err != nil {
			return db.decompressDamage(rec, pos, "intent", err)
		}
		in, err := ledger.DecodeIntentView(body) // the ledger keeps no args
		if err != nil {
			return where(err)
		}
		db.ledger.ApplyIntent(in, loc)
		if r := db.runLocked(in.RunID); r != nil && in.Seq == r.mu.lastSeq+1 {
			r.noteInflight(in.Index, in.Fingerprint)
		}
	case kindCert:
		body, err := db.comp.Decompress(nil, rec[1:])
		if err != nil {
			return db.decompressDamage(rec, pos, "certificate", err)
		}
		c, err := ledger.DecodeCertificateView(body) // the ledger keeps no result here
		if err != nil {
			return where(err)
		}
		db.ledger.ApplyCertificate(c, loc, false)
		if r := db.runLocked(c.RunID); r != nil && c.Seq == r.mu.lastSeq+1 {
			r.noteInflight(c.Index, c.Fingerprint)
		}
	case kindAtom:
		a, err := decodeAtomRecord(rec)
		if err != nil {
			return where(err)
		}
		if err := db.comp.Charge(a.body); err != nil { // decompressed later, when a frame is needed
			return where(err)
		}
		r := db.runLocked(a.run)
		if r == nil {
			if fromCheckpoint {
				return mismatchf("the log has atom %d of run %q at %v, a run it does not list", a.seq, a.run, pos)
			}
			return &CorruptionError{File: db.segmentFile(pos.Segment), Offset: pos.Offset, Run: a.run, Seq: a.seq,
				Reason: "atom of a run whose creation record is not in the log"}
		}
		switch {
		case a.seq == r.mu.lastSeq && a.head != r.mu.head:
			if fromCheckpoint {
				return mismatchf("run %q seq %d: the log's head %x differs from CHECKPOINT's %x", a.run, a.seq, a.head[:8], r.mu.head[:8])
			}
			return &CorruptionError{File: db.segmentFile(pos.Segment), Offset: pos.Offset, Run: a.run, Seq: a.seq,
				Reason: "the seq is in the log twice"}
		case a.seq <= r.mu.lastSeq:
			// Reflected by the checkpoint already.
		case a.seq == r.mu.lastSeq+1:
			if r.mu.frame != nil && r.mu.lastSeq == 0 && len(r.mu.pending) == 0 {
				r.mu.frame = nil // rebuilt from the pending atoms when needed
			}
			r.mu.pending = append(r.mu.pending, pendingAtom{seq: a.seq, head: a.head, body: append([]byte(nil), a.body...)})
			r.mu.lastSeq, r.mu.head = a.seq, a.head
			r.mu.positions = append(r.mu.positions, pos)
			r.mu.inflight, r.mu.interruptedSeq = nil, 0
		default:
			if fromCheckpoint {
				return mismatchf("run %q: the log has seq %d at %v, CHECKPOINT's last seq is %d", a.run, a.seq, pos, r.mu.lastSeq)
			}
			return &CorruptionError{File: db.segmentFile(pos.Segment), Offset: pos.Offset, Run: a.run, Seq: r.mu.lastSeq + 1,
				Reason: fmt.Sprintf("seq %d follows seq %d: the atoms between them are missing", a.seq, r.mu.lastSeq)}
		}
	case kindFail:
		f, err := decodeFailRecord(rec)
		if err != nil {
			return where(err)
		}
		if r := db.runLocked(f.run); r != nil && f.seq == r.mu.lastSeq+1 {
			r.mu.inflight, r.mu.interruptedSeq = nil, 0
		}
	case kindCheckpoint:
		c, err := chain.ParseCheckpoint(rec[1:])
		if err != nil {
			return where(err)
		}
		if r := db.runLocked(c.RunID); r != nil && c.Seq > r.mu.ckptSeq {
			r.mu.ckptSeq, r.mu.ckptHead = c.Seq, c.Head
		}
	case kindStoreHead:
		if _, err := chain.ParseStoreHead(rec[1:]); err != nil {
			return where(err)
		}
	default:
		return where(fmt.Errorf("unknown record kind %d", rec[0]))
	}
	return nil
}

// noteInflight records an action of the atom at lastSeq+1 found in the log:
// if nothing commits that seq, it was interrupted.
func (r *Run) noteInflight(index uint32, fp ledger.Fingerprint) {
	for _, a := range r.mu.inflight {
		if a.fp == fp {
			return
		}
	}
	r.mu.inflight = append(r.mu.inflight, inflightAction{index: index, fp: fp})
	r.mu.interruptedSeq = r.mu.lastSeq + 1
}

// frameFileName is the frame file of a run.
func (db *DB) frameFileName(run string) string {
	return db.path(framesDir, frameFileBase(run))
}

// readFrameFile returns the frame stored in the run's frame file and its
// seq, or an empty frame at seq 0 if the run has none.
func (db *DB) readFrameFile(run string) (*frame.Frame, uint64, error) {
	name := db.frameFileName(run)
	b, err := readFile(db.fs, name)
	if notExist(err) {
		return newFrame(), 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("engine: read %s: %w", name, err)
	}
	ff, err := parseFrameFile(name, b)
	if err != nil {
		return nil, 0, err
	}
	if ff.run != run {
		return nil, 0, corruptf(name, "holds run %q, want %q", ff.run, run)
	}
	f, err := db.decodeFrame(ff.frame, name)
	if err != nil {
		return nil, 0, err
	}
	return f, ff.seq, nil
}

func (db *DB) decodeFrame(compressed []byte, where string) (*frame.Frame, error) {
	raw, err := db.comp.Decompress(nil, compressed)
	if err != nil {
		return nil, corruptf(where, "frame: %v", err)
	}
	f, err := frame.DecodeFrameOwned(raw) // raw is this call's own
	if err != nil {
		return nil, corruptf(where, "frame: %v", err)
	}
	if f.Memory == nil {
		f.Memory = map[string][]byte{}
	}
	return f, nil
}
