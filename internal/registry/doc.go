// Package registry reads the runs a store's log holds before a position,
// for the engine's check of CHECKPOINT's table of runs against the log.
//
// A restart trusts CHECKPOINT's table of runs for the part of the log
// before its replay position (reading that part would make restart cost
// depend on history), but creating a run is a decision the log must back:
// a run whose creation record is in the log is never created a second
// time. So the first creation of a run CHECKPOINT does not list reads the
// log before the replay position once (record headers only, no
// decompression: Scan) and reconciles the table with it, trusting the
// log: rows of runs the log does not hold are dropped, rows whose last
// seq, head, nonce or end differ (Disagrees) are rebuilt from the log,
// runs it omits are added. Reconcile decides; the engine's table of runs
// (Table, engine/registry.go) makes the changes.
//
// # The interface to the engine
//
// Scan reads a cursor the engine opens (its Skip set to Skip) and reaches
// the engine, for the records of other capabilities it meets, through:
//
//	type Host interface {
//		// Deleted merges the delete or erase record r into the engine's
//		// deletions (parent: the run's parent, if the log held the run
//		// and it is a fork). A disagreement with an earlier deletion of
//		// the run is returned as why ("" if none); Scan reports it as
//		// damage at r.
//		Deleted(r *record.Record, parent string) (why string)
//		// KeyErased notes an erase-key record (of the whole log).
//		KeyErased(r *record.Record)
//		// IsDeleted reports whether the log deletes run (Deleted was
//		// called for it).
//		IsDeleted(run string) bool
//		// Closed returns the engine's ErrClosed once it is closing (the
//		// scan stops: Close does not wait for a whole read), nil before.
//		Closed() error
//		// Other is handed each record of a kind Scan does not read
//		// itself that the cursor's Skip let through: the engine reads
//		// the log once, a moment after Open, for the check of
//		// CHECKPOINT's runs and of WAITS (its records of waits) at once.
//		// Its error stops the scan.
//		Other(r *record.Record) error
//	}
//
// Host's methods are called on Scan's goroutine, in log order. Collector
// is the Host the engine uses: it gathers the deletions into a
// retention.Registry and the erase-key records.
//
// Settle merges the deletions a Scan found into the engine's, then
// Reconcile changes the engine's runs through (called under the engine's
// lock):
//
//	type Table interface {
//		Deleted(id string) bool // the engine's deletions hold id
//		Built(id string) bool   // id is built, not a row waiting for use
//		Drop(id string)         // a row not built: never built from it
//		Add(id string, lr *Run) // build from lr (not listed, or dropped)
//		// Fix: a built run whose row was wrong: withdrawn and broken (lr
//		// nil), rebuilt from lr if it has not moved since Open, else broken
//		// with err.
//		Fix(id string, c *layout.CheckpointRun, lr *Run, err error)
//		Relink() // point every fork at the parent the table now holds
//	}
//
// The whole check runs once per Open from a CHECKPOINT, a moment after
// Open or before the first call that needs it: a Check (NewCheck, Run)
// takes its steps in their order (the read, the deletions merged and the
// runs reconciled, the healing the deletions allow, WAITS compared with
// the same read's records of waits) and keeps what it found (Mismatch,
// WaitsMismatch), over the engine's (engine/registry.go's regCheck),
// whose read takes SkipFor as its cursor's Skip and AddWaits as its
// Collector's Others:
//
//	type Engine interface {
//		WaitsFromFile() bool // the index of waits came from WAITS
//		ReadLog(to wal.Pos, waits *wait.Check) (map[string]*Run, *Collector, error)
//		Settle(rows []layout.CheckpointRun, log map[string]*Run, found *Collector) (mismatch, why string) // under its lock
//		Corrupt(why string) error // a deletion that disagrees
//		Heal(found *Collector)    // erasures the deletions, now known, let finish
//		Disagreed(mismatch string)
//		CheckWaits(waits *wait.Check, to wal.Pos, live wait.Live) (string, error)
//	}
//
// Open's replay of the log's tail asks the package, for each run, fork,
// atom and end record, whether it fits the runs replayed so far (a
// Replayed: the run's nonce, fork, last seq, head and end):
// CheckCreated, CheckAtom, CheckEnd, Unlisted decide the Step (apply it,
// or CHECKPOINT reflects it already) or the Refusal: a *Mismatch with
// runs from CHECKPOINT (which is then set aside), damage at the record
// otherwise. The engine applies the step (engine/recovery.go's replay).
// A run rebuilt from the log takes its State (Run.State, a
// runtable.State).
//
// # Guarantees
//
//   - Scan reports damage as a *record.CorruptionError naming the
//     record's segment, offset, run and seq: atoms out of order, an atom
//     after the run's end, a second end, a deletion that does not follow
//     the run's end, a fork of a run not created before it, a record of
//     a run whose creation record is not in the log (unless garbage
//     collection trimmed the log and the log deletes the run further on:
//     trimmed).
//   - A run's creation (run and fork records) is taken wherever it is in
//     the log: a run is published before its record is written, so
//     CHECKPOINT may list a run whose creation follows its replay
//     position. Its atoms and end at or after the position are kept
//     apart (Run.After, Run.EndAfter).
//
// # Caveats
//
//   - Scan reads the whole log: it is meant to run once per Open, in the
//     background or before the first creation of a run.
package registry
