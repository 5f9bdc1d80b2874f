package engine

// The snapshot store's Host (internal/snapindex) and Close's choice of
// creating it (docs/DESIGN.md, "Write path").

import (
	"context"

	"github.com/continuumdb/continuum/internal/snapindex"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// snapshotMemTable is Pebble's memtable size (0: default); tests shrink it.
var snapshotMemTable uint64

// snapshotsOnNeed is false only in BenchmarkNewStore's baseline.
var snapshotsOnNeed = true

// startSnapIndex creates the snapshot store's Keeper, once Open's recovery
// has succeeded.
func (db *DB) startSnapIndex() {
	db.snaps = snapindex.New(snapindex.Config{FS: db.fs, Dir: db.dir, NoSync: db.opts.NoSync, Logger: db.logger,
		MemTableSize: snapshotMemTable, OnNeed: snapshotsOnNeed, CheckpointGen: db.openGen, Closed: ErrClosed}, bgCore{db})
}

func (h bgCore) ResetIndexed() map[string]uint64 {
	want := map[string]uint64{}
	for _, r := range h.db.runList() {
		r.mu.Lock()
		r.mu.book.SnapSeq = 0
		want[r.id] = r.mu.book.IndexedSeq
		r.mu.Unlock()
	}
	return want
}

func (h bgCore) Cursor(dec *record.Decoder) (*record.Cursor, error) {
	return record.NewCursor(h.db.log, h.db.segmentFile, wal.Pos{}, dec)
}

func (h bgCore) Stopping() <-chan struct{} { return h.db.bg.stop }
func (h bgCore) Unclean()                  { h.db.unclean.Store(true) }

// snapshots waits for Pebble and returns it (snapindex.Keeper.Get).
func (db *DB) snapshots(ctx context.Context) (*snapshot.Store, error) { return db.snaps.Get(ctx) }

// usableSnapshots is snapindex.Keeper.Usable: nil if there is none to use.
func (db *DB) usableSnapshots(ctx context.Context) (*snapshot.Store, error) {
	return db.snaps.Usable(ctx)
}

// closeSnapshots closes Pebble if it was opened; it is never opened after.
func (db *DB) closeSnapshots() error {
	if db.snaps == nil {
		return nil // Open failed before the Keeper existed
	}
	return db.snaps.Close()
}

// skipAbsentSnapshots lets Close's checkpoint skip an absent snapshot
// store (Keeper.SkipAbsent) unless a first checkpoint leaves
// tailRunsForStore runs or more to their tails.
func (db *DB) skipAbsentSnapshots() {
	db.snaps.SkipAbsent(func() bool { return db.openGen == 0 && bgCore{db}.CloseTails() })
}

// tailRunsForStore: see skipAbsentSnapshots; a test sets it.
var tailRunsForStore = 64
