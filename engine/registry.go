package engine

// The runs CHECKPOINT lists, checked against the log before a run is
// created. A restart trusts CHECKPOINT's table of runs for the part of the
// log before its replay position (reading that part would make restart
// cost depend on history), but creating a run is a decision the log must
// back: a run whose creation record is in the log is never created a
// second time. So the first creation of a run CHECKPOINT does not list
// reads the log before the replay position once (record headers only, no
// decompression) and reconciles the table with it, trusting the log:
// rows of runs the log does not hold are dropped, rows whose last seq,
// head or nonce differ are rebuilt from the log, runs it omits are added.

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// registryCheck is the one-time comparison of CHECKPOINT's runs with the
// log. Set up by Open when it started from a CHECKPOINT.
type registryCheck struct {
	rows []layout.CheckpointRun // CHECKPOINT's table, sorted by id (immutable)
	to   wal.Pos                // CHECKPOINT's replay position

	once    sync.Once
	checked atomic.Bool // once has run
	err     error       // the log could not be read; set inside once
	// mismatch describes the disagreements found ("" if none); set inside
	// once, read after it.
	mismatch string
}

// logRun is a run as the log before the replay position holds it.
type logRun struct {
	nonce   chain.Nonce
	created int64
	last    uint64
	head    chain.Hash
	pos     []wal.Pos // pos[i] is the position of atom base+i+1
	end     *runEnd   // the run's end, if the log ends it
	// A fork's parent, fork point and the parent's head there ("": none).
	parent     string
	base       uint64
	parentHead chain.Hash
	head0      chain.Hash // h(base): its genesis or fork genesis
	// after holds the heads of the run's atoms last+1.. at or after the
	// replay position, and endAfter its end there: an engine checkpoint
	// takes its replay position below the writes in flight and then the
	// runs, so CHECKPOINT may list a run with atoms (or an end) just past
	// the position.
	after    []chain.Hash
	endAfter *runEnd
}

// listedRight reports whether CHECKPOINT's row c says of the run what the
// log says: its seq between the log's before the replay position and
// what follows it, with the log's head there, and the same end (status,
// time, result and link).
func (lr *logRun) listedRight(c *layout.CheckpointRun) bool {
	switch {
	case c.LastSeq < lr.last || c.LastSeq > lr.last+uint64(len(lr.after)):
		return false
	case c.LastSeq == lr.last && lr.head != c.Head:
		return false
	case c.LastSeq > lr.last && lr.after[c.LastSeq-lr.last-1] != c.Head:
		return false
	}
	end := lr.end
	if end == nil && c.Status != 0 && c.LastSeq == lr.last+uint64(len(lr.after)) {
		end = lr.endAfter
	}
	if (end != nil) != (c.Status != 0) {
		return false
	}
	// The row's status, time and result are served by RunInfo without the
	// log being read: they must be the end record's, not only its head.
	return end == nil || uint8(end.status) == c.Status && end.head == c.EndHead &&
		end.at.UnixNano() == c.Ended && bytes.Equal(end.rowResult(), c.Result)
}

// checkRegistry runs the comparison once and returns its error. It must
// be called without db.mu held.
func (db *DB) checkRegistry() error {
	rc := db.reg
	if rc == nil {
		return nil
	}
	rc.once.Do(func() {
		var keyErasures []keyErasure
		runs, deleted, err := db.logRunsBefore(rc.to, &keyErasures)
		if err != nil {
			rc.err = err
			return
		}
		db.mu.Lock()
		for id, d := range deleted {
			m, why := mergeDeletion(id, db.mu.deleted[id], d)
			if why != "" {
				db.mu.Unlock()
				rc.err = fmt.Errorf("%w: %s", ErrCorrupt, why)
				return
			}
			db.markDeletedLocked(id, m)
		}
		rc.mismatch = db.reconcileLocked(rc.rows, runs)
		db.mu.Unlock()
		rc.checked.Store(true)
		db.healErasures()               // erase.go
		db.healKeyErasures(keyErasures) // erasekey.go
		if rc.mismatch != "" {
			db.logger.Warn("engine: CHECKPOINT's runs disagree with the log; the log's are used",
				"file", db.path(layout.CheckpointName), "disagreements", rc.mismatch)
		}
	})
	return rc.err
}

// registryMismatch returns what checkRegistry found, once it ran.
func (db *DB) registryMismatch() string {
	if db.reg == nil || !db.reg.checked.Load() {
		return ""
	}
	return db.reg.mismatch
}

// logRunsBefore reads the run, atom, end and delete records of the log
// before to: the runs it holds, and those it deleted. It appends to
// keyErasures the erase-key records of the whole log.
func (db *DB) logRunsBefore(to wal.Pos, keyErasures *[]keyErasure) (map[string]*logRun, map[string]*deletion, error) {
	dec := db.decoder(false)
	dec.Skip = func(k record.Kind, _ []byte) bool {
		return k != record.KindRun && k != record.KindAtom && k != record.KindEnd && k != record.KindFork && !k.Deletes() && k != record.KindEraseKey
	}
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: read the log's runs: %w", err)
	}
	defer c.Close()
	runs := map[string]*logRun{}
	deleted := map[string]*deletion{}
	// orphans holds, in a log that garbage collection trimmed, the first
	// record of each run whose creation record was reclaimed: fine for a
	// run the log deletes further on, damage otherwise.
	orphans := map[string]error{}
	trimmed := db.logTrimmed()
	for n := 0; c.Next(); n++ {
		if n%4096 == 0 && db.closed.Load() {
			return nil, nil, ErrClosed // Close does not wait for a whole read
		}
		r := c.Record()
		if r.Kind == record.KindEraseKey {
			*keyErasures = append(*keyErasures, keyErasure{run: r.Run, key: r.Key, nos: slices.Clone(r.KeyNos)})
			continue
		}
		// A run's creation record may follow the replay position while
		// CHECKPOINT lists it (a run is published before its record is
		// written): creations are taken wherever they are.
		if !r.Pos.Less(to) && r.Kind != record.KindRun && r.Kind != record.KindFork {
			if r.Kind.Deletes() {
				// Replayed at Open (a checkpoint taken while it was being
				// written no longer lists the run): the run is gone.
				d := deletionOf(r)
				if lr := runs[r.Run]; lr != nil {
					d.parent = lr.parent
				}
				delete(runs, r.Run)
				m, why := mergeDeletion(r.Run, deleted[r.Run], d)
				if why != "" {
					return nil, nil, &CorruptionError{File: db.segmentFile(r.Pos.Segment), Offset: r.Pos.Offset, Run: r.Run, Seq: r.Seq, Reason: why}
				}
				deleted[r.Run] = m
				continue
			}
			if lr := runs[r.Run]; lr != nil {
				switch {
				case r.Kind == record.KindAtom && r.Seq == lr.last+uint64(len(lr.after))+1 && lr.end == nil && lr.endAfter == nil:
					lr.after = append(lr.after, r.Head)
				case r.Kind == record.KindEnd && r.Seq == lr.last+uint64(len(lr.after))+1 && lr.end == nil && lr.endAfter == nil:
					lr.endAfter = &runEnd{status: Status(r.Status), at: time.Unix(0, r.Ended), result: append([]byte(nil), r.Result...), head: r.Head, stored: bytes.Clone(r.Stored)}
				}
			}
			continue
		}
		where := func(run string, seq uint64, reason string) error {
			return &CorruptionError{File: db.segmentFile(r.Pos.Segment), Offset: r.Pos.Offset, Run: run, Seq: seq, Reason: reason}
		}
		orphan := func(err error) error {
			if !trimmed {
				return err
			}
			if _, seen := orphans[r.Run]; !seen {
				orphans[r.Run] = err
			}
			return nil
		}
		switch r.Kind {
		case record.KindRun:
			if _, dup := runs[r.Run]; !dup {
				// h(0), which a run without atoms has as its head (and
				// CHECKPOINT lists it with).
				g := db.hasher.Genesis(r.Run, r.Nonce)
				runs[r.Run] = &logRun{nonce: r.Nonce, created: r.Created, head: g, head0: g}
			}
		case record.KindFork:
			if _, dup := runs[r.Run]; !dup {
				if runs[r.Parent] == nil {
					if err := orphan(where(r.Run, r.Seq, fmt.Sprintf("forked from run %q, whose creation record is not before it", r.Parent))); err != nil {
						return nil, nil, err
					}
					continue
				}
				g := db.hasher.ForkGenesis(r.Run, r.Nonce, r.Parent, r.Seq, r.ParentHead)
				runs[r.Run] = &logRun{nonce: r.Nonce, created: r.Created, last: r.Seq, base: r.Seq, parent: r.Parent, parentHead: r.ParentHead,
					head: g, head0: g}
			}
		case record.KindAtom:
			lr := runs[r.Run]
			switch {
			case lr == nil:
				if err := orphan(where(r.Run, r.Seq, "atom of a run whose creation record is not in the log")); err != nil {
					return nil, nil, err
				}
				continue
			case r.Seq <= lr.last:
				continue
			case r.Seq != lr.last+1:
				return nil, nil, where(r.Run, lr.last+1, fmt.Sprintf("seq %d follows seq %d: the atoms between them are missing", r.Seq, lr.last))
			}
			if lr.end != nil {
				return nil, nil, where(r.Run, r.Seq, "atom after the run ended")
			}
			lr.last, lr.head = r.Seq, r.Head
			lr.pos = append(lr.pos, r.Pos)
		case record.KindEnd:
			lr := runs[r.Run]
			switch {
			case lr == nil:
				if err := orphan(where(r.Run, r.Seq, "end of a run whose creation record is not in the log")); err != nil {
					return nil, nil, err
				}
				continue
			case lr.end != nil:
				return nil, nil, where(r.Run, r.Seq, "the run ends a second time")
			case r.Seq != lr.last+1:
				return nil, nil, where(r.Run, r.Seq, fmt.Sprintf("the end at seq %d does not follow the run's last atom %d", r.Seq, lr.last))
			}
			lr.end = &runEnd{status: Status(r.Status), at: time.Unix(0, r.Ended), result: append([]byte(nil), r.Result...), head: r.Head, stored: bytes.Clone(r.Stored)}
		case record.KindDelete, record.KindErase:
			d := deletionOf(r)
			if lr := runs[r.Run]; lr != nil {
				if lr.end == nil || r.Seq != lr.last+2 || r.Final != lr.end.head {
					return nil, nil, where(r.Run, r.Seq, "the deletion does not follow the run's end")
				}
				d.parent = lr.parent
				delete(runs, r.Run)
			}
			m, why := mergeDeletion(r.Run, deleted[r.Run], d)
			if why != "" {
				return nil, nil, where(r.Run, r.Seq, why)
			}
			deleted[r.Run] = m
		}
	}
	if err := c.Err(); err != nil {
		return nil, nil, err
	}
	if err := firstOrphan(orphans, func(run string) bool { return deleted[run] != nil }); err != nil {
		return nil, nil, err
	}
	return runs, deleted, nil
}

// reconcileLocked makes the runs agree with the log's (see the file's
// comment) and describes what differed. A run already in use whose state
// came from a wrong row is rebuilt from the log if no atom is running and
// it has not moved since Open; otherwise it is marked broken (its calls
// fail with the reason; the next Open replays from a CHECKPOINT that lists
// it right).
func (db *DB) reconcileLocked(rows []layout.CheckpointRun, log map[string]*logRun) string {
	var diffs []string
	listed := make(map[string]bool, len(rows))
	for i := range rows {
		c := &rows[i]
		listed[c.ID] = true
		lr := log[c.ID]
		if lr == nil && db.deletedLocked(c.ID) {
			// Deleted (or erased) at or after the replay position: the
			// replay withdrew the run, the row is merely older. (Dropping
			// the row as a mismatch would count it out of the lazy rows a
			// second time when the replay built it.)
			continue
		}
		why := ""
		switch {
		case lr == nil:
			why = fmt.Sprintf("run %q is not in the log", c.ID)
		case lr.nonce != c.Nonce:
			why = fmt.Sprintf("run %q has another nonce in the log", c.ID)
		case lr.created != c.Created:
			why = fmt.Sprintf("run %q has another creation time in the log", c.ID)
		case lr.parent != c.Parent || lr.parent != "" && (lr.base != c.ForkedAt || lr.head0 != c.BaseHead):
			why = fmt.Sprintf("run %q: the log and CHECKPOINT disagree on what it was forked from", c.ID)
		case !lr.listedRight(c):
			why = fmt.Sprintf("run %q is at seq %d in the log (%d more after the replay position), CHECKPOINT says %d, or they disagree on its head or end",
				c.ID, lr.last, len(lr.after), c.LastSeq)
		default:
			continue
		}
		diffs = append(diffs, why)
		err := &CorruptionError{File: db.path(layout.CheckpointName), Run: c.ID, Reason: why + "; reopen the store"}
		r, built := db.mu.runs[c.ID]
		switch {
		case !built:
			db.dropLazyLocked(c.ID)
			if lr != nil {
				db.mu.runs[c.ID] = db.runFromLog(c.ID, lr)
			}
		case lr == nil:
			r.mu.Lock()
			r.mu.broken = err
			r.mu.Unlock()
			delete(db.mu.runs, c.ID)
		default:
			r.mu.Lock()
			// A run that moved since Open (an atom, an end in the tail or
			// since) is not rebuilt under its user: it is marked broken.
			if r.mu.atom != nil || r.mu.br != nil || r.mu.ending || r.mu.lastSeq != c.LastSeq || len(r.mu.pending) > 0 || r.nonce != lr.nonce ||
				(r.mu.end != nil) != (lr.end != nil) || r.parent != lr.parent || r.base != lr.base {
				r.mu.broken = err
			} else {
				r.resetFromLogLocked(lr)
			}
			r.mu.Unlock()
		}
	}
	for id, lr := range log {
		if listed[id] || db.deletedLocked(id) {
			continue
		}
		if _, ok := db.mu.runs[id]; ok {
			continue // created again in the tail: the replay refused that
		}
		diffs = append(diffs, fmt.Sprintf("run %q is in the log, not in CHECKPOINT", id))
		db.mu.runs[id] = db.runFromLog(id, lr)
	}
	if len(diffs) > 0 {
		// A fork built from a row may point at a run the reconciliation
		// replaced or added (its parent's row was wrong or missing): point
		// it at the run the table now holds.
		for _, r := range db.mu.runs {
			if r.parent != "" {
				if p := db.mu.runs[r.parent]; p != nil && p != r.parentRef.Load() {
					r.parentRef.Store(p)
				}
			}
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 8 {
		diffs = append(diffs[:8], fmt.Sprintf("and %d more", len(diffs)-8))
	}
	return strings.Join(diffs, "; ")
}

// dropLazyLocked removes the not yet built row id from the lazy table.
func (db *DB) dropLazyLocked(id string) {
	if db.mu.dropped == nil {
		db.mu.dropped = map[string]bool{}
	}
	if !db.mu.dropped[id] && db.mu.lazyLeft > 0 {
		db.mu.dropped[id] = true
		if db.mu.lazyLeft--; db.mu.lazyLeft == 0 {
			db.mu.lazy = nil
		}
	}
}

// runFromLog builds a run from what the log holds of it: its frame is
// rebuilt from the log on first use, StateAt reads the atoms' positions.
func (db *DB) runFromLog(id string, lr *logRun) *Run {
	r := &Run{db: db, id: id, nonce: lr.nonce, createdAt: time.Unix(0, lr.created)}
	if lr.parent != "" {
		r = newForkRun(db, id, lr.nonce, time.Unix(0, lr.created), lr.parent, db.runLocked(lr.parent), lr.base, lr.parentHead)
	}
	now := time.Now()
	r.mu.snapTime, r.mu.ckptTime = now, now
	r.resetFromLogLocked(lr)
	return r
}

// resetFromLogLocked sets r's state to the log's; r.nonce must be lr's.
func (r *Run) resetFromLogLocked(lr *logRun) {
	r.mu.frame, r.mu.pending = nil, nil
	switch {
	case lr.last == 0 && lr.parent == "":
		r.mu.frame = newFrame()
		r.mu.head = r.db.hasher.Genesis(r.id, lr.nonce)
	default:
		r.mu.head = lr.head // a fork's genesis when it has no atom yet
	}
	r.mu.lastSeq, r.mu.ckptRowHead = lr.last, r.mu.head
	r.mu.frameSeq, r.mu.frameHead = 0, chain.Hash{}
	r.mu.frameSumSeq = 0
	r.mu.indexedSeq, r.mu.positions = r.base, append([]wal.Pos(nil), lr.pos...)
	r.mu.snapSeq, r.mu.windowFirst = r.base, r.base
	r.mu.inflight, r.mu.interruptedSeq = nil, 0
	r.mu.end = lr.end
}
