package engine

// The snapshot store's lifecycle (created on first need, opened in the
// background, checked against CHECKPOINT's generation, re-indexed or
// rebuilt from the log, moved aside when damaged) is package
// internal/snapindex's; this file is its hook: the Keeper's Host over the
// runs and the log, and Close's choice of creating the store for its
// final checkpoint.

import (
	"context"

	"github.com/continuumdb/continuum/internal/snapindex"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// snapshotMemTable is Pebble's memtable size (0: snapshot's default); a
// test makes it small, so that Pebble flushes between the parts of a
// checkpoint's batch.
var snapshotMemTable uint64

// snapshotsOnNeed is false only in the benchmark that measures the
// earlier behaviour beside it (BenchmarkNewStore: Pebble created a moment
// after Open and by Close, whether needed or not). The store is otherwise
// created by the first snapshot, StateAt or background engine checkpoint
// that asks for it: a store whose runs or sessions are short never pays
// for Pebble's files and the two dozen fsyncs of its creation.
var snapshotsOnNeed = true

// startSnapIndex creates the snapshot store's Keeper, once Open's recovery
// has succeeded.
func (db *DB) startSnapIndex() {
	db.snaps = snapindex.New(snapindex.Config{FS: db.fs, Dir: db.dir, NoSync: db.opts.NoSync, Logger: db.logger,
		MemTableSize: snapshotMemTable, OnNeed: snapshotsOnNeed, CheckpointGen: db.openGen, Closed: ErrClosed}, snapHost{db})
}

// snapHost is the Keeper's Host (internal/snapindex's doc).
type snapHost struct{ db *DB }

func (h snapHost) ResetIndexed() map[string]uint64 {
	want := map[string]uint64{}
	for _, r := range h.db.runList() {
		r.mu.Lock()
		r.mu.snapSeq = 0
		want[r.id] = r.mu.indexedSeq
		r.mu.Unlock()
	}
	return want
}

func (h snapHost) Cursor(dec *record.Decoder) (*record.Cursor, error) {
	return record.NewCursor(h.db.log, h.db.segmentFile, wal.Pos{}, dec)
}

func (h snapHost) Stopping() <-chan struct{} { return h.db.bg.stop }
func (h snapHost) Unclean()                  { h.db.unclean.Store(true) }

// snapshots waits for Pebble and returns it (snapindex.Keeper.Get).
func (db *DB) snapshots(ctx context.Context) (*snapshot.Store, error) { return db.snaps.Get(ctx) }

// usableSnapshots returns the snapshot store, or nil if there is none to
// use (snapindex.Keeper.Usable).
func (db *DB) usableSnapshots(ctx context.Context) (*snapshot.Store, error) {
	return db.snaps.Usable(ctx)
}

// snapshotsExist reports whether the store has a snapshot store directory.
func (db *DB) snapshotsExist() bool { return db.snaps.Exists() }

// closeSnapshots closes Pebble if it was opened, and makes sure it is
// never opened afterwards.
func (db *DB) closeSnapshots() error {
	if db.snaps == nil {
		return nil // Open failed before the Keeper existed
	}
	return db.snaps.Close()
}

// skipAbsentSnapshots, called by Close once the background work has
// stopped, settles the snapshot store as closed if nothing has started
// opening it and it does not exist: the final checkpoint then goes without
// its batch instead of creating the store.
//
// Unless many runs would be left to their tails (tailRunsForStore): a
// store with no checkpoint yet then gets its snapshot store created for
// the final checkpoint's batch, which holds their atoms' positions (the
// atom index), instead of a frame file for each of them (tailLocked).
// Created before any checkpoint, it needs no re-index of the log; a store
// checkpointed before goes without it, as before, since creating it would
// re-index the whole log.
func (db *DB) skipAbsentSnapshots() {
	db.snaps.SkipAbsent(func() bool { return db.openGen == 0 && db.tailRuns(tailRunsForStore) >= tailRunsForStore })
}

// tailRunsForStore is how many runs Close must have to leave to their
// tails to leave any (checkpoint), and to create the snapshot store for
// them (skipAbsentSnapshots): below it, writing their frame files costs
// a few milliseconds, less than creating Pebble (a few tens of
// milliseconds of files and fsyncs), and their first use after the next
// Open does not wait for Pebble to open.
var tailRunsForStore = 64 // a variable for the power-loss test of tails

// tailRuns counts, up to max, the runs Close would write a frame file
// for unless it leaves them to their tails (tailLocked): those it may
// leave so and a background checkpoint would not.
func (db *DB) tailRuns(max int) int {
	n := 0
	for _, r := range db.runList() {
		r.mu.Lock()
		if r.mu.gone == nil && r.tailLocked(true) && !r.tailLocked(false) {
			n++
		}
		r.mu.Unlock()
		if n >= max {
			break
		}
	}
	return n
}
