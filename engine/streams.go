package engine

// Streams out of runs: the API (engine/doc.go, "Streams"), over package
// internal/stream, which holds the index of chunks; streamSource is the
// index's Source over the DB.

import (
	"context"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/internal/stream"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// ChunkStatus is how the attempt that appended a chunk ended, as the log
// says so far: ChunkOpen, then once ChunkCommitted, ChunkFailed or
// ChunkAbandoned.
type ChunkStatus = stream.Status

// The statuses of a chunk's attempt.
const (
	ChunkOpen      = stream.Open      // the attempt runs, or stopped and the log does not say so yet
	ChunkCommitted = stream.Committed // the atom committed with this attempt
	ChunkFailed    = stream.Failed    // the attempt failed (Atom.Fail)
	ChunkAbandoned = stream.Abandoned // the attempt stopped (a crash) and a later one ran, or the run ended
)

// StreamChunk is one chunk of a stream: its offset in the stream, the seq
// and attempt (from 1) of the atom that appended it, the attempt's status
// when read, and its data (the caller's).
type StreamChunk = stream.Chunk

// StreamInfo names a stream of a run and counts its durable chunks.
type StreamInfo = stream.Info

// StreamBatch is what ReadStream returns: chunks from the offset asked
// for, the offset to read from next, and whether the stream has ended
// (the run ended and every chunk was read).
type StreamBatch struct {
	Chunks []StreamChunk
	Next   uint64
	Ended  bool
}

const (
	// MaxChunkSize bounds a chunk's data, in bytes.
	MaxChunkSize = record.MaxChunkSize
	// MaxStreamNameLen bounds a stream's name, in bytes.
	MaxStreamNameLen = record.MaxStreamNameLen
)

// ErrBranchStream is returned by Append on an atom of Run.Branch: a
// branch streams nothing (it has no seq until it commits).
var ErrBranchStream = errors.New("engine: a branch appends to no stream")

// ErrInvalidStreamName is what the errors of a stream name that
// record.CheckStreamName refuses wrap.
var ErrInvalidStreamName = record.ErrInvalidStreamName

// streamsName is the store file whose presence says the log may hold
// stream chunks (stream.Streams.Used).
const streamsName = "STREAMS"

// Append appends chunk to stream name of the atom's run, while the atom
// runs, and returns its offset in the stream. The chunk names the atom's
// seq and attempt; readers see it, and it is durable, at the log's next
// group commit after Append returns (Append does not wait for it: see
// engine/doc.go, "Streams"; FlushStreams waits). A chunk lost in a crash
// was never read, and its offset goes to the next chunk appended. chunk
// is copied.
func (a *Atom) Append(ctx context.Context, name string, chunk []byte) (uint64, error) {
	r, db := a.run, a.run.db
	if err := db.checkOpen(); err != nil {
		return 0, err
	}
	if a.branch != nil {
		return 0, fmt.Errorf("%w: run %q branch %q", ErrBranchStream, r.id, a.branch.Name)
	}
	if err := record.CheckStreamName(name); err != nil {
		return 0, fmt.Errorf("engine: run %q seq %d: append: %w", r.id, a.seq, err)
	}
	if len(chunk) > MaxChunkSize {
		return 0, fmt.Errorf("%w: run %q seq %d: a chunk of %d bytes to stream %q, the limit is %d (engine.MaxChunkSize)",
			ErrTooLarge, r.id, a.seq, len(chunk), name, MaxChunkSize)
	}
	if err := db.streams.Mark(); err != nil {
		return 0, err
	}
	x := db.streams.Index()
	if err := r.lockIdle(ctx); err != nil {
		return 0, err
	}
	defer r.mu.Unlock()
	a.mu.Lock()
	done := a.mu.done || r.mu.atom != a
	a.mu.Unlock()
	if done {
		return 0, fmt.Errorf("%w: run %q seq %d", ErrAtomDone, r.id, a.seq)
	}
	attempt, err := db.streams.Attempt(a, r.id, a.seq)
	if err != nil {
		return 0, fmt.Errorf("engine: run %q seq %d: append to stream %q: %w", r.id, a.seq, name, err)
	}
	off, err := x.Append(r.id, name, a.seq, attempt, func(off uint64) (*wal.Waiter, error) {
		rec := record.AppendStreamChunkHeader(make([]byte, 0, 32+len(r.id)+len(name)+record.MaxSealOverhead+len(chunk)), r.id, a.seq, attempt, name, off)
		if db.sealer != nil {
			var err error
			if rec, err = db.sealer.SealChunk(rec, chunk, r.id, a.seq, attempt, name, off); err != nil {
				return nil, err
			}
		} else {
			rec = append(rec, chunk...)
		}
		w := db.log.AppendAsync(rec)
		select {
		case <-w.Done(): // refused at once (a failed log, a closed one)
			if _, err := w.Wait(ctx); err != nil {
				return nil, err
			}
		default:
		}
		db.noteAppended(len(rec))
		return w, nil
	})
	if err != nil {
		return 0, fmt.Errorf("engine: run %q seq %d: append to stream %q: %w", r.id, a.seq, name, err)
	}
	db.streams.Appended(a, r.id, name)
	if o, ok := a.obs.(StreamObserver); ok {
		o.ChunkAppended(StreamEvent{Stream: name, Offset: off, Attempt: attempt, Bytes: len(chunk)})
	}
	return off, nil
}

// FlushStreams waits until every chunk the atom appended is durable.
func (a *Atom) FlushStreams(ctx context.Context) error {
	w := a.run.db.streams.Last(a)
	if w == nil {
		return nil
	}
	_, err := w.Wait(ctx)
	return err
}

// StreamObserver is an AtomObserver that also wants the atom's chunks:
// an AtomObserver (Observer.AtomBegun's) that implements it is told of
// each chunk Append enqueued, synchronously, under the run's lock (return
// quickly; do not call the DB). It is apart from AtomObserver so that
// observers written before streams still compile.
type StreamObserver interface {
	ChunkAppended(StreamEvent)
}

// StreamEvent is one chunk an atom appended.
type StreamEvent struct {
	Stream  string
	Offset  uint64
	Attempt uint64
	Bytes   int // the chunk's data
}

// ReadStreamOptions tunes ReadStream; the zero value means the defaults.
type ReadStreamOptions struct {
	// Max bounds the chunks returned; 0 means 1000.
	Max int
	// MaxBytes bounds the data returned past the first chunk; 0 means 4 MiB.
	MaxBytes int
	// Wait makes ReadStream wait, until ctx ends, for at least one chunk
	// or the stream's end when there is none from the offset now.
	Wait bool
}

// ReadStream returns the durable chunks of stream name of the run from
// offset from, in offset order, each with the status of its attempt now.
// A reader that resumes from the Next of its last batch sees every chunk
// once, across its own crash and the writer's. A stream never appended to
// reads as empty (and as ended once the run has ended).
func (r *Run) ReadStream(ctx context.Context, name string, from uint64, opts *ReadStreamOptions) (StreamBatch, error) {
	db := r.db
	var o ReadStreamOptions
	if opts != nil {
		o = *opts
	}
	if o.Max <= 0 {
		o.Max = 1000
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 4 << 20
	}
	if err := record.CheckStreamName(name); err != nil {
		return StreamBatch{}, fmt.Errorf("engine: run %q: read stream: %w", r.id, err)
	}
	b, err := db.streams.Index().Follow(ctx, (*streamReader)(r), r.id, name, from, o.Max, o.MaxBytes, o.Wait)
	return StreamBatch{Chunks: b.Chunks, Next: b.Next, Ended: b.Ended}, err
}

// streamReader is a run as a read of its streams sees it (stream.Reader).
type streamReader Run

func (s *streamReader) Live() error {
	db := s.db
	if err := db.checkOpen(); err != nil {
		return err
	}
	db.mu.Lock()
	deleted := db.deletedLocked(s.id)
	db.mu.Unlock()
	if deleted {
		return fmt.Errorf("%w: run %q", ErrRunDeleted, s.id)
	}
	return nil
}

func (s *streamReader) Ended() bool                        { return (*Run)(s).Status() != StatusActive }
func (s *streamReader) Stopping() (<-chan struct{}, error) { return s.db.bg.stop, ErrClosed }

// Streams lists the run's streams that have durable chunks, by name.
func (r *Run) Streams(ctx context.Context) ([]StreamInfo, error) {
	if err := r.db.checkOpen(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r.db.streams.Index().Streams(r.id)
}

// The capability's hooks (hooks.go).

// streamCheck runs before an atom's record is written (stream.Streams.Check):
// the abandon record goes before the atom's in the one ordered log,
// durable with it or before it, harmless if the commit stops short.
func (db *DB) streamCheck(a *Atom) error {
	if a.branch != nil {
		return nil
	}
	return db.streams.Check(a, a.run.id, a.seq, func(upTo uint64) {
		db.log.AppendAsync(record.AppendStreamAbandon(nil, a.run.id, a.seq, upTo))
	})
}

// streamDone applies an atom's commit (at pos) or failure (failed) to the
// index.
func (db *DB) streamDone(a *Atom, seq uint64, pos wal.Pos, failed bool) {
	if a.branch != nil {
		return
	}
	db.streams.Done(a, a.run.id, seq, pos, failed)
}

// healStreamsMarker writes STREAMS if the log holds stream records (as
// Open's replay and the log scan found) and the store lacks it.
func (db *DB) healStreamsMarker() {
	wrote, err := db.streams.Heal()
	switch {
	case err != nil:
		db.logger.Warn("engine: the log holds stream records and STREAMS is missing; it could not be written", "file", db.path(streamsName), "err", err)
	case wrote:
		db.logger.Warn("engine: the log holds stream records and STREAMS was missing; written again", "file", db.path(streamsName))
	}
}

// streamSource is the DB as the stream index's Source.
type streamSource struct{ db *DB }

func (s streamSource) Scan(fn func(*record.Record) error) (wal.Pos, error) {
	db := s.db
	to := db.log.End()
	dec := &record.Decoder{Sealed: db.sealer != nil} // the chunks' data and atoms' bodies stay sealed: not needed
	dec.Skip = func(k record.Kind, _ []byte) bool {
		switch k {
		case record.KindStreamChunk, record.KindStreamAbandon, record.KindAtom, record.KindFail, record.KindEnd, record.KindDelete, record.KindErase:
			return false
		}
		return true
	}
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		return wal.Pos{}, fmt.Errorf("engine: streams: read the log: %w", err)
	}
	defer c.Close()
	for c.Next() {
		r := c.Record()
		if !r.Pos.Less(to) {
			break
		}
		if err := fn(r); err != nil {
			return wal.Pos{}, err
		}
	}
	return to, c.Err()
}

func (s streamSource) Data(pos wal.Pos) ([]byte, error) {
	db := s.db
	raw, err := db.log.ReadAt(pos)
	if err != nil {
		return nil, err
	}
	var r record.Record
	if err := db.decoder(false).Decode(raw, pos, db.segmentFile(pos.Segment), &r); err != nil {
		return nil, err
	}
	if r.Kind != record.KindStreamChunk {
		return nil, &CorruptionError{File: db.segmentFile(pos.Segment), Offset: pos.Offset, Reason: fmt.Sprintf("a %v record where the stream index has a chunk", r.Kind)}
	}
	if r.Erased {
		return nil, fmt.Errorf("%w: run %q: its key was erased", ErrRunDeleted, r.Run)
	}
	return append([]byte{}, r.Chunk...), nil
}
