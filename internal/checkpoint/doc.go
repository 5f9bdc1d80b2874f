// Package checkpoint holds what the engine's background snapshots and
// engine checkpoints decide and write, apart from the runs they read:
// the snapshot retention policy, when a snapshot is due, which runs a
// checkpoint may leave to their tails, the preparation of a run's frame
// for its frame file and its snapshot, the writing of a checkpoint's frame
// files and of its snapshot batch (in parts), the log records of chain
// checkpoints and store heads, and the load after Open of the ledger table
// a checkpoint wrote (LedgerTable: from its file, or rebuilt from the
// log when the file is missing, damaged or not the one CHECKPOINT names),
// and the replay of a run's atoms from the log when its frame file cannot
// be used (ReplayRun, the engine applying each).
//
// # The interface to the engine
//
// The package takes and gives plain data; it calls nothing of the engine.
// The engine's background goroutine (engine/background.go, the scheduler)
// conducts it:
//
//	tick := SweepInterval(snapshotInterval, checkpointInterval) // the time triggers' period
//	// Under the run's lock: fill a Capture from the run, its frame only if
//	Frame{...}.FrameDue(full, snaps)         // the snapshot or frame file is stale
//	c.Plan(full, base, snapSeq, windowFirst) // retention: Snapshot, InStore, Drop, Meta seqs
//	// Outside it:
//	c.Encode(full, snaps, comp, sealer)      // s2 (and seal) only what takes it
//	// A background snapshot:
//	c.AddTo(batch); batch.Commit(false)
//	// An engine checkpoint:
//	w := NewWriter(fs, framesDir, noSync, snaps, part)
//	w.Add(c, frameFileName)                  // for each run
//	stored, err := w.Finish(gen)             // frame files synced, then the batch, synced
//	// Once durable (stored, for the snapshot), under the run's lock:
//	c.Captured(&index, now)
//	WriteLedgerTable(fs, name, table, sealer, gen, noSync) // then INBOX, WAITS, CHECKPOINT (the engine's)
//	// The chain anchors, into the log:
//	AppendChain(log, signer, c)              // a run's chain checkpoint, not waited for
//	AppendStoreHead(log, signer, h, wait)    // every run's latest anchor
//
// What each promises:
//   - Plan, Captured, Tail.Leave, SnapshotDue, SweepInterval and
//     Frame.FrameDue are pure: no I/O, no lock.
//   - Encode compresses with s2 and seals (record.PlaceFrame, the run and
//     seq) when there is a sealer; its error names the run and seq.
//   - Writer.Add queues the frame file (written by Finish, several at once
//     on the operating system's filesystem) and commits a part of the
//     snapshot batch, unsynced, each time it passes part bytes; Finish
//     writes the frame files, syncs frames/ (unless noSync), then commits
//     the last part with the generation (snapindex.PutGen), synced: the
//     generation is named only once every part is in. A snapshot store
//     that fails (snapshot.ErrFailed, ErrClosed) is dropped from the
//     checkpoint, which goes on: Finish then reports stored = false.
//   - LedgerTable loads once, on its own goroutine, after Start or the
//     first Wait; Wait returns its error (a table that could be neither
//     loaded nor rebuilt), and Rebuilt why the file was not used.
//   - ChainRecord and StoreHeadRecord sign with the store's key when there
//     is one; the records are byte for byte those of record.AppendNote.
//     AppendChain and AppendStoreHead append them (a store head that lists
//     no run is not written); their errors say what was being signed.
//   - WriteLedgerTable writes a copy of the table (the ledger searches it
//     in place), sealed in an encrypted store, atomically.
//
// # Crash safety
//
// CHECKPOINT, written by the engine after Finish, is the commit point of
// an engine checkpoint. Frame files and snapshot parts written before a
// crash that CHECKPOINT does not yet name are harmless: frame files carry
// their own seq, and a snapshot store older than CHECKPOINT's generation
// is re-indexed from the log (package snapindex).
//
// # Caveats
//
//   - A Capture's Positions must be the caller's own copy: Writer.Add puts
//     them in the batch, Captured keeps a new slice.
//   - Discard must be called after NewWriter, whatever happened.
package checkpoint
