// Package runtable is the store's table of runs by id as runs enter and
// leave it, and the rules of that: a run is published in the table
// before its creation record is durable (so that concurrent callers of
// its id wait for one creation instead of racing), and withdrawn from it
// by a failed creation, a deletion or an erasure; a deletion's ids stay
// marked in the registry of deleted runs (internal/retention) while its
// record is not durable, so that no run of that id is created and no fork
// of it appears meanwhile, and are put back if the record fails.
//
// The table is a map (indexing, delete, len and range work on it) with
// the methods that keep those rules; it holds no lock: package engine
// calls it under its DB lock (db.mu.runs, engine/runs.go). What it needs
// of a run is its id:
//
//	type Entry interface {
//		ID() string
//	}
//
// After a restart, the runs the log's tail did not touch are rows of
// CHECKPOINT (Rows) that the engine builds on first need (Take: one row,
// TakeAll: every row left; engine/recovery.go's runLocked and
// allRunsLocked), under the same lock (Table.IDs yields the ids of both,
// for the check that KEYS holds every run's key); a row the log showed wrong (Drop,
// the reconciliation) or of a run deleted is never taken. A run built
// after a restart is set to a State, from its row (FromRow) or from the
// log (internal/registry), in one place (engine/recovery.go's
// setStateLocked).
//
// # Guarantees
//
//   - Withdraw with deleting marks every id before the caller releases
//     the lock: no window in which an id is neither in the table nor
//     marked.
//   - Restore is Withdraw's exact inverse: the runs back under their ids,
//     their marks removed.
//   - A row is taken at most once.
//
// # Caveats
//
// The table holds the runs built so far, not the rows left: a run is in
// one or the other. A row of a run deleted before it was taken stays
// counted in Rows.Left.
package runtable
