// Package retention is the store's retention: deleting ended runs (the
// delete record and the choice of runs), garbage collection of the log's
// dead records (the dead prefix, compaction of segments in place), the
// orphan rule of a replay of a trimmed log, and the removal of the
// leftovers of failed writes. It knows nothing of the engine's runs or
// locks: package engine implements Core and Runs over its DB with one
// adapter (engine/gc.go's gcCore, which is erasure's too), and keeps the
// public API.
//
// The interface the engine implements, whole (Core), over the facts of
// its state a collection, a deletion and an erasure start on (Health):
//
//	LogFailed() error                    // Health: the log's first failure (final), if any
//	WaitLedger(ctx) error                // Health: the ledger loaded, or why not
//	CheckRegistry() error                // Health: the deleted runs before CHECKPOINT's replay position known, or why not
//	StartDirSyncs()                      // Health: the directories' fsyncs started (records wait for them)
//	Checkpoint() (wal.Pos, error)        // a durable engine checkpoint; its replay position
//	StoreHead() (bool, error)            // a durable store head of the live runs, if any has a chain checkpoint
//	Deleted() map[string]bool            // the runs whose delete or erase record is durable
//	DropDerived(ctx, runs) error         // their frame files and snapshots removed
//	Forget(fps) int                      // the ledger forgets fps (in memory)
//	Closed() error                       // ErrClosed once the DB is closed
//
// A deletion, and a run's erasure (internal/erasure), take runs out of
// the store's table through Runs, whose runs are runview.Runs (ChainHead
// gives each delete or erase record its link):
//
//	Health                               // checked by Writable: the log's deletions known, directories' fsyncs started, the log not failed
//	Track() (release func())             // the replay position held below the records and the withdrawal
//	Take(choose) ([]runview.Run, error)  // under the table's lock: choose among the runs (and the Registry), the chosen withdrawn at once
//	Append(ctx, recs) error              // the delete records, durable, all or none
//	Restore(runs)                        // the records failed: the runs are back
//	Gone(kind, ids, gone, runs)          // the deletions (or erasure) durable: registry marked, handles withdrawn
//
// Core's methods are called on the engine's background goroutine (it owns
// the engine checkpoints), under GC's lock but Health's; nothing of the
// engine's is held when they are called. What the engine calls:
//
//	(*GC).Start(Env)                     // at Open, before the background goroutine
//	(*GC).Request(ctx, stop, ErrClosed)  // DB.GC: queue a collection and wait
//	(*GC).Jobs(), (*Job).Run(gc, core)   // the background goroutine serves the queue
//	(*GC).Lock(), Unlock()               // Delete and Erase: one at a time with a collection
//	Delete(ctx, gc, runs, sel, errs, sign) // DB.DeleteRuns: the whole deletion over Runs
//	(*GC).DropDerived, LedgerRecords     // Core's and erasure's: deleted runs' frame files and snapshots, the log's ledger records (over Env)
//	Selection.Check, Choose, Deletable   // which runs a Delete takes, or why it refuses
//	NewDeletion, Deletion.Record, Note   // the delete record and its (signed) checkpoint (Signing.Note)
//	Registry, GoneOf, Merge              // the deleted runs by id (under the engine's DB mutex): each one's delete and erase records, merged
//	(*Registry).MarkGone, Errors.Gone    // Runs.Gone: the durable deletions marked, the error a kept handle then matches
//	(*Registry).Replay, Misfit           // replay: a delete or erase record applied, or why it does not fit its run
//	(*GC).Orphan, CheckOrphans, Trimmed  // replay of a log garbage collection trimmed
//	RemoveLeftovers                      // writable Open: temporary files, unnamed ledger tables
//
// Refusals match the engine's sentinels (Errors), passed in, so that the
// engine's API keeps its errors.
//
// # What is dead
//
//   - every record of a deleted run (its creation, atoms, fails, end,
//     chain checkpoints, rollbacks, erase-key records, waits, events and
//     wakes), once its delete record is durable, and its intents and
//     certificates of actions with the run's own default keys
//     (ledger.DefaultKey of the run, seq and index): no other run can
//     ever use those (a deleted id is never created again, and a run with
//     a fork is not deleted without it). An action with an explicit key
//     is live: another run may have repeated it, and that run's atom
//     names its certificate;
//   - a store head that a later durable store head supersedes, or whose
//     runs are all deleted.
//
// Everything else is live, every delete and erase record included
// (forever: it is what lets verify tell a deletion by policy from
// tampering). A collection works below CHECKPOINT's replay position only
// (so the replay never needs what it removes): it removes the segments
// before the first one that holds a live record (the dead prefix), and
// compacts every later segment there that is wholly dead or dead for at
// least Env.CompactDead of its bytes: wal.Log.Compact rewrites the
// segment in place with its live records only, each at the position it
// had, and keeps for every record it removed a note of its kind, run and
// seq (layout.ReclaimedNote). No log position changes, so no derived
// file needs rewriting (docs/DESIGN.md, "Retention", says why in place).
//
// What may go, per deleted run: only a prefix of its records still in the
// log. A dead record of a deleted run goes only if no record of that run
// is kept in an earlier segment, so what is left of a deleted run is
// always its latest records: a run whose creation record is in the log
// has all its records there, and one whose creation record is gone is an
// orphan that the log deletes further on (Orphan, CheckOrphans). A
// segment where the remaining records of a deleted run begin, and that
// does not hold its end, is compacted whatever its dead fraction, so
// that the run's later segments can go whole.
//
// # Crash safety
//
// One collection (Collect), step by step, each durable before the next:
//
//  1. An engine checkpoint, then a store head waited for: CHECKPOINT's
//     replay position passes every delete record written so far, no row
//     lists a deleted run, and every store head before it is superseded.
//  2. The log before the replay position is read up to its first live
//     record; the segments before that one are the dead prefix
//     (PlanLog).
//  3. The ledger forgets the fingerprints of the dead intents and
//     certificates that go, and a second engine checkpoint writes a
//     ledger table without them.
//  4. RETENTION is written atomically with the new floor (the first
//     segment kept): from here a log that starts anywhere from segment 1
//     to the floor is whole.
//  5. The segments below the floor are removed and the log directory is
//     fsynced (wal.Log.RemoveBelow).
//  6. The planned segments are compacted, one at a time: NAME.tmp
//     written and fsynced, renamed over the segment (the commit point of
//     each), the directory fsynced.
//
// A crash before 4 leaves the log as it was (with a CHECKPOINT and ledger
// table that are merely newer); between 4 and 5, dead segments below the
// floor, which Open accepts and the next collection removes; in 6, some
// segments not compacted yet (and a .tmp that the next writable Open
// removes: RemoveLeftovers is the engine's, wal.Open the log's), which
// the next collection compacts. No step touches a live record.
//
// A deletion (engine.DB.DeleteRuns) is one batch of delete records,
// durable when it returns, written under GC's lock: the runs Choose took
// stay chosen until their records are written.
//
// # Caveats
//
// Compaction is local: a replica received the records as they were
// committed and keeps the ones removed here. A collection reclaims
// nothing at or past the replay position, so the newest segments wait
// for the next engine checkpoint. The atom-index entries of deleted runs
// stay in the snapshot store.
package retention
