// Package erasure is the erasure of a store's content by crypto-shredding
// (docs/DESIGN.md, "Erasing a run" and "Erasing a memory key"): what is
// sealed with a data key can never be opened again, by anyone, wherever
// copies of the log went, once KEYS no longer holds that key. It erases
// whole runs (their data keys and their memory keys') and single memory
// keys of a run (the values sealed with that key's data keys), seals the
// values of erasable memory keys before they enter a delta, and opens them
// on the way out. It knows the steps of an erasure, their order and what
// each leaves after a crash, and conducts a run's erasure and a memory
// key's over small interfaces of the engine (engine/erase.go,
// engine/erasekey.go), which keeps the public API: a run is taken out of
// the engine's table as a deletion takes it (retention.Runs), and the
// engine's checkpoints and derived files are reached through Finisher.
//
// The interface the engine gives it, whole (Store, and its Keys):
//
//	Keys() Keys                          // KEYS: Lock() (table, keys), Unlock(), Replace(next) error (mutex held: next durable, then the table), Add(scope) error (a live data key, KEYS durable first)
//	Sealer() *record.Sealer              // the store's payload sealer; nil: plaintext
//	Signing() retention.Signing          // the hasher (links), store id and signing key (notes: Signing.Note)
//	Append(ctx, recs) error              // records, durable when it returns, all or none
//
// and what the engine calls, by hook:
//
//	before every commit   Eraser.Seal(run, delta, own)      (values of erasable keys sealed)
//	on the way out        Eraser.Open(frame), CheckSealed   (sealed values opened, or absent)
//	a CHECKPOINT row      Eraser.OpenResult(run, seq, res)  (a run's end result opened, or none once erased)
//	replay                Eraser.Replayed(rec)              (record.KindEraseKey)
//	Open, after replay    Eraser.FinishKeys                 (interrupted key erasures finished)
//	bg goroutine          Eraser.Jobs (it calls each)       (Do queues an erasure and waits for it)
//	DB.Erase              Erase(ctx, runs, run, reason, stop) (checks, then EraseRun on the bg goroutine)
//	                      EraseRun(ctx, runs, run, reason)  (steps 1 to 5 in order, over Runs)
//	Resumer.Finish        Finish(ctx, finisher, run)        (steps 3 to 5, over Finisher)
//	Open                  ResumePending (Resume of each)    (an interrupted erasure finished or undone)
//	DB.EraseKey           EraseKey(ctx, keyRuns, run, key, reason) (a memory key's erasure, steps 1 to 3)
//	registry check        HealStale, Heal                   (a KEYS older than the log's erasures)
//
// Resuming a run's erasure (resume.go) calls back into the engine through
// Resumer, on the goroutine that serves Jobs:
//
//	retention.Health          // checked by Loaded: ledger loaded, deletions known, directories' fsyncs started
//	Lock(), Unlock()          // one at a time with deletions and collections
//	Deletion(run) *retention.Gone // run's durable deletion, with its erasure if the log holds its erase record
//	Finish(ctx, run) error    // steps 3 to 5 (the engine calls Eraser.Finish)
//
// A run's erasure (conduct.go) takes the run out of the engine's table
// through Runs: a Resumer and the table a deletion takes runs from
// (retention.Runs: Health, Track, Take, Restore, Gone(KindErase, ...)).
// The mark of a failed erasure that could not be removed is logged and
// makes the next Open unclean (Config.Unclean): that Open removes it.
//
// Steps 3 and 4 reach the engine through Finisher (retention.Core's
// methods of those names, and the log's ledger records):
//
//	Forget(fps) int; Checkpoint() (wal.Pos, error); DropDerived(ctx, runs) error; Closed() error
//	LedgerRecords() (cursor, open, error) // the log's intents and certificates, still sealed; open decodes one (retention.GC's)
//
// A memory key's erasure finds its run through KeyRuns (the engine
// implements Store, Runs, Finisher and KeyRuns with one adapter, with
// retention.Core):
//
//	Find(run) (runview.Run, deleted bool, error) // under the table's lock; an error if the store is closed
//	Track() (release func())  // the replay position held below the erase-key record
//	LogFailed() error         // the log's first failure, if any (no erasure of a key then)
//
// Usage (what package engine does, in short):
//
//	e := erasure.New(erasure.Config{Store: store, ErasableKeys: []string{"pii.*"}, ...})
//	d, err := e.Seal(run, delta, false)   // Commit: pii.* values sealed with their own keys
//	k, err := e.EraseKey(ctx, keyRuns, run, "pii.mail", reason) // DB.EraseKey
//	err = e.Erase(ctx, runs, run, reason, stop) // DB.Erase: EraseRun on the bg goroutine, then
//	// runs.Finish calls e.Finish(ctx, finisher, run): the ledger, a checkpoint, the files, the keys
//
// # Guarantees
//
//   - A data key is dropped from memory only after the KEYS without it is
//     durable (file and directory fsync), and every change of the table
//     is made under the Store's mutex, on a clone, so that a failed write
//     changes nothing.
//   - An erasure is acknowledged only once its record is durable and KEYS
//     no longer holds its keys. A crash between the two is finished at the
//     next Open (Pending and DropRun; FinishKeys); a run's erasure whose
//     record never became durable is undone (Unmark).
//   - A record of one memory key's erasure never drops another key's
//     data key: LiveNamed keeps only numbers whose scope is the record's.
//   - Errors keep the engine's sentinels (Config's Err fields), so that
//     errors.Is matches as the engine documents.
//
// # Caveats
//
//   - What another run holds (a consumed message, a fork's state at its
//     fork point) and what an explicit-key action certified are not the
//     erased run's and stay; a KEYS restored from an older copy holds the
//     erased keys again until the engine erases them again (Heal).
//   - The package is not safe for a DB of another store: the Store it is
//     given is the one whose KEYS it changes.
package erasure

import (
	"context"

	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// Store is what an erasure needs of the store it erases in: package
// engine's DB, through its one adapter of the retention side (gcCore,
// engine/gc.go). The methods are safe for concurrent use.
type Store interface {
	// Keys is the key table (KEYS, engine's keystore.Store); it is called
	// only for an encrypted store (Sealer not nil).
	Keys() Keys
	// Sealer seals and opens the store's payloads with its data keys; nil
	// for a plaintext store.
	Sealer() *record.Sealer
	// Signing is what an erasure's link and its chain checkpoint are made
	// with: the store's hasher (the run's nonce), id and signing key.
	Signing() retention.Signing
	// Append appends recs to the log and returns once they are durable,
	// all or none; an error of the log's write or fsync stops the store's
	// writes until it is reopened (the engine's rule), and recs were not
	// acknowledged.
	Append(ctx context.Context, recs [][]byte) error
}

// Keys is the store's key table. Its methods are safe for concurrent use.
type Keys interface {
	// Lock takes the mutex that orders every change of the key table and
	// every write of KEYS, and returns the table (immutable: Clone it to
	// change it) and the unwrapped data keys (safe for concurrent use).
	Lock() (*seal.Table, *seal.Keys)
	// Unlock releases the mutex Lock took.
	Unlock()
	// Replace, with the mutex held, writes next as KEYS, durably (file
	// and directory fsync), and then makes it the table. On an error the
	// table is unchanged.
	Replace(next *seal.Table) error
	// Add makes sure scope has a live data key, adding one if not, and
	// then KEYS is durable before it returns. It takes the mutex itself.
	Add(scope string) error
}
