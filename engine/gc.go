package engine

// Garbage collection (docs/DESIGN.md, "Retention"): internal/retention's,
// over gcCore.

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
	// Compacted segments were rewritten with their live records only,
	// Emptied of them were wholly dead (a stub is left), and
	// CompactedBytes is the disk space that reclaimed.
	Compacted      int
	Emptied        int
	CompactedBytes int64
	Scanned        int64         // bytes of records read to find the dead ones
	Forgotten      int           // ledger fingerprints of deleted runs forgotten
	Duration       time.Duration // wall time
}

// GC reclaims the space of dead records, then sweeps the blobs
// (SweepBlobs); Commits go on beside it (docs/DESIGN.md, "Retention").
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

// gcCore is the DB as retention.Core and erasure.Finisher (their doc.go).
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

// DropDerived removes runs' frame files and snapshots, if there is a
// usable snapshot store.
func (c gcCore) DropDerived(ctx context.Context, runs map[string]bool) error {
	db := c.db
	if retention.RemoveFrames(db.fs, db.path(layout.FramesDir), runs, db.frameFileName, db.opts.NoSync, db.logger) {
		db.unclean.Store(true)
	}
	if !db.snaps.Exists() {
		return nil // never created: no snapshot to delete (and none is created for it)
	}
	if snaps, err := db.snaps.Usable(ctx); err == nil && snaps != nil {
		return retention.DropSnapshots(snaps, runs, db.opts.NoSync)
	}
	return nil
}

func (c gcCore) Forget(fps []ledger.Fingerprint) int { return c.db.ledger.Forget(fps) }

func (c gcCore) Closed() error { return c.db.checkOpen() }

func (c gcCore) LedgerRecords() (*record.Cursor, func(sealed, into *record.Record) error, error) {
	db := c.db
	cheap := db.decoder(false) // leaves the ledger's records sealed
	cheap.Skip = func(k record.Kind, _ []byte) bool { return k != record.KindIntent && k != record.KindCert }
	full := db.decoder(true)
	cur, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, cheap)
	return cur, func(sealed, r *record.Record) error {
		return full.Decode(sealed.Raw, sealed.Pos, db.segmentFile(sealed.Pos.Segment), r)
	}, err
}

// logTrimmed reports whether garbage collection removed records from the
// log (retention.Trimmed).
func (db *DB) logTrimmed() bool { return retention.Trimmed(db.log) }

// orphan is retention.GC.Orphan.
func (db *DB) orphan(run string, err error) error { return db.gc.Orphan(db.logTrimmed(), run, err) }

// checkOrphans is retention.GC.CheckOrphans.
func (db *DB) checkOrphans() error { return db.gc.CheckOrphans(db.deletedLocked) }

// removeLeftovers is retention.RemoveLeftovers, keeping cp's ledger table.
func (db *DB) removeLeftovers(cp *layout.Checkpoint) (int, error) {
	var keep *uint64
	if cp != nil {
		keep = &cp.LedgerGen
	}
	return retention.RemoveLeftovers(db.fs, db.dir, []string{db.path(layout.FramesDir), db.path(layout.DictsDir)}, keep)
}
