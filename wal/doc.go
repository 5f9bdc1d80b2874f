// Package wal is CONTINUUM's write-ahead log: the commit point of every atom,
// intent and certificate. Records are appended by many goroutines at once; one
// writer at a time writes everything pending with one write and one fdatasync
// (group commit) and then acknowledges it. The writer is the owner goroutine,
// or an Append whose context has no Done channel that finds no group being
// written: it writes the pending group itself, its own record with it, which
// spares the two goroutine wake-ups of a hand-off to the owner and back (a
// mutex, held by whichever writes, guards the active segment). Restart reads
// the log back with a Reader from the engine's checkpoint.
//
// # Usage
//
//	l, err := wal.Open(dir, nil) // vfs.Default, segments growing to 64 MiB
//	pos, err := l.Append(ctx, rec)                  // durable when it returns
//	poss, err := l.AppendBatch(ctx, [][]byte{a, b}) // all or nothing
//	w := l.AppendAsync(rec)                         // enqueue now ...
//	poss, err = w.Wait(ctx)                         // ... wait later
//
//	r, err := l.NewReader(checkpoint)
//	for r.Next() {
//		apply(r.Pos(), r.Record()) // Record is valid until the next Next
//	}
//	if err := r.Err(); err != nil { ... } // *CorruptionError: where and why
//	r.Close()
//	l.RemoveBelow(checkpoint) // drop whole segments before the checkpoint
//	l.Compact(id, drop)       // rewrite a sealed segment without what drop removes
//	l.Close()
//
// # Layout
//
// The log is a directory of segment files (format.go has the byte
// layout). Every segment is zero-filled to its capacity before it is
// written: an fdatasync of a file whose blocks are already written does not
// have to update the file size or extent metadata, so it is cheaper than on
// a growing file, and an append can never run out of disk space inside a
// prepared segment. Capacities grow with the log, as etcd's file pipeline
// does: the first segment, and the one an Open must start, holds
// Options.InitialSegmentSize (MinPrealloc, 64 KiB, by default) or
// SegmentSize if smaller, and each next one twice its predecessor, up to
// SegmentSize (a batch that needs more gets a segment it fits in). A
// segment's capacity is its file's size. The next segment (the spare) is
// zero-filled in the background once the active one is half full; a
// brand-new log zero-fills its small first segment in Open. A log thus
// takes about twice what it holds while it is open (a new one 64 KiB);
// Close gives the prepared space back when the active segment has more
// room than the initial capacity (it truncates the segment to that room
// and removes the spare), so a closed log holds what it wrote, at most
// that much more, and a spare only when its active segment is nearly full. An Open
// needs at most the initial capacity in free space (none when it resumes
// the newest segment).
// A writable Open keeps appending to the newest segment, right after its
// last valid record, as long as it is unsealed and has room, so restarts
// add no segment. Records are framed with a length and a CRC32C that covers
// the header, the payload and the segment id; every record also carries the
// offset up to which its segment was durable when it was written (the
// synced mark). A full segment is closed with a seal record.
//
// # Crash safety, operation by operation
//
// The hardware is assumed to keep what fdatasync (or fsync of a directory)
// reported durable, and to make no promise about anything written since: such
// bytes may be lost, kept, or kept in any subset of blocks. Damage to durable
// bytes (bit flips) is detected, never repaired.
//
//   - Append, AppendBatch, AppendAsync: the commit point is the return of the
//     fdatasync that covers the write holding the record. Nothing is
//     acknowledged before it. A batch is framed so that recovery keeps it
//     whole or drops it whole, and it never spans two segments. Every
//     write starts at the durable end and is at most 512 KiB (a larger
//     group commit is written in pieces, each synced), so at any moment at
//     most 512 KiB lie written but not durable, right past durable data.
//   - Segment creation: the spare is zero-filled, fsynced, renamed into
//     place and the directory fsynced. To become segment N it gets its
//     header, an fdatasync, a rename to its final name and a directory
//     fsync: a segment's header is durable before its name is. Without a
//     spare (a new log's first segment, or a segment Open must start), the
//     file is written as its name plus .tmp, header and zeros, fsynced,
//     renamed and the directory fsynced; a rotation that finds no spare
//     does the same without the zeros.
//   - Rotation: the full segment gets a seal record and an fdatasync before
//     the next segment is activated, so every segment but the newest ends
//     with a durable seal.
//   - Close: after the last fdatasync, the active segment is truncated to
//     the initial capacity past its last record and the spare removed
//     (unless the segment had no more room than that), without a sync: what they give back is zeros past every durable
//     record, so a crash that loses either leaves a log that opens the
//     same way. A log whose fsync failed is closed as it is.
//   - RemoveBelow: removes whole sealed segments, then fsyncs the directory.
//   - Compact (compact.go): rewrites a sealed segment, never the newest,
//     without the records its caller drops, every other record at its
//     position: the new file is written as the segment's name plus .tmp
//     and fsynced, then renamed over the segment (the commit point) and
//     the directory fsynced. A crash before the rename leaves the segment
//     as it was and a .tmp that a writable Open removes; after it, the
//     compacted segment reads the same kept records at the same
//     positions. A compacted newest segment at Open is corruption (the
//     segments after it are missing).
//   - Open (recovery): the segment ids must be contiguous and the newest
//     segment's header valid; a sealed segment is only stat'ed (a file
//     shorter than a header is corruption), its header checked when it is
//     first opened for reading. The newest segment is scanned record by
//     record (from Options.ScanFrom when that is a record start in it),
//     never by file size. The first record that is not valid ends the scan:
//   - an all-zero header is the end of the written data;
//   - a record cut short by the end of the file, or whose header or checksum
//     does not verify, is a torn write, unless a later valid record's synced
//     mark shows that the bad one had been made durable: that is corruption,
//     reported as a *CorruptionError with segment, file, offset and reason (I7).
//     A torn write takes its whole batch with it; the trimmed bytes and
//     records are counted in RecoveryInfo and logged. In a sealed segment,
//     anything but valid records up to the seal is corruption (reported by
//     the Reader that meets it).
//   - Open (resume): a writable Open appends to the unsealed newest segment
//     at its tail. Whatever a crash left past the tail (a torn record, the
//     rest of an unfinished batch, blocks of a write that never became
//     durable, possibly whole valid records behind a lost block) must never
//     be read as part of the log, yet a new record could end exactly where
//     such a stale record starts. So Open zeroes it first: the owner never
//     has more than 512 KiB written but not durable, past an offset that was
//     durable, so every stale byte lies within 512 KiB of where the scan
//     stopped; Open reads that window, zeroes from the tail to the last
//     nonzero byte and fdatasyncs (the window first, then an unfinished
//     batch between the tail and the scan's stop, each with its own
//     fdatasync, so that a crash while zeroing leaves what survives within
//     the next scan's window). A torn batch larger than the window is
//     trimmed the old way instead: a seal record at the tail, synced, and a
//     new segment. A clean tail is resumed with no write and one fdatasync:
//     the scan may have read records that are only in the page cache (a
//     process killed between a write and its fdatasync), and the log's
//     readers are about to rely on them, so they must survive a power loss
//     that follows; with nothing dirty it costs a device cache flush. The
//     flush is skipped when Options.ScanFromDurable vouches that everything
//     before ScanFrom was durable and the scan found nothing past it (no
//     record, no stale byte in the window): then there is nothing to make
//     durable (the engine's CHECKPOINT gives such a hint).
//     If the segment holds no record yet, the directory is synced too (its
//     name may date from a rename just before a crash). Options.AtRest
//     (the engine's clean-close mark: the last process closed the log and
//     every write of it succeeded) vouches that the whole directory is
//     durable: then neither the flush nor the directory sync is made, only
//     stale bytes past the tail are zeroed and synced. A sealed newest
//     segment is synced before its successor is created, for the same
//     reason; a newest segment without room for a minimal record is sealed
//     at its tail and a new one begins.
//   - Synced marks after a resume: the first records written carry the
//     tail itself as their synced mark, never more, and the tail is durable
//     by then (Open's fdatasync, or the durable hint). A later recovery reports a bad record at x
//     as corruption only if a valid record's mark is greater than x; marks
//     at or below the tail never vouch for the zeroed region or for the
//     first write over it (which may be torn), and any mark beyond belongs
//     to a write issued after the bytes below it were durable. So neither
//     the trimmed region nor a torn first write after resuming can be
//     mistaken for durable corruption.
//   - Open with DeferWrites: the recovery above, read-only (nothing is
//     trimmed, zeroed, created or removed, and records can be read), until
//     StartWriting does the writable part. A caller that must validate
//     what the log holds before it changes it (the engine: a refused Open
//     leaves the store as it found it) opens it so. With ReadDamaged too, a
//     newest segment that is corrupt (not torn) does not fail Open: the
//     records before the damage can be read and RecoveryInfo.Damage says
//     where; such a log never becomes writable. ScanAfter reads the valid
//     records after a damaged one (for reports: which run a damage hits).
//   - Write or fdatasync failure: the error is sticky (I8). Every waiting and
//     later append fails with it (it wraps the original: errors.Is(err,
//     syscall.ENOSPC) works, and it names the segment); the log must be
//     closed and reopened, which recovers from what is on disk. Nothing
//     acknowledged is lost, since acknowledged bytes were durable before the
//     failure.
//   - Replication (Options.Replicate): called after a group's fdatasync,
//     before its appends return and before readers see it. Its error is
//     sticky like a sync error: the group is durable here but not
//     acknowledged, and the replica may or may not hold it. A reopened log
//     holds the group; a replicated store is reopened from its replica,
//     which is the truth (package replicate).
//
// # Caveats
//
//   - A bit flip inside the last group commit before a crash cannot be told
//     from a torn write: no later record vouches for it, so it is trimmed
//     (and counted) like one. The same holds for any damage with NoSync.
//   - An all-zero block in the newest segment is read as the end of the log;
//     the hardware is assumed never to zero durable blocks.
//   - Sealed segments are verified when read, not at Open, to keep restart
//     cheap: Open does not even open them (one stat each). A damaged sealed
//     header is reported by the first read of that segment, at its offset 0.
//   - Creating a log costs a zero-fill of its initial capacity in Open. A segment or
//     spare whose creation fails (a full disk) is removed at once, and a
//     crash's leftover .tmp by the next writable Open. A rotation that
//     finds no spare ready (its background
//     preparation failed or is late) writes a growing file, whose
//     fdatasyncs cost more until the next rotation.
//   - With vfs.MemFS keep SegmentSize small: every segment is really
//     zero-filled, in memory too.
//   - A group commit larger than 512 KiB is written in 512 KiB pieces, each
//     followed by an fdatasync (the bound that keeps Open's window small).
//   - Stale bytes are looked for only within 512 KiB of the scan's stop: a
//     log last written by a build without that bound, after a crash inside
//     a larger group commit, could keep a stale record out of reach.
//   - NoSync is unsafe: a machine crash loses acknowledged records, and,
//     since nothing bounds what is unsynced, may even leave stale records
//     that a later session's appends make readable.
//   - Open takes no lock on the directory: one process at a time (the engine
//     locks the store).
//   - Files are created 0600, and directories 0700, on the operating
//     system's filesystem (internal/durable; a mode that cannot be set
//     fails the creation); other vfs.FS implementations decide their own
//     permissions.
package wal
