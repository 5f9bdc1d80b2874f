package engine

import (
	"time"

	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
)

// Stats are counters of a DB since Open, cheap to read.
type Stats struct {
	Open        OpenInfo
	Runs        int
	Atoms       int64 // committed since Open
	Fails       int64
	Actions     int64 // Do calls that returned a result
	Deduped     int64 // of which answered from the ledger without exec
	Snapshots   int64 // background snapshots written since Open
	Checkpoints int64 // engine checkpoints written since Open
	Dictionary  uint32
	Log         wal.Stats
	Ledger      ledger.Stats
	// Background is the sticky error of background work, if any.
	Background error
	// FramesRebuilt counts the runs whose frame file was missing, damaged
	// or stale, and whose frame was rebuilt from the log instead.
	FramesRebuilt int64
	// FramesDropped counts the frames of idle runs dropped from memory
	// since Open to keep within Options.FrameCache (each is read back from
	// its frame file when next used).
	FramesDropped int64
	// LedgerRebuilt says why the ledger table was rebuilt from the log
	// (missing, damaged, not the one CHECKPOINT names); "" if it was not,
	// or is not loaded yet.
	LedgerRebuilt string
	// InboxRebuilt says why INBOX was not used and the inbox of messages
	// between runs was rebuilt from the log (missing, damaged, not of the
	// CHECKPOINT Open used); "" if it was not, or is not loaded yet.
	InboxRebuilt string
	// WaitsRebuilt says why WAITS was not used and the index of waits was
	// rebuilt from the whole log (missing, damaged, not of the CHECKPOINT
	// Open used); "" if it was not, or is not loaded yet.
	WaitsRebuilt string
	// CheckpointMismatch describes how CHECKPOINT's table of runs
	// disagreed with the log, found when a run it does not list was
	// created (the log's runs were used); "" if it agreed or was not
	// compared.
	CheckpointMismatch string
	// WaitsMismatch describes how WAITS (a table the checksums and the
	// checkpoint it names let through) disagreed with the log, found by
	// the check a moment after Open (the index of waits was rebuilt from
	// the log); "" if it agreed or was not compared.
	WaitsMismatch string
	// SnapshotStore is why the snapshot store is out of use, or nil: it
	// failed to open, or failed since (a failed write, damage, a value
	// that disagreed with the log). Snapshots then stop, StateAt is served
	// from the log, commits go on, and the next Open rebuilds the store.
	SnapshotStore error
	// SnapshotMismatches counts values of the snapshot store that
	// disagreed with the log since Open (each is ignored and served from
	// the log; the first fails the store).
	SnapshotMismatches int64
}

// Stats returns the DB's counters.
func (db *DB) Stats() Stats {
	db.mu.Lock()
	runs := len(db.mu.runs) + db.mu.lazy.Left()
	db.mu.Unlock()
	return Stats{
		Open:          db.openInfo,
		Runs:          runs,
		Atoms:         db.counters.atoms.Load(),
		Fails:         db.counters.fails.Load(),
		Actions:       db.counters.actions.Load(),
		Deduped:       db.counters.deduped.Load(),
		Snapshots:     db.counters.snapshots.Load(),
		Checkpoints:   db.counters.checkpoints.Load(),
		FramesDropped: db.counters.framesDropped.Load(),
		Dictionary:    db.curDict.Load(),
		Log:           db.log.Stats(),
		Ledger:        db.ledger.Stats(),
		Background:    db.backgroundErr(),

		FramesRebuilt: db.counters.framesRebuilt.Load(),
		LedgerRebuilt: db.ledgerRebuiltWhy(),
		InboxRebuilt:  db.msgs.Rebuilt(),
		WaitsRebuilt:  db.waits.Index().Rebuilt(),

		CheckpointMismatch: db.registryMismatch(),
		WaitsMismatch:      db.waitsMismatch(),
		SnapshotStore:      db.snaps.Err(),
		SnapshotMismatches: db.snaps.Mismatches(),
	}
}

// OpenInfo describes what Open found and did.
type OpenInfo struct {
	Duration       time.Duration // wall time of Open
	Created        bool          // the store was created by this Open
	Replayed       int           // log records replayed (the tail since the last engine checkpoint)
	ReplayedBytes  int64
	TornBytes      int64 // bytes of an incomplete record trimmed from the log tail
	Interrupted    int   // runs whose atom was running at the crash
	CheckpointGen  uint64
	LedgerDeferred bool // the persisted ledger table loads after Open, in the background
	// CleanStart reports that the store was last closed cleanly (its
	// clean-close mark was there): its directories need no fsync before
	// the first acknowledged write.
	CleanStart bool
	// CheckpointIgnored says why CHECKPOINT was not used (damaged, of
	// another store, or disagreeing with the log): Open then replayed the
	// whole log. "" when it was used or there was none.
	CheckpointIgnored string
}
