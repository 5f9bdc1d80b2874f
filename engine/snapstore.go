package engine

// The snapshot store's lifecycle: Pebble is created on first need and
// opens in the background, is checked against CHECKPOINT's generation,
// and is rebuilt from the log when it is damaged or older than the
// checkpoint.
//
// The store is derived: the log holds everything in it. So no failure of it
// stops the engine. If it cannot be opened (or rebuilt), or fails while in
// use, snapshots stop, StateAt is served from the log (snapread.go),
// commits go on, Stats.SnapshotStore says why, and:
//   - a store that failed a write is kept: what is on disk is a state
//     Pebble's recovery opens (package snapshot's fence), older than the
//     CHECKPOINT that Close still writes, so the next Open re-indexes the
//     log into it;
//   - a store found damaged (by Pebble, or by the engine's checks against
//     the log) is moved aside by Close, and the next Open builds a new one;
//   - one that fails to open is moved aside at once and rebuilt, unless the
//     failure is I/O (an errno, a failed write) or a newer format: those are
//     reported and left, and the next Open tries again.
// One moved-aside copy is kept, for inspection (snapshots.broken-<time>);
// moving another aside removes the older one, so that repeated failures do
// not fill the disk.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// metaCheckpointGen is the snapshot store's metadata key holding the
// generation of the last engine checkpoint it took part in (layout's
// format.go describes it).
const metaCheckpointGen = "engine/checkpoint-gen"

func (db *DB) openSnapshots() {
	defer close(db.snapReady)
	dir := db.path(layout.SnapshotsDir)
	created := !db.snapshotsExist()
	s, err := db.openSnapshotStore(dir)
	if err == nil {
		if err = db.checkSnapshotGen(s, created); err != nil {
			s.Close()
		}
	}
	if err != nil && rebuildable(err) {
		// Pebble holds only what the log can rebuild: snapshots and the atom
		// index. Keep the damaged directory for inspection, start a fresh
		// one and re-index the log into it. (A rebuilt store is of the
		// checkpoint's generation: reindex records it.)
		db.logger.Error("engine: snapshots unreadable; rebuilding them from the log", "dir", dir, "err", err)
		s, err = db.rebuildSnapshots(dir, err)
	}
	if err != nil {
		db.snapErr = fmt.Errorf("engine: open snapshots: %w", err)
		db.unclean.Store(true)
		db.logger.Error("engine: snapshot store unavailable; snapshots stop and StateAt reads the log until the next Open", "err", err)
		return
	}
	db.snap = s
}

// snapshotLockWait is how long the engine waits for the snapshot store's
// lock when another holder has it: a verify --deep of a closed store, which
// holds it for the length of its check.
const snapshotLockWait = 5 * time.Second

// openSnapshotStore opens the snapshot store in dir, waiting up to
// snapshotLockWait for its lock.
// snapshotMemTable is Pebble's memtable size (0: snapshot's default); a
// test makes it small, so that Pebble flushes between the parts of a
// checkpoint's batch.
var snapshotMemTable uint64

func (db *DB) openSnapshotStore(dir string) (*snapshot.Store, error) {
	deadline := time.Now().Add(snapshotLockWait)
	for {
		s, err := snapshot.Open(dir, &snapshot.Options{FS: db.fs, Logger: db.logger, MemTableSize: snapshotMemTable})
		if err == nil || !layout.LockHeld(err) || time.Now().After(deadline) {
			return s, err
		}
		select {
		case <-db.bg.stop:
			return nil, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// rebuildable reports whether a snapshot store that failed to open with err
// is rebuilt from the log: it is damaged or missing, or Pebble refused its
// files for any other reason than I/O or a newer format.
func rebuildable(err error) bool {
	var ce *CorruptionError
	if errors.Is(err, snapshot.ErrCorrupt) || errors.As(err, &ce) {
		return true
	}
	if errors.Is(err, snapshot.ErrNewerFormat) || errors.Is(err, snapshot.ErrFailed) || errors.Is(err, ErrClosed) || layout.LockHeld(err) {
		return false
	}
	var errno syscall.Errno
	return !errors.As(err, &errno) || errors.Is(err, syscall.ENOENT)
}

// moveSnapshotsAside renames the snapshot store's directory dir to a
// snapshots.broken-<time> beside it, after removing any older such copy,
// and syncs the store directory.
func (db *DB) moveSnapshotsAside(dir string) (string, error) {
	if names, err := db.fs.List(db.dir); err == nil {
		for _, n := range names {
			if strings.HasPrefix(n, layout.SnapshotsDir+".broken-") {
				if err := db.fs.RemoveAll(db.path(n)); err != nil {
					db.unclean.Store(true)
					db.logger.Warn("engine: remove an old copy of the snapshot store", "dir", db.path(n), "err", err)
				}
			}
		}
	}
	aside := fmt.Sprintf("%s.broken-%d", dir, time.Now().UnixNano())
	if err := db.fs.Rename(dir, aside); err != nil {
		return "", err
	}
	if !db.opts.NoSync {
		if err := layout.SyncDir(db.fs, db.dir); err != nil {
			return "", err
		}
	}
	return aside, nil
}

// checkSnapshotGen re-indexes the log into s if s is older than the engine
// checkpoint Open started from. Every checkpoint that has a usable store
// commits its snapshot batch, synced, before it replaces CHECKPOINT, so an
// older store is one just created (created: the checkpoints so far went
// without one, as a store without snapshots does) or one that lost its
// contents: a crash after a rebuild moved the damaged store aside and
// created a new one, but before the re-index reached it, or a checkpoint
// written while the store was failed.
func (db *DB) checkSnapshotGen(s *snapshot.Store, created bool) error {
	if db.openGen == 0 {
		return nil // no checkpoint yet: nothing was indexed
	}
	gen, err := db.snapshotGen(s)
	if err != nil {
		return err
	}
	if gen >= db.openGen {
		return nil
	}
	if created {
		db.logger.Info("engine: snapshot store created on first need; indexing the log into it",
			"checkpoint_gen", db.openGen)
	} else {
		db.logger.Warn("engine: snapshot store is older than CHECKPOINT; re-indexing the log",
			"snapshot_gen", gen, "checkpoint_gen", db.openGen)
	}
	db.indexingSnapshots()
	<-db.recovered
	if db.recoverErr != nil {
		return db.recoverErr
	}
	return db.reindex(s)
}

// snapshotGen returns the engine checkpoint generation recorded in s (0 if
// none is).
func (db *DB) snapshotGen(s *snapshot.Store) (uint64, error) {
	v, err := s.Meta(metaCheckpointGen)
	if errors.Is(err, snapshot.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, record.Corruptf(db.path(layout.SnapshotsDir), "metadata %q holds %d bytes, want 8", metaCheckpointGen, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// putSnapshotGen records in b that it belongs to engine checkpoint gen.
func putSnapshotGen(b *snapshot.Batch, gen uint64) error {
	return b.PutMeta(metaCheckpointGen, binary.BigEndian.AppendUint64(nil, gen))
}

// rebuildSnapshots moves a Pebble directory that failed to open aside and
// rebuilds the atom index from the log into a new one. It waits for the
// recovery of Open, which it needs to know the runs.
func (db *DB) rebuildSnapshots(dir string, cause error) (*snapshot.Store, error) {
	db.indexingSnapshots()
	aside, err := db.moveSnapshotsAside(dir)
	if err != nil {
		return nil, fmt.Errorf("%w (and moving it aside failed: %v)", cause, err)
	}
	s, err := db.openSnapshotStore(dir)
	if err != nil {
		return nil, err
	}
	<-db.recovered
	if db.recoverErr != nil {
		s.Close()
		return nil, db.recoverErr
	}
	if err := db.reindex(s); err != nil {
		s.Close()
		return nil, err
	}
	db.logger.Warn("engine: snapshot store rebuilt from the log", "old", aside)
	return s, nil
}

// reindex writes the log position of every atom the runs had indexed into s,
// from one scan of the whole log. Snapshots come back with the next ones.
func (db *DB) reindex(s *snapshot.Store) error {
	want := map[string]uint64{} // run -> atoms indexed before the damage
	for _, r := range db.runList() {
		r.mu.Lock()
		r.mu.snapSeq = 0
		want[r.id] = r.mu.indexedSeq
		r.mu.Unlock()
	}
	pos := map[string][]snapshot.Pos{}
	dec := &record.Decoder{Skip: func(k record.Kind, _ []byte) bool { return k != record.KindAtom }}
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		return err
	}
	defer c.Close()
	for c.Next() {
		a := c.Record()
		if p := pos[a.Run]; a.Seq <= want[a.Run] && a.Seq == uint64(len(p))+1 {
			pos[a.Run] = append(p, a.Pos)
		}
	}
	if err := c.Err(); err != nil {
		return err
	}
	b := s.NewBatch()
	for run, p := range pos {
		if uint64(len(p)) != want[run] {
			return record.Corruptf(db.path(layout.WALDir), "run %q: the log holds %d of its %d indexed atoms", run, len(p), want[run])
		}
		if err := b.PutPositions(run, 1, p); err != nil {
			return err
		}
	}
	if err := putSnapshotGen(b, db.openGen); err != nil {
		return err
	}
	return b.Commit(!db.opts.NoSync)
}

// closeSnapshots closes Pebble if it was opened, waiting for an open in
// progress, and makes sure it is never opened afterwards.
func (db *DB) closeSnapshots() error {
	db.snapOnce.Do(func() {
		db.snapErr = ErrClosed
		close(db.snapReady)
	})
	<-db.snapReady
	if db.snap == nil {
		return nil
	}
	// Closing a failed store reports nothing (Stats.SnapshotStore did) and
	// returns within snapshot.CloseTimeout.
	err := db.snap.Close()
	if f := db.snap.Err(); errors.Is(f, snapshot.ErrCorrupt) {
		// Damaged: the next Open builds a new store from the log.
		dir := db.path(layout.SnapshotsDir)
		if aside, merr := db.moveSnapshotsAside(dir); merr != nil {
			db.unclean.Store(true)
			db.logger.Warn("engine: could not move the damaged snapshot store aside; the next Open re-checks it", "dir", dir, "err", merr)
		} else {
			db.logger.Warn("engine: damaged snapshot store moved aside; the next Open rebuilds it from the log", "old", aside)
		}
	}
	return err
}

// The snapshot store is created on first need, not with the store: by
// the first snapshot, StateAt or background engine checkpoint that asks
// for it (snapshots). The delayed start a moment after Open (startSnapshots)
// only opens one that exists, and Close's final checkpoint creates none
// (skipAbsentSnapshots): a store whose runs are short, or whose sessions
// are, never pays for Pebble's files and the two dozen fsyncs of its
// creation, which cost a new store's Close more than the rest of its
// checkpoint. Its positions and frames are in the log (and the frame
// files): the checkpoint that goes without the store's batch names a
// generation the store lacks, so the Open that later creates it re-indexes
// the log into it (checkSnapshotGen), as after any checkpoint written
// without a usable store.
//
// snapshotsOnNeed is false only in the benchmark that measures the
// earlier behaviour beside it (BenchmarkNewStore: Pebble created a moment
// after Open and by Close, whether needed or not).
var snapshotsOnNeed = true

// snapshotsExist reports whether the store has a snapshot store directory
// (a Stat that fails otherwise than "not there" counts as present: opening
// it then reports the error).
func (db *DB) snapshotsExist() bool {
	_, err := db.fs.Stat(db.path(layout.SnapshotsDir))
	return !layout.NotExist(err)
}

// startSnapshots starts opening Pebble, once, if the snapshot store
// exists; one that does not is created on first need (snapshots).
func (db *DB) startSnapshots() {
	if snapshotsOnNeed && !db.snapshotsExist() {
		return
	}
	db.openSnapshotsOnce()
}

// openSnapshotsOnce starts opening Pebble (creating the store if it has
// none), once.
func (db *DB) openSnapshotsOnce() {
	db.snapOnce.Do(func() {
		go db.openSnapshots()
	})
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
// Created before any checkpoint, it needs no re-index of the log
// (checkSnapshotGen); a store checkpointed before goes without it, as
// before, since creating it would re-index the whole log.
func (db *DB) skipAbsentSnapshots() {
	if !snapshotsOnNeed || db.snapshotsExist() {
		return
	}
	if db.openGen == 0 && db.tailRuns(tailRunsForStore) >= tailRunsForStore {
		db.openSnapshotsOnce()
		return
	}
	db.snapOnce.Do(func() {
		db.snapErr = ErrClosed
		close(db.snapReady)
	})
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

// errSnapshotsIndexing is what snapshots returns while the snapshot store
// is being re-indexed or rebuilt from the log.
var errSnapshotsIndexing = errors.New("engine: the snapshot store is being indexed from the log")

// indexingSnapshots records that the open in progress re-indexes or
// rebuilds the store: from then on snapshots stops waiting for it.
func (db *DB) indexingSnapshots() {
	db.snapIndexingOnce.Do(func() { close(db.snapIndexing) })
}

// snapshots waits for Pebble and returns it, opening it first (and
// creating the store if it has none) if nothing has yet. It does not wait
// for a re-index or a rebuild, which scans the whole log and takes every
// run's lock, while its caller may hold one (a fork's first Begin reads
// its parent's state under its own lock): it returns errSnapshotsIndexing,
// and the caller reads the log instead, as without a usable store.
func (db *DB) snapshots(ctx context.Context) (*snapshot.Store, error) {
	db.openSnapshotsOnce()
	select {
	case <-db.snapReady:
		return db.snap, db.snapErr
	case <-db.snapIndexing:
		select {
		case <-db.snapReady:
			return db.snap, db.snapErr
		default:
			return nil, errSnapshotsIndexing
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
