package engine

// Garbage collection (docs/DESIGN.md, "Retention"): internal/retention's,
// over gcCore, the one adapter of retention and erasure.

import (
	"context"
	"time"

	erasing "github.com/continuumdb/continuum/internal/erasure"
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

// gcEnv is what the collection reads the log and writes RETENTION with,
// and what it removes the derived files of deleted runs with.
func (db *DB) gcEnv() retention.Env {
	return retention.Env{Log: db.log, File: db.segmentFile, Decoder: func() *record.Decoder { return db.decoder(true) },
		FS: db.fs, Dir: db.dir, StoreID: db.storeID, NoSync: db.opts.NoSync, CompactDead: db.opts.CompactDead, Logger: db.logger,
		Sealed: func() *record.Decoder { return db.decoder(false) }, Frames: db.path(layout.FramesDir),
		FrameFile: db.frameFileName, Snaps: db.snaps, Unclean: &db.unclean}
}

// gcCore is the DB as the one core of retention and erasure: retention's
// Core and Runs, erasure's Store, Runs (and Resumer), Finisher and KeyRuns
// (their doc.go). The derived files and the log's ledger records are
// retention.GC's (over gcEnv).
type gcCore struct{ *DB }

var (
	_ retention.Core   = gcCore{}
	_ erasing.Store    = gcCore{}
	_ erasing.Runs     = gcCore{}
	_ erasing.Finisher = gcCore{}
	_ erasing.KeyRuns  = gcCore{}
)

func (c gcCore) LogFailed() error                     { return c.logFailed() }
func (c gcCore) WaitLedger(ctx context.Context) error { return c.waitLedger(ctx) }
func (c gcCore) CheckRegistry() error                 { return c.checkRegistry() }
func (c gcCore) StartDirSyncs()                       { c.startDirSyncs() }

func (c gcCore) Checkpoint() (wal.Pos, error) {
	err := c.checkpoint(false)
	return c.bg.replay, err
}

func (c gcCore) StoreHead() (bool, error) { return c.writeStoreHead(c.runList(), true) }

func (c gcCore) Deleted() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.deleted.Durable()
}

func (c gcCore) Erased() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.deleted.Erased()
}

func (c gcCore) Deletion(run string) *retention.Gone {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, _ := c.mu.deleted.Get(run)
	return d
}

func (c gcCore) DropDerived(ctx context.Context, runs map[string]bool) error {
	return c.gc.DropDerived(ctx, runs)
}

func (c gcCore) LedgerRecords() (*record.Cursor, func(sealed, into *record.Record) error, error) {
	return c.gc.LedgerRecords()
}

func (c gcCore) Forget(fps []ledger.Fingerprint) int          { return c.ledger.Forget(fps) }
func (c gcCore) Closed() error                                { return c.checkOpen() }
func (c gcCore) Lock()                                        { c.gc.Lock() }
func (c gcCore) Unlock()                                      { c.gc.Unlock() }
func (c gcCore) Finish(ctx context.Context, run string) error { return c.eraser.Finish(ctx, c, run) }
func (c gcCore) Keys() erasing.Keys                           { return c.keys }
func (c gcCore) Sealer() *record.Sealer                       { return c.sealer }

func (c gcCore) Signing() retention.Signing {
	return retention.Signing{Hasher: c.hasher, StoreID: c.StoreID(), Signer: c.signer}
}

// logTrimmed reports whether garbage collection removed records from the
// log (retention.Trimmed).
func (db *DB) logTrimmed() bool { return retention.Trimmed(db.log) }

// removeLeftovers is retention.RemoveLeftovers, keeping cp's ledger table.
func (db *DB) removeLeftovers(cp *layout.Checkpoint) (int, error) {
	return retention.RemoveLeftovers(db.fs, db.dir, []string{db.path(layout.FramesDir), db.path(layout.DictsDir)}, cp)
}
