package engine

// Retention, part two: garbage collection, conducted. Package retention
// holds the logic (what is dead, the plan, the steps and their crash
// safety, compaction in place: internal/retention/doc.go); this file is
// the public API (GC, GCStats) and gcCore, the retention.Core the
// collection runs over, on the background goroutine that owns the engine
// checkpoints.

import (
	"context"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// GCStats is what one garbage collection did.
type GCStats struct {
	Segments int    // segment files removed (the dead prefix)
	Bytes    int64  // their size: the disk space reclaimed by removal
	Floor    uint64 // the first segment the log now keeps
	// Compacted segments were rewritten with their live records only
	// (internal/retention), Emptied of them were wholly dead (a stub is left), and
	// CompactedBytes is the disk space that reclaimed.
	Compacted      int
	Emptied        int
	CompactedBytes int64
	Scanned        int64         // bytes of records read to find the dead ones
	Forgotten      int           // ledger fingerprints of deleted runs forgotten
	Duration       time.Duration // wall time
}

// GC reclaims the space of dead records (see the file's comment: the
// records of deleted runs, superseded store heads) by removing the dead
// prefix of the log, and returns what it removed. It runs beside
// commits, which never wait for it; Deletes wait for it, and snapshots
// and engine checkpoints run after it. A failure leaves the store as a
// crash at that point would: nothing live is touched. After the
// collection it sweeps the blobs no remaining record references
// (SweepBlobs, engine/blobs.go).
func (db *DB) GC(ctx context.Context) (GCStats, error) {
	if err := db.checkOpen(); err != nil {
		return GCStats{}, err
	}
	st, err := db.gc.Request(ctx, db.bg.stop, ErrClosed)
	if err == nil {
		_, _, err = db.SweepBlobs(ctx)
	}
	return GCStats(st), err
}

// gcEnv is what the collection reads the log and writes RETENTION with.
func (db *DB) gcEnv() retention.Env {
	return retention.Env{Log: db.log, File: db.segmentFile, Decoder: func() *record.Decoder { return db.decoder(true) },
		FS: db.fs, Dir: db.dir, StoreID: db.storeID, NoSync: db.opts.NoSync, CompactDead: db.opts.CompactDead, Logger: db.logger}
}

// gcCore is the retention.Core of a DB (internal/retention/doc.go says
// what each method promises). Its methods run on the background
// goroutine.
type gcCore struct{ db *DB }

var _ retention.Core = gcCore{}

func (c gcCore) Ready(ctx context.Context) error {
	if err := c.db.logFailed(); err != nil {
		return fmt.Errorf("the log failed earlier; reopen the store: %w", err)
	}
	if err := c.db.waitLedger(ctx); err != nil {
		return err
	}
	return c.db.checkRegistry()
}

func (c gcCore) Checkpoint() (wal.Pos, error) {
	err := c.db.checkpoint(false)
	return c.db.bg.replay, err
}

func (c gcCore) StoreHead() (bool, error) {
	live := c.db.runList()
	headAfter := false
	for _, r := range live {
		r.mu.Lock()
		headAfter = headAfter || r.mu.ckptSeq > 0
		r.mu.Unlock()
	}
	if !headAfter {
		return false, nil
	}
	return true, c.db.writeStoreHead(live, true)
}

func (c gcCore) Deleted() map[string]bool {
	c.db.mu.Lock()
	defer c.db.mu.Unlock()
	return c.db.mu.deleted.Durable()
}

func (c gcCore) DropDerived(ctx context.Context, runs map[string]bool) error {
	c.db.removeDeletedFrames(runs)
	return c.db.dropDeletedSnapshots(ctx, runs)
}

func (c gcCore) Forget(fps []ledger.Fingerprint) int { return c.db.ledger.Forget(fps) }

func (c gcCore) Closed() error { return c.db.checkOpen() }

// removeDeletedFrames removes the frame files of deleted runs (derived:
// nothing reads them; a failure is logged: retention.RemoveFrames).
func (db *DB) removeDeletedFrames(deleted map[string]bool) {
	if retention.RemoveFrames(db.fs, db.path(layout.FramesDir), deleted, db.frameFileName, db.opts.NoSync, db.logger) {
		db.unclean.Store(true)
	}
}

// dropDeletedSnapshots deletes the snapshots of deleted runs from the
// snapshot store (retention.DropSnapshots). A snapshot store that is not
// usable is left alone.
func (db *DB) dropDeletedSnapshots(ctx context.Context, deleted map[string]bool) error {
	if !db.snapshotsExist() {
		return nil // never created: no snapshot to delete (and none is created for it)
	}
	snaps, err := db.usableSnapshots(ctx)
	if err != nil || snaps == nil {
		return nil // the store failed or is absent: its own error says so (Stats)
	}
	return retention.DropSnapshots(snaps, deleted, db.opts.NoSync)
}

// logTrimmed reports whether garbage collection removed records from the
// log (retention.Trimmed).
func (db *DB) logTrimmed() bool { return retention.Trimmed(db.log) }

// orphan returns err, the damage of a record of run whose creation record
// is not in the log, or notes it for checkOrphans when the log was
// trimmed (retention.GC.Orphan).
func (db *DB) orphan(run string, err error) error { return db.gc.Orphan(db.logTrimmed(), run, err) }

// checkOrphans returns the damage of the first orphan record (by run id)
// of a run the log does not delete.
func (db *DB) checkOrphans() error { return db.gc.CheckOrphans(db.deletedLocked) }

// removeLeftovers removes the temporary files of the store's directory,
// frames/ and dicts/, and, when Open found a valid CHECKPOINT (cp), the
// ledger tables other than the one it names (retention.RemoveLeftovers).
func (db *DB) removeLeftovers(cp *layout.Checkpoint) (int, error) {
	var keep *uint64
	if cp != nil {
		keep = &cp.LedgerGen
	}
	return retention.RemoveLeftovers(db.fs, db.dir, []string{db.path(layout.FramesDir), db.path(layout.DictsDir)}, keep)
}
