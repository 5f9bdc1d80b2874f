package engine

// The runs CHECKPOINT lists, checked against the log before a run is
// created (internal/registry: the scan and the reconciliation's
// decisions; here, the changes to the DB's runs).

import (
	"fmt"
	"time"

	"github.com/continuumdb/continuum/internal/lifecycle"
	"github.com/continuumdb/continuum/internal/registry"
	"github.com/continuumdb/continuum/internal/wait"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// registryCheckHold (tests) is called by the background goroutine that
// runs the check a moment after Open, before it does: a test holds the
// check back by blocking in it, so that the calls it makes meet the
// window between Open and the check.
var registryCheckHold func(db *DB)

// checkRegistry runs the comparison once (registry.Check.Run), without
// db.mu held.
func (db *DB) checkRegistry() error { return db.reg.Run(regCheck{db}) }

// regCheck is the registry check's registry.Engine: db.
type regCheck struct{ db *DB }

func (c regCheck) WaitsFromFile() bool { return c.db.waits.Index().FromFile() }

func (c regCheck) ReadLog(to wal.Pos, waits *wait.Check) (map[string]*registry.Run, *registry.Collector, error) {
	return c.db.logRunsBefore(to, waits)
}

func (c regCheck) Settle(rows []layout.CheckpointRun, runs map[string]*registry.Run, found *registry.Collector) (mismatch, why string) {
	db := c.db
	db.mu.Lock()
	defer db.mu.Unlock()
	return registry.Settle(rows, runs, found, &db.mu.deleted, regTable{db}, func(id, why string) error {
		return &CorruptionError{File: db.path(layout.CheckpointName), Run: id, Reason: why + "; reopen the store"}
	})
}

func (c regCheck) Corrupt(why string) error { return fmt.Errorf("%w: %s", ErrCorrupt, why) }

func (c regCheck) Heal(found *registry.Collector) {
	c.db.eraser.HealStale(gcCore{c.db}, c.db.bg.stop) // erasures an older KEYS undid
	c.db.eraser.HealKeys(found.KeyErasures, c.db.logger, c.db.setBackgroundErr)
}

func (c regCheck) Disagreed(mismatch string) {
	c.db.logger.Warn("engine: CHECKPOINT's runs disagree with the log; the log's are used",
		"file", c.db.path(layout.CheckpointName), "disagreements", mismatch)
}

// CheckWaits: on any disagreement, the index of waits is rebuilt from
// the log (wait.Waits.CheckFile); the disagreement is kept for Stats.
func (c regCheck) CheckWaits(waits *wait.Check, to wal.Pos, live wait.Live) (string, error) {
	return c.db.waits.CheckFile(waits, to, live)
}

// waitsMismatch returns how WAITS disagreed with the log, once the check
// ran ("" if it agreed, or was not compared).
func (db *DB) waitsMismatch() string { return db.reg.WaitsMismatch() }

// registryUnchecked reports whether CHECKPOINT's runs are still to be
// checked against the log (checkRegistry has not run).
func (db *DB) registryUnchecked() bool { return db.reg.Unchecked() }

// registryMismatch returns what checkRegistry found, once it ran.
func (db *DB) registryMismatch() string { return db.reg.Mismatch() }

// logRunsBefore reads the run, atom, end and delete records of the log
// before to, and the erase-key records of the whole log (registry.Scan);
// wc, if not nil, is handed the log's records of waits.
func (db *DB) logRunsBefore(to wal.Pos, wc *wait.Check) (map[string]*registry.Run, *registry.Collector, error) {
	dec := db.decoder(false)
	dec.Skip = registry.SkipFor(wc != nil, db.streams.Seen) // streams.go: the log before the replay holds streams
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: read the log's runs: %w", err)
	}
	defer c.Close()
	h := &registry.Collector{Stop: db.checkOpen}
	if wc != nil {
		h.Others = registry.AddWaits(wc, db.waitsSource().EventPayload)
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
