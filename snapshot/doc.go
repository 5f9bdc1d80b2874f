// Package snapshot holds the snapshot policy and the Pebble-backed snapshot
// store of CONTINUUM.
//
// A snapshot is the whole semantic frame of a run at one atom (already
// encoded and compressed by the engine: Frame is opaque here), with the run's
// chain head at that atom. The engine takes one in the background when
// Policy.Due says so (every 50 atoms or 10 minutes by default), never on the
// commit path, and finds frame(seq) as the nearest snapshot at or below seq
// (Store.AtOrBelow) plus the deltas after it, whose log positions it reads
// from the atom-position index (Store.Positions) instead of scanning the log.
//
// The store keeps three things in one Pebble database: snapshots keyed by
// (run, seq), the position of every atom's delta record keyed by (run, seq),
// and small engine metadata (for example the last atom indexed per run).
// They are written together, in batches: build a Batch, then Commit it once.
// The key and value layouts are in format.go.
//
// Usage:
//
//	st, err := snapshot.Open(filepath.Join(dir, "snapshots"), &snapshot.Options{FS: fs})
//	if err != nil { ... }
//	defer st.Close()
//
//	b := st.NewBatch()
//	b.PutSnapshot(&snapshot.Snapshot{RunID: "r1", Seq: 50, Head: head, Frame: enc, Created: now})
//	b.PutPositions("r1", 1, positionsOfAtoms1to50)
//	b.PutMeta("indexed/r1", lastSeq)
//	if err := b.Commit(true); err != nil { ... }
//
//	snap, err := st.AtOrBelow("r1", 73)      // the snapshot at seq 50
//	pos, err := st.Positions("r1", 51, 73)   // where the deltas of 51..73 are
//
// # Guarantees
//
//   - Atomicity: a committed Batch is wholly present or wholly absent after
//     a crash (it is one Pebble batch; Pebble's WAL write is the commit
//     point, and recovery replays whole batches only).
//   - Durability: Commit(true) returns after Pebble's WAL is fsynced; the
//     batch then survives any crash. Commit(false) may be lost in a crash.
//   - Integrity: each snapshot value carries a version byte and a CRC-32C of
//     its key and value; a damaged or misplaced value is reported as
//     ErrCorrupt naming the run and seq, never returned as data. Decoding
//     never panics on any input.
//   - Isolation of runs: run ids of any bytes are length-prefixed, so the
//     keys of one run never interleave with another's ("a", "a\x00b" and
//     "ab" are three separate ranges).
//   - Errors classify: ErrCorrupt means damaged data (a bad value, a bad
//     key, or corruption Pebble found), and only then is rebuilding the store
//     from the log warranted; a held lock, an I/O error (ErrFailed) or a
//     store from a newer format (ErrNewerFormat) is not corruption.
//   - On a real disk, files are created 0600 and directories 0700. One
//     process at a time: Pebble holds a lock file in the directory.
//
// # Caveats
//
//   - Pebble's Open costs milliseconds: about 7-25 ms on a quiet small
//     machine, a p50 of 10-32 ms and a p99 of 50-150 ms on a loaded 2-core
//     one (bench/RESULTS.md, snapshot), against ~0.7 ms on vfs.NewMem: it is
//     file creation and fsyncs. The engine should open the store concurrently
//     with its WAL replay, or lazily, never on its restart path.
//     Stats().OpenDuration reports it.
//   - Positions are only as complete as the engine made them: Positions
//     returns ErrNotFound (naming the first missing seq) for atoms not yet
//     indexed, and the engine must then fall back to the log.
//   - DeleteRun removes snapshots and positions, not engine metadata.
//   - The snapshot count in Stats is kept exact by a read per distinct
//     snapshot key at Commit (to tell a new snapshot from a replaced one);
//     Commit is meant for the background, not the commit path.
//   - An fsync error is final (invariant I8). Pebble treats a failed WAL
//     write or sync, and a failed directory sync, as unrecoverable: it calls
//     its logger's Fatalf or panics. When that happens on the caller's
//     goroutine (Open, Commit, DeleteRun), the store turns it into an error
//     wrapping ErrFailed; after a write failed so, every later write returns
//     that error without retrying until the store is reopened, and the
//     failed batch may or may not be durable. When it happens on one of
//     Pebble's own goroutines (a flush or compaction failing to sync its
//     MANIFEST), nothing can catch it: the process stops, as it would with
//     Pebble's default logger, and the next Open recovers.
//   - On a filesystem not rooted in vfs.Default (an in-memory or wrapped
//     one), file modes are whatever that filesystem does.
package snapshot
