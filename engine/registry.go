package engine

// The runs CHECKPOINT lists, checked against the log before a run is
// created (internal/registry reads the log's runs; the reconciliation of
// the runs with them is here, since it changes the DB's runs).

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuumdb/continuum/chain"
	erasing "github.com/continuumdb/continuum/internal/erasure"
	"github.com/continuumdb/continuum/internal/registry"
	"github.com/continuumdb/continuum/internal/retention"
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

// checkRegistry runs the comparison once and returns its error. It must
// be called without db.mu held.
func (db *DB) checkRegistry() error {
	rc := db.reg
	if rc == nil {
		return nil
	}
	rc.once.Do(func() {
		var keyErasures []erasing.KeyErasure
		runs, deleted, err := db.logRunsBefore(rc.to, &keyErasures)
		if err != nil {
			rc.err = err
			return
		}
		db.mu.Lock()
		ids, gone := deleted.Sorted()
		for i, id := range ids {
			if why := db.mu.deleted.Merge(id, gone[i]); why != "" {
				db.mu.Unlock()
				rc.err = fmt.Errorf("%w: %s", ErrCorrupt, why)
				return
			}
		}
		rc.mismatch = db.reconcileLocked(rc.rows, runs)
		db.mu.Unlock()
		rc.checked.Store(true)
		db.healErasures() // erase.go
		db.eraser.HealKeys(keyErasures, db.logger, db.setBackgroundErr)
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
func (db *DB) logRunsBefore(to wal.Pos, keyErasures *[]erasing.KeyErasure) (map[string]*registry.Run, *retention.Registry, error) {
	dec := db.decoder(false)
	dec.Skip = func(k record.Kind, raw []byte) bool {
		if k == record.KindStreamChunk || k == record.KindStreamAbandon {
			db.streams.Seen() // the log before the replay holds streams
		}
		return registry.Skip(k, raw)
	}
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: read the log's runs: %w", err)
	}
	defer c.Close()
	h := &registryHost{db: db, keyErasures: keyErasures}
	runs, err := registry.Scan(c, to, db.hasher, db.segmentFile, db.logTrimmed(), h)
	if err != nil {
		return nil, nil, err
	}
	return runs, &h.deleted, nil
}

// registryHost is the log scan's Host: the deletions and key erasures it
// meets.
type registryHost struct {
	db          *DB
	deleted     retention.Registry
	keyErasures *[]erasing.KeyErasure
}

func (h *registryHost) Deleted(r *record.Record, parent string) string {
	d := retention.GoneOf(r)
	d.Parent = parent
	return h.deleted.Merge(r.Run, d)
}

func (h *registryHost) KeyErased(r *record.Record) {
	*h.keyErasures = append(*h.keyErasures, erasing.KeyErasureOf(r))
}

func (h *registryHost) IsDeleted(run string) bool { return h.deleted.Has(run) }

func (h *registryHost) Closed() error {
	if h.db.closed.Load() {
		return ErrClosed
	}
	return nil
}

// reconcileLocked makes the runs agree with the log's (see the file's
// comment) and describes what differed. A run already in use whose state
// came from a wrong row is rebuilt from the log if no atom is running and
// it has not moved since Open; otherwise it is marked broken (its calls
// fail with the reason; the next Open replays from a CHECKPOINT that lists
// it right).
func (db *DB) reconcileLocked(rows []layout.CheckpointRun, log map[string]*registry.Run) string {
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
		why := registry.Disagrees(c, lr)
		if why == "" {
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
			db.withdrawLocked(false, r)
		default:
			r.mu.Lock()
			// A run that moved since Open (an atom, an end in the tail or
			// since) is not rebuilt under its user: it is marked broken.
			if r.mu.atom != nil || r.mu.br != nil || r.mu.ending || r.mu.lastSeq != c.LastSeq || len(r.mu.pending) > 0 || r.nonce != lr.Nonce ||
				(r.mu.end != nil) != (lr.End != nil) || r.parent != lr.Parent || r.base != lr.Base {
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
func (db *DB) runFromLog(id string, lr *registry.Run) *Run {
	r := &Run{db: db, id: id, nonce: lr.Nonce, createdAt: time.Unix(0, lr.Created)}
	if lr.Parent != "" {
		r = newForkRun(db, id, lr.Nonce, time.Unix(0, lr.Created), lr.Parent, db.runLocked(lr.Parent), lr.Base, lr.ParentHead)
	}
	now := time.Now()
	r.mu.snapTime, r.mu.ckptTime = now, now
	r.resetFromLogLocked(lr)
	return r
}

// resetFromLogLocked sets r's state to the log's; r.nonce must be lr's.
func (r *Run) resetFromLogLocked(lr *registry.Run) {
	r.mu.frame, r.mu.pending = nil, nil
	switch {
	case lr.Last == 0 && lr.Parent == "":
		r.mu.frame = newFrame()
		r.mu.head = r.db.hasher.Genesis(r.id, lr.Nonce)
	default:
		r.mu.head = lr.Head // a fork's genesis when it has no atom yet
	}
	r.mu.lastSeq, r.mu.ckptRowHead = lr.Last, r.mu.head
	r.mu.frameSeq, r.mu.frameHead = 0, chain.Hash{}
	r.mu.frameSumSeq = 0
	r.mu.indexedSeq, r.mu.positions = r.base, append([]wal.Pos(nil), lr.Pos...)
	r.mu.snapSeq, r.mu.windowFirst = r.base, r.base
	r.mu.inflight, r.mu.interruptedSeq = nil, 0
	r.mu.end = endFromLog(lr.End)
}

// endFromLog is the run's end e as the log holds it (nil: none).
func endFromLog(e *registry.End) *runEnd {
	if e == nil {
		return nil
	}
	return &runEnd{status: Status(e.Status), at: time.Unix(0, e.Ended), result: e.Result, head: e.Head, stored: e.Stored}
}
