package engine

// Retention, part two: garbage collection. GC reclaims the log's space
// held by dead records:
//
//   - every record of a deleted run (its creation, atoms, fails, end,
//     chain checkpoints), once its delete record is durable, and its
//     intents and certificates of actions with the run's own default
//     keys (ledger.DefaultKey of the run, seq and index): no other run
//     can ever use those (a deleted id is never created again, and a run
//     with a fork is not deleted without it). An action with an explicit
//     key is live: another run may have repeated it, and that run's atom
//     names its certificate (the chain links the result's digest, a frame
//     may refer to the result);
//   - a store head that a later durable store head supersedes, or whose
//     runs are all deleted.
//
// Everything else is live: the records of the runs that are not deleted,
// and every delete record (forever: it is what lets verify tell a deletion
// by policy from tampering). GC works below CHECKPOINT's replay position
// only (so the replay never needs what it removes): it removes the
// segments before the first one that holds a live record (the dead
// prefix), and compacts every later segment there that is wholly dead or
// dead for at least Options.CompactDead of its bytes (compact.go: the
// segment is rewritten in place with its live records). Records are
// never moved: no log position changes, so neither the ledger table nor
// any run's atom index nor any other derived file needs rewriting.
//
// # Crash safety
//
// One collection, step by step (each step is durable before the next):
//
//  1. An engine checkpoint, then a store head waited for: CHECKPOINT's
//     replay position passes every delete record written so far, no row
//     lists a deleted run, and every store head before it is superseded.
//  2. The log before the replay position is read up to its first live
//     record; the segments before that one are the dead prefix.
//  3. The ledger forgets the fingerprints of the deleted runs' intents and
//     certificates in it (ledger.Ledger.Forget), and a second engine
//     checkpoint writes a ledger table without them.
//  4. RETENTION is written atomically with the new floor (the first
//     segment kept): from here a log that starts anywhere from segment 1
//     to the floor is whole.
//  5. The segments below the floor are removed and the log directory is
//     fsynced (wal.Log.RemoveBelow).
//  6. The segments planned for compaction are rewritten, each committed
//     by a rename (compact.go).
//
// A crash before 4 leaves the log as it was (with a CHECKPOINT and ledger
// table that are merely newer); a crash between 4 and 5 leaves dead
// segments below the floor, which Open accepts and the next collection
// removes; a crash in 6 leaves some segments not compacted yet, which the
// next collection compacts. No step touches a live record, so no crash loses anything of a
// live run.

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/continuumdb/continuum/chain"
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
	// (compact.go), Emptied of them were wholly dead (a stub is left), and
	// CompactedBytes is the disk space that reclaimed.
	Compacted      int
	Emptied        int
	CompactedBytes int64
	Scanned        int64         // bytes of records read to find the dead ones
	Forgotten      int           // ledger fingerprints of deleted runs forgotten
	Duration       time.Duration // wall time
}

// gcJob is a collection handed to the background goroutine, which owns
// the engine checkpoints it writes.
type gcJob struct {
	ctx  context.Context
	done chan gcResult
}

type gcResult struct {
	stats GCStats
	err   error
}

// GC reclaims the space of dead records (see the file's comment: the
// records of deleted runs, superseded store heads) by removing the dead
// prefix of the log, and returns what it removed. It runs beside
// commits, which never wait for it; Deletes wait for it, and snapshots
// and engine checkpoints run after it. A failure leaves the store as a
// crash at that point would: nothing live is touched.
func (db *DB) GC(ctx context.Context) (GCStats, error) {
	if err := db.checkOpen(); err != nil {
		return GCStats{}, err
	}
	job := &gcJob{ctx: ctx, done: make(chan gcResult, 1)}
	select {
	case db.bg.gcReq <- job:
	case <-db.bg.stop:
		return GCStats{}, ErrClosed
	case <-ctx.Done():
		return GCStats{}, ctx.Err()
	}
	select {
	case res := <-job.done:
		return res.stats, res.err
	case <-ctx.Done():
		// The collection goes on to a consistent end; its result is
		// dropped.
		return GCStats{}, ctx.Err()
	}
}

// collect is GC on the background goroutine.
func (db *DB) collect(ctx context.Context) (GCStats, error) {
	start := time.Now()
	st, err := db.collectSteps(ctx)
	st.Duration = time.Since(start)
	if err != nil {
		return st, fmt.Errorf("engine: gc: %w", err)
	}
	if st.Segments > 0 || st.Compacted > 0 {
		db.logger.Info("engine: gc: reclaimed dead segments", "segments", st.Segments, "bytes", st.Bytes,
			"compacted", st.Compacted, "emptied", st.Emptied, "compacted_bytes", st.CompactedBytes,
			"floor", st.Floor, "forgotten", st.Forgotten, "duration", st.Duration)
	}
	return st, nil
}

func (db *DB) collectSteps(ctx context.Context) (GCStats, error) {
	var st GCStats
	if err := db.logFailed(); err != nil {
		return st, fmt.Errorf("the log failed earlier; reopen the store: %w", err)
	}
	if err := db.waitLedger(ctx); err != nil {
		return st, err
	}
	if err := db.checkRegistry(); err != nil {
		return st, err
	}
	db.gcMu.Lock()
	defer db.gcMu.Unlock()
	ret, err := layout.ReadRetention(db.fs, db.dir, &db.storeID)
	if err != nil {
		return st, err
	}

	// 1. The replay position passes the delete records; a durable store
	// head after it supersedes every one before.
	if err := db.checkpoint(false); err != nil {
		return st, err
	}
	live := db.runList()
	headAfter := false
	for _, r := range live {
		r.mu.Lock()
		headAfter = headAfter || r.mu.ckptSeq > 0
		r.mu.Unlock()
	}
	if headAfter {
		if err := db.writeStoreHead(live, true); err != nil {
			return st, err
		}
	}
	floor := db.bg.replay
	db.mu.Lock()
	deleted := make(map[string]bool, len(db.mu.deleted))
	for id, d := range db.mu.deleted {
		if d != nil {
			deleted[id] = true
		}
	}
	db.mu.Unlock()
	// CHECKPOINT lists none of them now: their frame files and snapshots
	// are unused.
	db.removeDeletedFrames(deleted)
	if err := db.dropDeletedSnapshots(ctx, deleted); err != nil {
		return st, err
	}

	// 2. The dead records: the prefix, and the segments to compact.
	plan, err := db.planGC(ctx, floor, deleted, headAfter, db.opts.CompactDead)
	st.Scanned = plan.scanned
	if err != nil {
		return st, err
	}
	keep, fps := plan.keep, plan.fps
	segs := db.log.Segments()
	st.Floor = segs[0].ID
	counted := uint64(0) // segments below it are in RETENTION's totals already (a crash before their removal)
	if ret != nil {
		counted = ret.Floor
	}
	var bytes, newBytes int64
	n, newN := 0, 0
	for _, s := range segs {
		if s.ID < keep && s.Sealed {
			bytes += s.Size
			n++
			if s.ID >= counted {
				newBytes += s.Size
				newN++
			}
		}
	}
	if n == 0 && len(plan.compact) == 0 {
		return st, nil
	}

	// 3. The ledger forgets what goes, and its table on disk too.
	if len(fps) > 0 {
		st.Forgotten = db.ledger.Forget(fps)
		if err := db.checkpoint(false); err != nil {
			return st, err
		}
	}
	if n == 0 {
		return st, db.compactSegments(ctx, plan, deleted, headAfter, &st)
	}

	// 4. RETENTION explains the log's new first segment ...
	r := layout.Retention{StoreID: db.storeID, Floor: keep, Segments: uint64(newN), Bytes: uint64(newBytes), Updated: time.Now().UnixNano()}
	if ret != nil {
		r.Segments += ret.Segments
		r.Bytes += ret.Bytes
		r.Floor = max(r.Floor, ret.Floor)
	}
	if err := layout.WriteFileAtomic(db.fs, db.path(layout.RetentionName), r.Marshal(), db.opts.NoSync); err != nil {
		return st, err
	}
	// 5. ... before the segments go.
	removed, err := db.log.RemoveBelow(wal.Pos{Segment: keep})
	st.Segments, st.Bytes, st.Floor = removed, bytes, keep
	if err != nil {
		return st, err
	}
	// 6. Compaction (compact.go).
	return st, db.compactSegments(ctx, plan, deleted, headAfter, &st)
}

// deadRecord says whether r is dead: a record of a deleted run (of its
// ledger records, those of default-key actions), or a superseded store
// head (see the file's comment).
func (db *DB) deadRecord(r *record.Record, deleted map[string]bool, headAfter bool, explicit map[ledger.Fingerprint]bool) bool {
	switch r.Kind {
	case record.KindDelete, record.KindErase:
		return false
	case record.KindEraseKey:
		// Kept while its run has records; what it erased goes with them.
		return deleted[r.Run]
	case record.KindIntent, record.KindCert:
		if r.Erased {
			// Sealed with an erased run's key (the records of its
			// explicit-key actions are sealed with the store's).
			return deleted[r.Run]
		}
		if r.Kind == record.KindIntent {
			return deleted[r.Intent.RunID] && !explicit[r.Intent.Fingerprint]
		}
		return deleted[r.Cert.RunID] && !explicit[r.Cert.Fingerprint]
	case record.KindStoreHead:
		if headAfter {
			return true
		}
		h, err := chain.ParseStoreHead(r.Note)
		if err != nil {
			return false
		}
		for _, rh := range h.Runs {
			if !deleted[rh.RunID] {
				return false
			}
		}
		return true
	case record.KindRun, record.KindFork, record.KindAtom, record.KindFail, record.KindEnd, record.KindCheckpoint, record.KindRollback:
		return deleted[r.Run]
	}
	return false
}

// removeDeletedFrames removes the frame files of deleted runs (derived:
// nothing reads them; a failure is logged).
func (db *DB) removeDeletedFrames(deleted map[string]bool) {
	ids := make([]string, 0, len(deleted))
	for id := range deleted {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	removed := 0
	for _, id := range ids {
		err := db.fs.Remove(db.frameFileName(id))
		switch {
		case err == nil:
			removed++
		case !layout.NotExist(err):
			db.unclean.Store(true)
			db.logger.Warn("engine: gc: remove the frame file of a deleted run", "run", id, "err", err)
		}
	}
	if removed > 0 && !db.opts.NoSync {
		if err := layout.SyncDir(db.fs, db.path(layout.FramesDir)); err != nil {
			db.unclean.Store(true)
			db.logger.Warn("engine: gc: sync the frames directory", "err", err)
		}
	}
}

// dropDeletedSnapshots deletes the snapshots of deleted runs from the
// snapshot store (derived: nothing reads them any more). Their atom-index
// entries stay (the snapshot store has no way to delete them yet). A
// snapshot store that is not usable is left alone.
func (db *DB) dropDeletedSnapshots(ctx context.Context, deleted map[string]bool) error {
	if !db.snapshotsExist() {
		return nil // never created: no snapshot to delete (and none is created for it)
	}
	snaps, err := db.usableSnapshots(ctx)
	if err != nil || snaps == nil {
		return nil // the store failed or is absent: its own error says so (Stats)
	}
	b := snaps.NewBatch()
	defer b.Discard()
	for id := range deleted {
		seqs, err := snaps.Snapshots(id)
		if err != nil {
			return fmt.Errorf("snapshots of deleted run %q: %w", id, err)
		}
		for _, seq := range seqs {
			if err := b.DeleteSnapshot(id, seq); err != nil {
				return err
			}
		}
	}
	if b.Len() == 0 {
		return nil
	}
	if err := b.Commit(!db.opts.NoSync); err != nil {
		return fmt.Errorf("delete the snapshots of deleted runs: %w", err)
	}
	return nil
}

// logTrimmed reports whether garbage collection removed records from the
// log: its first segments (Open checked that RETENTION explains it), or
// records of a compacted segment (compact.go).
func (db *DB) logTrimmed() bool {
	if db.log == nil {
		return false // replay without a log (the fuzz targets')
	}
	segs := db.log.Segments()
	return len(segs) > 0 && (segs[0].ID > 1 || db.log.AnyCompacted())
}

// orphan returns err, the damage of a record of run whose creation record
// is not in the log, unless garbage collection trimmed the log: then it is
// noted (db.orphans) and checked once the replay ends (checkOrphans),
// since the run may be one the log deletes further on.
func (db *DB) orphan(run string, err error) error {
	if !db.logTrimmed() {
		return err
	}
	if db.orphans == nil {
		db.orphans = map[string]error{}
	}
	if _, seen := db.orphans[run]; !seen {
		db.orphans[run] = err
	}
	return nil
}

// checkOrphans returns the damage of the first orphan record (by run id)
// of a run the log does not delete.
func (db *DB) checkOrphans() error {
	err := firstOrphan(db.orphans, db.deletedLocked)
	db.orphans = nil
	return err
}

func firstOrphan(orphans map[string]error, deleted func(string) bool) error {
	ids := make([]string, 0, len(orphans))
	for id := range orphans {
		if !deleted(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	sort.Strings(ids)
	return orphans[ids[0]]
}
