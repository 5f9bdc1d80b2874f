// Package snapshot holds the snapshot policy and the Pebble-backed snapshot
// store of CONTINUUM.
//
// A snapshot is the whole semantic frame of a run at one atom, with the
// run's chain head at that atom. Its frame comes one of two ways: plain
// (Snapshot.Plain: the frame's raw encoding, which the store cuts into
// content-defined chunks, compresses, and stores once per run, shared by
// every snapshot of the run that holds them), or opaque (already encoded,
// compressed and perhaps sealed by the engine, stored whole: ciphertext
// does not deduplicate). The engine takes one in the background when
// Policy.Due says so (every 50 atoms or 10 minutes by default), never on the
// commit path, and finds frame(seq) as the nearest snapshot at or below seq
// (Store.AtOrBelow) plus the deltas after it, whose log positions it reads
// from the atom-position index (Store.Positions) instead of scanning the log.
//
// The store keeps four things in one Pebble database: snapshots keyed by
// (run, seq), the chunks of their plain frames keyed by (run, hash), the
// position of every atom's delta record keyed by (run, seq), and small
// engine metadata (for example the last atom indexed per run).
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
//	b.PutSnapshot(&snapshot.Snapshot{RunID: "r1", Seq: 50, Head: head, Frame: raw, Plain: true, Created: now})
//	b.PutPositions("r1", 1, positionsOfAtoms1to50)
//	b.PutMeta("indexed/r1", lastSeq)
//	if err := b.Commit(true); err != nil { ... }
//
//	snap, err := st.AtOrBelow("r1", 73)      // the snapshot at seq 50 (snap.Frame: raw)
//	pos, err := st.Positions("r1", 51, 73)   // where the deltas of 51..73 are
//
// # Chunked snapshots
//
// A long run's frame grows by appended messages, and the engine keeps one
// snapshot of every window of seqs: whole copies made snapshot bytes grow
// faster than the frame. So a plain frame is cut where a gear rolling hash
// of its bytes says (ChunkBoundaries: content-defined, between ChunkMinSize
// and ChunkMaxSize, about ChunkAvgSize), and consecutive snapshots of a run
// share every chunk but the last one or two and those where the frame
// changed. The writer may add cuts of its own (Snapshot.Cuts): the engine
// cuts where a frame's messages begin and end, so that the parts it
// rewrites in place (memory, pending calls) never share a chunk with the
// messages, which only grow.
//
//   - PutSnapshot of a plain frame writes only the chunks the run holds
//     neither in the store (one Get each) nor in the batch; the snapshot's
//     value (version 2) lists the chunks' hashes and lengths.
//   - A chunk is kept while a snapshot of its run references it. Commit,
//     for each run whose snapshots it deletes or replaces, deletes the
//     chunks that only those referenced: it reads the chunk lists of the
//     run's remaining snapshots (chunkstore.go says what that costs). A
//     batch being built pins the chunks it reuses, so that a concurrent
//     commit does not delete them from under it. DeleteRun deletes the
//     run's chunks with its snapshots.
//   - A read reassembles the frame into one buffer, checking each chunk's
//     checksum, length, and BLAKE3 against its key: a chunk missing,
//     damaged or not the one named is ErrCorrupt naming the run, seq and
//     chunk, as a damaged value is.
//   - Version 1 values (opaque frames, and every snapshot of stores written
//     before chunks) are read as they always were.
//
// # The store is derived, and can never stop the process
//
// Everything in the store is derived from the engine's log, which is the
// truth; the engine checks every value it reads against the log and can
// rebuild the store from it. The store is built so that no failure of its
// files (a damaged or missing file, ENOSPC or EIO on any read, write or
// sync) panics, kills or hangs the process. Pebble itself would: it calls
// Logger.Fatalf (which must not return) for a failed write or sync of its
// WAL or MANIFEST, on its own flush and compaction goroutines too, where
// no one can recover the panic; by default also for a corruption a read
// finds, and for a table whose size disagrees with the MANIFEST; it retries
// a failed flush at once, forever (so Close hung), and its WAL rotation
// mishandles a failed write ("sync: unlock of unlocked mutex"). So:
//
//   - Pebble runs without its own WAL (Options.DisableWAL): a commit writes
//     the memtable only, and Commit(true) flushes the memtable (a table, the
//     MANIFEST, their syncs). The engine records in each checkpoint which of
//     its generations the store holds, so a batch a crash loses is re-derived
//     at the next Open. No file is written on the commit path; WAL rotation
//     and WAL sync failures cannot happen.
//   - Pebble's filesystem is a fence (fence.go): the first failed create,
//     write, sync, rename, remove or directory sync is hidden from Pebble,
//     which therefore never calls Fatalf for it, and becomes the store's
//     sticky error; from then on nothing reaches the disk, so what is there
//     stays a state Pebble's crash recovery opens (written in Pebble's
//     order, syncs included, up to a point). The flush in progress ends, as
//     far as Pebble knows, successfully: no retry loop.
//   - DataCorruption and BackgroundError events fail the store instead of
//     calling Fatalf; table statistics (whose loader calls Fatalf on a size
//     mismatch) are off.
//   - A failed store is logged once (later errors are counted in
//     Stats.BackgroundErrors and logged at Debug), answers nothing more
//     (every call but Stats and Close returns its sticky error), and closes
//     Pebble in the background, which also ends any background work (a
//     compaction that keeps meeting a damaged table).
//   - A commit or flush that waits inside Pebble (for room in a full
//     memtable, or for a compaction when level 0 holds too many tables,
//     which never comes if compactions keep meeting a damaged table)
//     returns the store's failure as soon as there is one.
//   - Close returns within CloseTimeout (10 s) whatever Pebble does; a
//     Pebble that has not closed by then is abandoned, fenced.
//
// Not covered: an invariant violation inside Pebble (a bug of Pebble's,
// which its checksums keep damaged data from causing) still panics where
// it happens, as any bug would.
//
// These choices were weighed against two others: a Fatalf that parks the
// goroutine (it would hold Pebble's locks, hang Close and leak the store),
// and compactions run only from the caller's goroutine (Pebble's manual
// compactions run on its goroutines as well, and without automatic ones
// level 0 fills up and stops writes).
//
// # Guarantees
//
//   - Atomicity: a committed Batch is wholly present or wholly absent after
//     a crash (it is one Pebble batch, applied to the memtable at once; a
//     flush writes whole memtables).
//   - Durability: Commit(true) returns after the memtable, with this batch
//     and every one before it, is flushed and synced (table, MANIFEST); the
//     batches then survive any crash. Commit(false) may be lost in a crash,
//     and survives a clean Close (which flushes).
//   - Integrity: each snapshot value and chunk value carries a version byte
//     and a CRC-32C of its key and value, and a chunk's key names the
//     BLAKE3 of its bytes; a damaged, misplaced or missing value is
//     reported as ErrCorrupt naming the run and seq, never returned as
//     data. Decoding never panics on any input.
//   - Chunks: a chunk referenced by a snapshot is never deleted while the
//     snapshot is in the store. A commit deletes every chunk that only the
//     snapshots it deletes or replaces referenced, except one pinned by a
//     batch being built (which a Discard of that batch then leaves behind
//     until DeleteRun) and those of a run whose other snapshots it could
//     not read (a damaged value: the store is rebuilt anyway).
//   - Isolation of runs: run ids are length-prefixed, so the keys of one
//     run never interleave with another's ("a", "a b" and "ab" are three
//     separate ranges). Run ids follow the engine's rule (1 to MaxRunIDLen
//     bytes of UTF-8 without control characters); any other id given is
//     ErrInvalid, and a key holding one is ErrCorrupt.
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
//     one (bench/RESULTS-snapshot.md), against ~0.7 ms on vfs.NewMem: it is
//     file creation and fsyncs. The engine should open the store concurrently
//     with its WAL replay, or lazily, never on its restart path.
//     Stats().OpenDuration reports it.
//   - Positions are only as complete as the engine made them: Positions
//     returns ErrNotFound (naming the first missing seq) for atoms not yet
//     indexed, and the engine must then fall back to the log.
//   - DeleteRun removes snapshots, their chunks and positions, not engine
//     metadata.
//   - A plain PutSnapshot reads the store (a Get per chunk) and can fail as
//     a read can (ErrFailed, ErrClosed); a Commit that deletes or replaces
//     chunked snapshots reads the chunk lists of the run's other snapshots.
//     Both are for the background. Reading a chunked snapshot costs a Get
//     and a BLAKE3 per chunk, and allocates the frame's length, as claimed
//     by its checksummed value (at most MaxFrameSize), before the chunks
//     are read.
//   - The store holds each run's last plain frame put, the caller's bytes,
//     which must not change after PutSnapshot (frames of 64 KiB or more,
//     at most 32 MiB in all; dropped by DeleteRun and Close), so that the
//     next snapshot of the run cuts and hashes only what changed: memory
//     for CPU (chunkmemo.go).
//   - Stats.Snapshots counts snapshots, not chunks; DiskBytes includes the
//     chunks.
//   - Space of replaced and deleted snapshots (and their chunks) comes back
//     by compaction of their keyspaces (compact.go): in the background once
//     what was deleted since the last one is half of Pebble's files, and by
//     Close once it is a quarter of them (at least 64 KiB), so that a store
//     at rest holds about its live snapshots. Close then rewrites up to four
//     times the bytes deleted since the last compaction.
//   - The snapshot count in Stats is kept exact by a read per distinct
//     snapshot key at Commit (to tell a new snapshot from a replaced one);
//     Commit is meant for the background, not the commit path.
//   - An fsync error is final (invariant I8): the store fails (see above)
//     and stays failed until it is reopened; a batch whose Commit failed may
//     or may not be durable. A read error or corruption fails it the same
//     way: the caller falls back to what the store derives from.
//   - Reads of a failed store return its error, not the data it still has:
//     after a hidden write failure, Pebble's view and the disk differ.
//   - On a filesystem not rooted in vfs.Default (an in-memory or wrapped
//     one), file modes are whatever that filesystem does.
package snapshot
