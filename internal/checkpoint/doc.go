// Package checkpoint holds what the engine's background snapshots and
// engine checkpoints decide and write, apart from the runs they read:
// the background goroutine's schedule, the steps of a snapshot and of a
// checkpoint in their order, the snapshot retention policy, when a snapshot is due, which runs a
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
// The package conducts the engine's background goroutine (Background: its
// schedule), its background snapshots (Snapshot) and its engine
// checkpoints (Write), and reaches the engine through one interface, R
// being the engine's run; each method takes the locks it needs:
//
//	type Core[R any] interface {
//		Store() (Store, error)               // what a checkpoint writes with, or why none may be written
//		Snapshots() (*snapshot.Store, error) // nil: none usable, the checkpoint goes on without it
//		Runs() []R                           // the runs to capture, sorted by id
//		Anchor(r R) error                    // r's chain checkpoint, after its Commit in flight (Close's)
//		StoreHead(runs []R, wait bool) error // every run's latest anchor
//		Mark(gen uint64) (table []byte, floor wal.Pos, err error) // the ledger table and the log position
//		CloseTails() bool                    // Close leaves runs to their tails
//		Capture(r R, full, snaps, closeTails bool) (*Capture, error) // r's capture under its lock
//		Idle(r R)                            // after r's Commit in flight; its queued snapshot taken
//		Captured(r R, c *Capture, stored, full bool) // what c made durable, under r's lock
//		WriteFiles(gen uint64, floor wal.Pos, rows []layout.CheckpointRun) error // INBOX, WAITS
//		Written(gen uint64, floor wal.Pos)   // CHECKPOINT of gen is durable
//		DropFrames() (unwritten bool)        // the frame cache's sweep
//		Fail(err error)                      // the sticky error of background work
//	}
//
// The engine starts one goroutine that runs Background (its Schedule: the
// channels of queued snapshots, checkpoint requests, collections and
// other jobs, the sweep's period and its time triggers) until Close, and
// calls Write itself for Close's checkpoint (final) and a collection's.
// The steps each one takes, in order:
//
//	// Write: Store, Snapshots; Close's: Anchor each run, StoreHead(wait)
//	table, floor, err := core.Mark(gen)      // gen: the last one's + 1
//	w := NewWriter(fs, framesDir, noSync, snaps, part)
//	c := core.Capture(r, true, ...); c.Encode(...); w.Add(c, frameFileName) // each run
//	stored, err := w.Finish(gen)             // frame files synced, then the batch, synced
//	core.Captured(r, c, stored, true)        // each run
//	WriteLedgerTable(...); core.WriteFiles(gen, floor, rows); CHECKPOINT, atomically
//	core.Written(gen, floor)                 // then the old ledger table removed
//	core.StoreHead(runs, false); core.DropFrames() // not Close's
//	// Snapshot: Snapshots, Idle(r), Capture(r, false, ...), Encode,
//	c.WriteSnapshot(snaps); core.Captured(r, c, true, false)
//
// Each run keeps its bookkeeping of snapshots, frame file and chain
// checkpoints in a Book, held by value under the run's lock, which the
// engine keeps; Book's methods are called with it held:
//
//	book.Start(now); book.Fork(at, head)   // a run created, loaded, forked
//	book.Applied(pos, deltaLen)             // each atom committed
//	book.QueueDue(policy, lastSeq)          // queue a snapshot (SnapshotDue)
//	book.AnchorDue(seq); book.AnchorLate(lastSeq, interval); book.Anchored(seq, head, now)
//	book.RunHead(run)                       // a store head's entry
//	book.Rebuilt(); book.FileRead(sum, seq) // the frame built without, from, its file
//
// Under the run's lock, Capture fills a Capture from the run, its frame
// only if book.Frame(lastSeq, unread, tail).FrameDue(full, snaps), then
// calls book.Capture(c, full, base) (its positions and seqs, then
// c.Plan: retention's Snapshot, InStore, Drop, Meta seqs); Captured calls
// book.Captured(c, stored, full, now) (c.Captured on its Index, and the
// frame file written). The chain anchors go into the log with
// AppendChain (a run's chain checkpoint, not waited for) and
// AppendStoreHead (every run's latest anchor).
//
// What each promises:
//   - Write writes CHECKPOINT only after every file it names is written
//     (frame files and frames/ synced, the snapshot batch synced, the
//     ledger table atomically, INBOX and WAITS renamed), and calls
//     Core.Written only once CHECKPOINT is durable; an error at any step
//     returns before CHECKPOINT, which stays the last one. The previous
//     ledger table is removed after, a failure to do so logged and
//     Store.Unclean called.
//   - Snapshot's error is the engine's only: a run gone or unchanged, or
//     a snapshot store out of use, writes nothing and is no error.
//   - Background returns once Schedule.Stop is closed; it runs one thing
//     at a time, Schedule.Start once.
//   - Plan, Captured, Tail.Leave, SnapshotDue, SweepInterval,
//     Frame.FrameDue and Book's methods are pure: no I/O, no lock (Book's
//     read the clock: SnapshotDue, AnchorLate); none of Book's allocates
//     but Capture (its copy of the positions) and Applied (the positions
//     grow).
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
// CHECKPOINT, written by Write after Finish and Core.WriteFiles, is the
// commit point of an engine checkpoint. Frame files and snapshot parts written before a
// crash that CHECKPOINT does not yet name are harmless: frame files carry
// their own seq, and a snapshot store older than CHECKPOINT's generation
// is re-indexed from the log (package snapindex).
//
// # Caveats
//
//   - A Capture's Positions must be the caller's own copy: Writer.Add puts
//     them in the batch, Captured keeps a new slice.
//   - Discard must be called after NewWriter, whatever happened.
//   - Write and Snapshot run on one goroutine at a time (Background's, or
//     Close's once Background has returned): the generation they write
//     is the last one's plus one.
package checkpoint
