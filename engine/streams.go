package engine

// Streams out of runs (docs/DESIGN.md, "Streams of a run") over
// internal/stream.

import (
	"context"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/internal/stream"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// ChunkStatus is how the attempt that appended a chunk ended, so far.
type ChunkStatus = stream.Status

// The statuses of a chunk's attempt.
const (
	ChunkOpen      = stream.Open      // the attempt runs, or stopped and the log does not say so yet
	ChunkCommitted = stream.Committed // the atom committed with this attempt
	ChunkFailed    = stream.Failed    // the attempt failed (Atom.Fail)
	ChunkAbandoned = stream.Abandoned // the attempt stopped (a crash) and a later one ran, or the run ended
)

// StreamChunk is one chunk of a stream (stream.Chunk).
type StreamChunk = stream.Chunk

// StreamInfo names a stream of a run and counts its durable chunks.
type StreamInfo = stream.Info

// StreamBatch is what ReadStream returns: chunks, the offset to read
// next, and whether the stream ended (the run ended, every chunk read).
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

// ErrInvalidStreamName is wrapped by the errors of a bad stream name.
var ErrInvalidStreamName = record.ErrInvalidStreamName

// streamsName is the store file whose presence says the log may hold
// stream chunks (stream.Streams.Used).
const streamsName = "STREAMS"

// Append appends chunk (copied) to stream name of the running atom's run
// and returns its offset; durable and readable at the next group commit
// (FlushStreams). Errors: ErrBranchStream, ErrInvalidStreamName,
// ErrTooLarge (over MaxChunkSize), ErrAtomDone.
func (a *Atom) Append(ctx context.Context, name string, chunk []byte) (uint64, error) {
	r, db := a.run, a.run.db
	if err := db.checkOpen(); err != nil {
		return 0, err
	}
	if a.branch != nil {
		return 0, fmt.Errorf("%w: run %q branch %q", ErrBranchStream, r.id, a.branch.Name)
	}
	return db.streams.Append(ctx, (*liveAtom)(a), r.id, a.seq, name, chunk, ErrTooLarge, db.sealer, db.streamLog())
}

// FlushStreams waits until every chunk the atom appended is durable.
func (a *Atom) FlushStreams(ctx context.Context) error {
	w := a.run.db.streams.Last((*liveAtom)(a))
	if w == nil {
		return nil
	}
	_, err := w.Wait(ctx)
	return err
}

// StreamObserver, implemented by an AtomObserver, is told of each chunk
// Append enqueued, under the run's lock (return quickly; no DB calls).
type StreamObserver interface {
	ChunkAppended(StreamEvent)
}

// Appended tells the atom's observer (a StreamObserver) of a chunk
// appended (stream.Atom; Lock and Unlock are messages.go's).
func (x *liveAtom) Appended(name string, off, attempt uint64, n int) {
	if o, ok := x.obs.(StreamObserver); ok {
		o.ChunkAppended(StreamEvent{Stream: name, Offset: off, Attempt: attempt, Bytes: n})
	}
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

// ReadStream returns the durable chunks of stream name from offset from,
// each with its attempt's status; resumed from Next, every chunk once.
func (r *Run) ReadStream(ctx context.Context, name string, from uint64, opts *ReadStreamOptions) (StreamBatch, error) {
	var o ReadStreamOptions
	if opts != nil {
		o = *opts
	}
	b, err := r.db.streams.Index().Follow(ctx, (*streamReader)(r), r.id, name, from, o.Max, o.MaxBytes, o.Wait)
	return StreamBatch{Chunks: b.Chunks, Next: b.Next, Ended: b.Ended}, err
}

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

// streamReader is a run as a read of its streams sees it (stream.Reader).
type streamReader Run

func (s *streamReader) Live() error {
	if err := s.db.checkOpen(); err != nil {
		return err
	}
	s.db.mu.Lock()
	deleted := s.db.deletedLocked(s.id)
	s.db.mu.Unlock()
	if deleted {
		return fmt.Errorf("%w: run %q", ErrRunDeleted, s.id)
	}
	return nil
}

func (s *streamReader) Ended() bool                        { return (*Run)(s).Status() != StatusActive }
func (s *streamReader) Stopping() (<-chan struct{}, error) { return s.db.bg.stop, ErrClosed }

// streamCheck is the check hook (stream.Streams.Check).
func (db *DB) streamCheck(a *Atom) error {
	if a.branch != nil {
		return nil
	}
	return db.streams.Check((*liveAtom)(a), a.run.id, a.seq, db.log)
}

// streamDone applies an atom's commit (at pos) or failure to the index.
func (db *DB) streamDone(a *Atom, seq uint64, pos wal.Pos, failed bool) {
	if a.branch == nil {
		db.streams.Done((*liveAtom)(a), a.run.id, seq, pos, failed)
	}
}

// healStreamsMarker is stream.Streams.Heal.
func (db *DB) healStreamsMarker() { db.streams.Heal(db.logger) }

// streamLog is the log as the stream capability reads and appends to it.
func (db *DB) streamLog() stream.LogSource {
	return stream.LogSource{Log: db.log, File: db.segmentFile, Decoder: func() *record.Decoder { return db.decoder(false) },
		Sealed: db.sealer != nil, ErrDeleted: ErrRunDeleted, Counted: db.noteAppended}
}
