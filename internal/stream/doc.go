// Package stream holds the streams out of runs (engine/doc.go, "Streams"):
// the chunks (tokens, progress) an atom appends to a named stream of its
// run while it works, before it commits, read by offset and followed at
// the tail. Each chunk is a record of the log (record.KindStreamChunk);
// an Index keeps, per run and stream, where each chunk is and the status
// of the attempt that appended it, and hands out chunks by offset. It is
// derived from the log alone: built lazily, on first use after Open, by
// one scan of the log (Source.Scan), then kept up to date by the engine's
// hooks. It knows nothing of runs' locks or frames: package engine
// conducts it (engine/streams.go) and reads the log for it.
//
// # The engine's bookkeeping
//
// Streams is what the engine keeps of the capability, over one Index:
// the Index made on first use, whether the log may hold chunks (a marker
// file written before the store's first chunk, so that a store that
// never streamed never loads the index on a commit), and each atom in
// flight that appended a chunk (by a key the engine gives it: its
// attempt, its last append's Waiter). The engine calls, whole:
//
//	NewStreams(func() Source, fs, marker, noSync) *Streams // the Source made on the Index's first use
//	(*Streams).Index() *Index; Used() bool; Mark() error // Mark before an atom's first chunk
//	(*Streams).Seen(); Heal(logger)                      // the log holds streams; write a missing marker
//	(*Streams).Append(ctx, a, run, seq, name, chunk, tooLarge, sealer, Log) (off, error) // Atom.Append: CheckChunk, Mark, then Write under a.Lock
//	CheckChunk(run, seq, name, n, tooLarge) error         // Append's checks of a chunk
//	(*Streams).Write(ctx, key, run, seq, name, chunk, sealer, Log) (off, attempt, error) // under the run's lock
//	(*Streams).Attempt(key, run, seq) (uint64, error)    // under the run's lock, before Index.Append
//	(*Streams).Appended(key, run, name); Last(key)       // the last append's Waiter (Atom.FlushStreams)
//	(*Streams).Check(key, run, seq, Enqueuer) error      // before an atom's record: the abandon record enqueued, if due
//	(*Streams).Done(key, run, seq, pos, failed)          // the atom's record or fail record is durable
//	(*Streams).Gone(kind, run)                           // a run's end or deletion
//
// # The interface
//
// What the engine implements for the Index (its adapter over the DB):
//
//	type Source interface {
//		// Scan calls fn with each durable stream chunk, stream abandon,
//		// atom, fail, end, delete and erase record of the log, in the
//		// log's order (chunks' data may be left sealed), and returns
//		// the log position it read up to.
//		Scan(fn func(*record.Record) error) (wal.Pos, error)
//		// Data returns the data of the chunk record at pos (opened, in
//		// an encrypted store). The caller owns it.
//		Data(pos wal.Pos) ([]byte, error)
//	}
//
// LogSource is that Source over the log's files and decoder the engine
// hands it, and the Log Write appends a chunk's record through:
//
//	type Log interface {
//		AppendAsync(rec []byte) *wal.Waiter // enqueue
//		Appended(n int)                     // count the bytes appended
//	}
//
// an Enqueuer (the *wal.Log) Check enqueues an abandon record to; the
// atom in flight Append appends for, which is also the key the Streams
// keep its attempt under (the engine hands the same value to Last, Check
// and Done):
//
//	type Atom interface {
//		Lock(ctx context.Context) error // the run's lock, or why the atom appends no more
//		Unlock()
//		Appended(name string, off, attempt uint64, n int) // under the lock: the observer
//	}
//
// and, for a read that follows a stream at its tail, over one run:
//
//	type Reader interface {
//		Live() error                        // nil while the store is open and the run not deleted
//		Ended() bool                        // the run's end is durable
//		Stopping() (<-chan struct{}, error) // closed when the store closes; the read's error then
//	}
//
// What the engine calls, whole. Lock order: the run's lock, then the
// Index's; a Source's methods are called without the Index's lock.
//
//	(*Index).Load() error                         // build the index now (else on first use); sticky error
//	(*Index).NextAttempt(run, seq) (uint64, error) // the attempt number of an atom's first chunk
//	(*Index).Append(run, stream, seq, attempt, write) (offset, error) // write enqueues the record at offset
//	(*Index).Abandoning(run, seq) (attempt, bool, error)// before a commit that appended nothing: attempts to mark
//	(*Index).Abandoned(run, seq, attempt)         // that abandon record is enqueued
//	(*Index).Committed(run, seq, attempt, pos)    // the atom's record is durable at pos
//	(*Index).Failed(run, seq)                     // the atom's fail record is durable
//	(*Index).Gone(kind, run)                      // the run ended (KindEnd) or was deleted
//	(*Index).Read(run, stream, from, max, maxBytes) (Batch, error) // what is durable from offset from
//	(*Index).Follow(ctx, rd, run, stream, from, max, maxBytes, wait) // Read, waiting at the tail (Run.ReadStream; 0: defaults)
//	(*Index).Status(run, seq, attempt) Status
//	(*Index).Streams(run) []Info
//	(*Index).LastWaiter(run, stream) *wal.Waiter   // the last chunk's append, if not durable yet
//
// A Checker (verify) is fed every record in the log's order and says
// where the log breaks a rule of streams.
//
// # Guarantees
//
//   - Offsets are the log's: the chunks of one stream of a run have
//     offsets 0, 1, 2, ... in log order, the record holds its offset, and
//     Append assigns it and enqueues the record under the Index's lock,
//     so offset order is log order.
//   - Read returns only durable chunks (their record's append completed):
//     a chunk lost in a crash was never read, and its offset goes to the
//     next chunk appended after the restart. A reader that resumes from
//     the offset after the last chunk it read sees no gap and no repeat,
//     after its own crash or the writer's.
//   - Each chunk names its atom's seq and attempt; the attempt's Status is
//     Open until the log says how it ended: Committed (the atom record of
//     that attempt), Failed (a fail record), Abandoned (a later attempt
//     of the same seq appended, an abandon record, or the run ended). A
//     status moves once, away from Open.
//   - A load failure (the log unreadable) is sticky.
//
// # Caveats
//
// The index is in memory: 40-odd bytes per chunk of every live run (the
// data stays in the log). The first use after Open scans the whole log.
// Chunks are kept while their run is (retention reclaims them with a
// deleted run's records; erasure makes their data unreadable with the
// run's key). A chunk is durable at the group commit after its append,
// not when Append returns: see engine/doc.go, "Streams".
package stream
