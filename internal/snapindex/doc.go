// Package snapindex keeps the engine's snapshot store (package snapshot,
// in Pebble) over its lifecycle: created on first need and opened in the
// background, checked against CHECKPOINT's generation, re-indexed from the
// log when it is older, rebuilt from the log when it is damaged, moved
// aside when it failed, and read only after what it gives is checked
// against the log.
//
// The store is derived: the log holds everything in it. So no failure of it
// stops the engine. If it cannot be opened (or rebuilt), or fails while in
// use, snapshots stop, the engine serves StateAt from the log, commits go
// on, Keeper.Err says why, and:
//   - a store that failed a write is kept: what is on disk is a state
//     Pebble's recovery opens (package snapshot's fence), older than the
//     CHECKPOINT that Close still writes, so the next Open re-indexes the
//     log into it;
//   - a store found damaged (by Pebble, or by the engine's checks against
//     the log: Keeper.Mismatch) is moved aside by Close, and the next Open
//     builds a new one;
//   - one that fails to open is moved aside at once and rebuilt, unless the
//     failure is I/O (an errno, a failed write) or a newer format: those are
//     reported and left, and the next Open tries again (Rebuildable).
//
// One moved-aside copy is kept, for inspection (snapshots.broken-<time>);
// moving another aside removes the older one, so that repeated failures do
// not fill the disk.
//
// # The interface to the engine
//
// The engine creates one Keeper once Open's recovery has succeeded (New:
// the runs, the log and the CHECKPOINT generation it started from are
// final), and reaches the runs and the log through Host:
//
//	type Host interface {
//		// ResetIndexed sets every run's snapshot seq to 0 (its snapshots
//		// are gone) and returns, per run, how many of its atoms the atom
//		// index held. It takes each run's lock in turn, no other.
//		ResetIndexed() map[string]uint64
//		// Cursor opens a cursor over the whole log, from its start,
//		// decoding with dec (record headers only: dec has no
//		// decompressor). The caller closes it.
//		Cursor(dec *record.Decoder) (*record.Cursor, error)
//		// Stopping is closed when the engine starts closing: a wait for
//		// the store's lock ends then.
//		Stopping() <-chan struct{}
//		// Unclean records that a write failed and was only logged: the
//		// engine's Close then leaves no clean-close mark.
//		Unclean()
//	}
//
// Host's methods are called on the Keeper's opening goroutine, with no
// lock of the Keeper held, and never from within a call of the engine
// into the Keeper (Get does not wait for a re-index: it returns
// ErrIndexing).
//
// # Usage
//
//	k := snapindex.New(cfg, host)
//	k.Start()                     // a moment after Open: opens an existing store
//	s, err := k.Usable(ctx)       // nil: none to use; read the log
//	if bad { k.Mismatch(s, run, seq, err) }
//	b := s.NewBatch(); ...; snapindex.PutGen(b, gen); b.Commit(true) // engine checkpoint
//	k.Close()
//
// # Guarantees
//
//   - A store whose generation (metadata MetaCheckpointGen, written by
//     every engine checkpoint's synced batch) is older than
//     Config.CheckpointGen is re-indexed from the log before it is used.
//   - A rebuild writes the position of every atom the runs had indexed,
//     from one scan of the log, in one synced batch with the generation;
//     a log that lacks any of them is a *record.CorruptionError.
//   - After Close, the store is never opened again by this Keeper.
//
// # Caveats
//
//   - Snapshots are not rebuilt: they come back with the next ones.
//   - Get waits for the open, not for a re-index or a rebuild (a scan of
//     the whole log that takes every run's lock, while its caller may hold
//     one): it returns ErrIndexing instead.
package snapindex
