package stream

// The engine's log as the capability reads and writes it: a chunk's
// record built and enqueued (Streams.Write), and LogSource, the Source of
// a store over its log.

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Enqueuer is the engine's log (a *wal.Log) as Check enqueues an
// abandon record to it.
type Enqueuer interface {
	// AppendAsync enqueues recs and returns their Waiter.
	AppendAsync(recs ...[]byte) *wal.Waiter
}

// Log is the engine's log as Write appends chunks to it.
type Log interface {
	// AppendAsync enqueues rec and returns its Waiter.
	AppendAsync(rec []byte) *wal.Waiter
	// Appended counts n bytes appended to the log.
	Appended(n int)
}

// CheckChunk says why a chunk of n bytes to stream name cannot be
// appended by run's seq, or nil; tooLarge is the error a chunk over
// record.MaxChunkSize wraps.
func CheckChunk(run string, seq uint64, name string, n int, tooLarge error) error {
	if err := record.CheckStreamName(name); err != nil {
		return fmt.Errorf("engine: run %q seq %d: append: %w", run, seq, err)
	}
	if n > record.MaxChunkSize {
		return fmt.Errorf("%w: run %q seq %d: a chunk of %d bytes to stream %q, the limit is %d (engine.MaxChunkSize)",
			tooLarge, run, seq, n, name, record.MaxChunkSize)
	}
	return nil
}

// Atom is an atom in flight as Append appends for it (the engine's
// adapter over its atom). It is also the key Streams keep the atom's
// attempt and last append under: the engine hands the same value to
// Last, Check and Done.
type Atom interface {
	// Lock takes the atom's run's lock, waiting until ctx ends, and says
	// why the atom appends no more (the lock then not held), or nil.
	Lock(ctx context.Context) error
	// Unlock releases the run's lock.
	Unlock()
	// Appended is told of each chunk Append enqueued, under the run's
	// lock (the observer): its stream, offset, attempt and data's length.
	Appended(name string, off, attempt uint64, n int)
}

// Append is Atom.Append of a, run's seq, in its order: the chunk's checks
// (CheckChunk; tooLarge is the error a chunk too large wraps), the marker
// written before the store's first chunk (Mark), then, under the run's
// lock (a.Lock), the chunk's record written (Write, sealed by sealer
// unless nil, to log) and a told (a.Appended). It returns the chunk's
// offset.
func (s *Streams) Append(ctx context.Context, a Atom, run string, seq uint64, name string, chunk []byte, tooLarge error, sealer *record.Sealer, log Log) (uint64, error) {
	if err := CheckChunk(run, seq, name, len(chunk), tooLarge); err != nil {
		return 0, err
	}
	if err := s.Mark(); err != nil {
		return 0, err
	}
	if err := a.Lock(ctx); err != nil {
		return 0, err
	}
	defer a.Unlock()
	off, attempt, err := s.Write(ctx, a, run, seq, name, chunk, sealer, log)
	if err != nil {
		return 0, err
	}
	a.Appended(name, off, attempt, len(chunk))
	return off, nil
}

// Write appends chunk (copied) to stream name of run as the atom key's
// (run's seq) next chunk: its attempt (Attempt), its record at the
// stream's next offset, sealed by sealer unless nil, enqueued to log, and
// noted as the atom's last append (Appended). It returns the chunk's
// offset and attempt. A record the log refuses at once (a failed or
// closed log) fails it with the log's error (ctx bounds that wait). The
// caller holds the run's lock and checked the chunk (CheckChunk).
func (s *Streams) Write(ctx context.Context, key any, run string, seq uint64, name string, chunk []byte, sealer *record.Sealer, log Log) (off, attempt uint64, err error) {
	if attempt, err = s.Attempt(key, run, seq); err == nil {
		off, err = s.Index().Append(run, name, seq, attempt, func(off uint64) (*wal.Waiter, error) {
			rec := record.AppendStreamChunkHeader(make([]byte, 0, 32+len(run)+len(name)+record.MaxSealOverhead+len(chunk)), run, seq, attempt, name, off)
			if sealer != nil {
				var err error
				if rec, err = sealer.SealChunk(rec, chunk, run, seq, attempt, name, off); err != nil {
					return nil, err
				}
			} else {
				rec = append(rec, chunk...)
			}
			w := log.AppendAsync(rec)
			select {
			case <-w.Done(): // refused at once (a failed log, a closed one)
				if _, err := w.Wait(ctx); err != nil {
					return nil, err
				}
			default:
			}
			log.Appended(len(rec))
			return w, nil
		})
	}
	if err != nil {
		return 0, 0, fmt.Errorf("engine: run %q seq %d: append to stream %q: %w", run, seq, name, err)
	}
	s.Appended(key, run, name)
	return off, attempt, nil
}

// LogSource is the Source of a store over its log, and the Log Write
// appends to: its segments' names File, its records decoded by Decoder
// (without the ledger's records) for a chunk's data; Sealed says the
// store seals its records (a scan leaves them sealed); ErrDeleted is what
// the data of an erased run's chunk fails with; Counted, if set, counts
// the bytes appended.
type LogSource struct {
	Log        *wal.Log
	File       func(seg uint64) string
	Decoder    func() *record.Decoder
	Sealed     bool
	ErrDeleted error
	Counted    func(n int)
}

var (
	_ Source = LogSource{}
	_ Log    = LogSource{}
)

// AppendAsync implements Log.
func (s LogSource) AppendAsync(rec []byte) *wal.Waiter { return s.Log.AppendAsync(rec) }

// Appended implements Log.
func (s LogSource) Appended(n int) {
	if s.Counted != nil {
		s.Counted(n)
	}
}

// Scan implements Source: the records up to the log's end when it starts.
func (s LogSource) Scan(fn func(*record.Record) error) (wal.Pos, error) {
	to := s.Log.End()
	dec := &record.Decoder{Sealed: s.Sealed} // the chunks' data and atoms' bodies stay sealed: not needed
	dec.Skip = func(k record.Kind, _ []byte) bool {
		switch k {
		case record.KindStreamChunk, record.KindStreamAbandon, record.KindAtom, record.KindFail, record.KindEnd, record.KindDelete, record.KindErase:
			return false
		}
		return true
	}
	c, err := record.NewCursor(s.Log, s.File, wal.Pos{}, dec)
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

// Data implements Source.
func (s LogSource) Data(pos wal.Pos) ([]byte, error) {
	raw, err := s.Log.ReadAt(pos)
	if err != nil {
		return nil, err
	}
	var r record.Record
	if err := s.Decoder().Decode(raw, pos, s.File(pos.Segment), &r); err != nil {
		return nil, err
	}
	if r.Kind != record.KindStreamChunk {
		return nil, &record.CorruptionError{File: s.File(pos.Segment), Offset: pos.Offset, Reason: fmt.Sprintf("a %v record where the stream index has a chunk", r.Kind)}
	}
	if r.Erased {
		return nil, fmt.Errorf("%w: run %q: its key was erased", s.ErrDeleted, r.Run)
	}
	return append([]byte{}, r.Chunk...), nil
}
