package engine

// The runs CHECKPOINT lists, checked against the log before a run is
// created (internal/registry: the scan and the reconciliation's
// decisions; here, the changes to the DB's runs).

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuumdb/continuum/internal/lifecycle"
	"github.com/continuumdb/continuum/internal/registry"
	"github.com/continuumdb/continuum/internal/wait"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// registryCheck is the one-time comparison of CHECKPOINT's runs with the
// log, set up by an Open from a CHECKPOINT.
type registryCheck struct {
	rows     []layout.CheckpointRun // CHECKPOINT's table, sorted by id (immutable)
	to       wal.Pos                // CHECKPOINT's replay position
	once     sync.Once
	checked  atomic.Bool // once has run
	err      error       // set inside once
	mismatch string      // the disagreements found; set inside once
	// waits is the log's side of the check of WAITS (wait.Check), filled
	// by the same read of the log; nil: WAITS is not the index's source.
	waits *wait.Check
	// waitsMismatch is how WAITS disagreed with the log (the index was
	// rebuilt from the log); set inside once, read once waitsDone.
	waitsMismatch string
	waitsDone     atomic.Bool // the check of WAITS ran (or had nothing to check)
}

// registryCheckHold (tests) is called by the background goroutine that
// runs the check a moment after Open, before it does: a test holds the
// check back by blocking in it, so that the calls it makes meet the
// window between Open and the check.
var registryCheckHold func(db *DB)

// checkRegistry runs the comparison once, without db.mu held.
func (db *DB) checkRegistry() error {
	rc := db.reg
	if rc == nil {
		return nil
	}
	rc.once.Do(func() {
		defer rc.waitsDone.Store(true)
		if db.waits.index(db).FromFile() {
			rc.waits = wait.NewCheck(rc.to)
		}
		runs, found, err := db.logRunsBefore(rc.to)
		if err != nil {
			rc.err = err
			return
		}
		db.mu.Lock()
		mismatch, why := registry.Settle(rc.rows, runs, found, &db.mu.deleted, regTable{db}, func(id, why string) error {
			return &CorruptionError{File: db.path(layout.CheckpointName), Run: id, Reason: why + "; reopen the store"}
		})
		db.mu.Unlock()
		if why != "" {
			rc.err = fmt.Errorf("%w: %s", ErrCorrupt, why)
			return
		}
		rc.mismatch = mismatch
		rc.checked.Store(true)
		db.eraser.HealStale(gcCore{db}, db.bg.stop) // erasures an older KEYS undid
		db.eraser.HealKeys(found.KeyErasures, db.logger, db.setBackgroundErr)
		if rc.mismatch != "" {
			db.logger.Warn("engine: CHECKPOINT's runs disagree with the log; the log's are used",
				"file", db.path(layout.CheckpointName), "disagreements", rc.mismatch)
		}
		if rc.waits != nil {
			rc.err = db.checkWaitsFile(rc, runs, found)
			rc.waits = nil // the log's copy of the waits: no longer needed
		}
	})
	return rc.err
}

// checkWaitsFile compares the index of waits' table (WAITS as Open
// loaded it) with the log's records of waits that the registry's read of
// the log gathered (rc.waits), for the runs the log says live
// (wait.Waits.CheckFile: on any disagreement, the index is rebuilt from
// the log); the disagreement is kept for Stats.
func (db *DB) checkWaitsFile(rc *registryCheck, runs map[string]*registry.Run, found *registry.Collector) error {
	diff, err := db.waits.of(db).CheckFile(rc.waits, rc.to, func(id string) (uint64, bool) {
		lr := runs[id]
		if lr == nil || lr.End != nil || lr.EndAfter != nil || found.Gone.Has(id) {
			return 0, false
		}
		return lr.Last + uint64(len(lr.After)), true
	})
	rc.waitsMismatch = diff
	return err
}

// waitsMismatch returns how WAITS disagreed with the log, once the check
// ran ("" if it agreed, or was not compared).
func (db *DB) waitsMismatch() string {
	if db.reg == nil || !db.reg.waitsDone.Load() {
		return ""
	}
	return db.reg.waitsMismatch
}

// registryUnchecked reports whether CHECKPOINT's runs are still to be
// checked against the log (checkRegistry has not run).
func (db *DB) registryUnchecked() bool { return db.reg != nil && !db.reg.checked.Load() }

// registryMismatch returns what checkRegistry found, once it ran.
func (db *DB) registryMismatch() string {
	if db.reg == nil || !db.reg.checked.Load() {
		return ""
	}
	return db.reg.mismatch
}

// logRunsBefore reads the run, atom, end and delete records of the log
// before to, and the erase-key records of the whole log (registry.Scan).
func (db *DB) logRunsBefore(to wal.Pos) (map[string]*registry.Run, *registry.Collector, error) {
	dec := db.decoder(false)
	wc := db.reg.waits
	src := db.waitsSource()
	dec.Skip = func(k record.Kind, raw []byte) bool {
		if k == record.KindStreamChunk || k == record.KindStreamAbandon {
			db.streams.Seen() // the log before the replay holds streams
		}
		if wc != nil && (k == record.KindWait || k == record.KindEvent || k == record.KindWake) {
			return false // for the check of WAITS, in the same read
		}
		return registry.Skip(k, raw)
	}
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: read the log's runs: %w", err)
	}
	defer c.Close()
	h := &registry.Collector{Stop: db.checkOpen}
	if wc != nil {
		h.Others = func(r *record.Record) error {
			payload, err := src.EventPayload(r)
			if err != nil {
				return err
			}
			wc.Add(r, payload)
			return nil
		}
	}
	runs, err := registry.Scan(c, to, db.hasher, db.segmentFile, db.logTrimmed(), h)
	return runs, h, err
}

// regTable is the reconciliation's registry.Table: db's runs, db.mu held.
type regTable struct{ db *DB }

func (t regTable) Deleted(id string) bool { return t.db.deletedLocked(id) }

func (t regTable) Built(id string) bool { return t.db.builtLocked(id) }

func (t regTable) Drop(id string) { t.db.mu.lazy.Drop(id) }

func (t regTable) Add(id string, lr *registry.Run) { t.db.mu.runs[id] = t.db.runFromLog(id, lr) }

func (t regTable) Fix(id string, c *layout.CheckpointRun, lr *registry.Run, err error) {
	r := t.db.mu.runs[id]
	r.mu.Lock()
	if lr == nil {
		r.mu.broken = err
		r.mu.Unlock()
		t.db.withdrawLocked(false, r)
		return
	}
	// A run that moved since Open (an atom, an end in the tail or since)
	// is not rebuilt under its user: it is marked broken.
	if r.mu.atom != nil || r.mu.br != nil || r.mu.ending || r.mu.lastSeq != c.LastSeq || len(r.mu.pending) > 0 || r.nonce != lr.Nonce ||
		(r.mu.end != nil) != (lr.End != nil) || r.parent != lr.Parent || r.base != lr.Base {
		r.mu.broken = err
	} else {
		r.setStateLocked(lr.State(), endFromLog(lr.End))
	}
	r.mu.Unlock()
}

func (t regTable) Relink() {
	for _, r := range t.db.mu.runs {
		if r.parent == "" {
			continue
		}
		if p := t.db.mu.runs[r.parent]; p != nil && p != r.parentRef.Load() {
			r.parentRef.Store(p)
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
	r.mu.book.Start(time.Now())
	r.setStateLocked(lr.State(), endFromLog(lr.End))
	return r
}

// endFromLog is the run's end e as the log holds it (nil: none).
func endFromLog(e *registry.End) *lifecycle.End {
	if e == nil {
		return nil
	}
	return &lifecycle.End{Status: e.Status, At: time.Unix(0, e.Ended), Result: e.Result, Head: e.Head, Stored: e.Stored}
}
