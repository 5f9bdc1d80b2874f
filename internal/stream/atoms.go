package stream

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Streams is the engine's state of the capability (doc.go, "The
// engine's bookkeeping"): the Index, made on first use; whether the
// store's log may hold chunks (its marker file); and the attempt and
// last append of each atom in flight that appended a chunk, by the key
// the engine gives the atom.
type Streams struct {
	src    func() Source
	fs     vfs.FS
	marker string
	noSync bool

	once  sync.Once
	index *Index // set by once
	// used: 0 not known yet, 1 the store has no marker file, 2 it has
	// (or the log holds a stream record: seen).
	used atomic.Int32
	seen atomic.Bool
	mu   sync.Mutex
	// atoms holds the attempt number of each running atom that appended
	// a chunk, and its last append's Waiter. Guarded by mu.
	atoms map[any]*atomState
}

type atomState struct {
	attempt uint64      // immutable
	last    *wal.Waiter // guarded by Streams.mu
}

// NewStreams returns the state of a store whose Index reads the Source
// src returns (called once, on the Index's first use: a LogSource over
// the log then open) and whose marker file, written before its first
// chunk, is marker in fs.
func NewStreams(src func() Source, fs vfs.FS, marker string, noSync bool) *Streams {
	return &Streams{src: src, fs: fs, marker: marker, noSync: noSync}
}

// Index returns the index, made on first use (loaded on its own first
// use).
func (s *Streams) Index() *Index {
	s.once.Do(func() { s.index = New(s.src()) })
	return s.index
}

// Used says whether the log may hold chunks: the store has its marker
// file, or Mark made it. A store that never streamed never loads the
// index on a commit.
func (s *Streams) Used() bool {
	switch s.used.Load() {
	case 1:
		return false
	case 2:
		return true
	}
	_, err := s.fs.Stat(s.marker)
	used := err == nil
	if used {
		s.used.Store(2)
	} else {
		s.used.CompareAndSwap(0, 1)
	}
	return used
}

// Seen says that the log holds a stream record (Open's replay or the log
// scan met one): Used is true from now on, whatever the marker file says,
// and Heal writes the marker if it is missing. The marker is derived from
// the log (I9): it only spares a store that never streamed a scan.
func (s *Streams) Seen() {
	s.seen.Store(true)
	s.used.Store(2)
}

// Heal writes the marker file if the log holds a stream record (Seen)
// and the store lacks it, and logs to logger that it was missing (and
// whether writing it failed).
func (s *Streams) Heal(logger *slog.Logger) {
	if !s.seen.Load() {
		return
	}
	if _, err := s.fs.Stat(s.marker); err == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writeMarker(); err != nil {
		logger.Warn("engine: the log holds stream records and STREAMS is missing; it could not be written", "file", s.marker, "err", err)
		return
	}
	logger.Warn("engine: the log holds stream records and STREAMS was missing; written again", "file", s.marker)
}

func (s *Streams) writeMarker() error {
	if err := layout.WriteFileAtomic(s.fs, s.marker, []byte("this store's log holds stream chunks (engine/streams.go)\n"), s.noSync); err != nil {
		return fmt.Errorf("engine: write %s: %w", s.marker, err)
	}
	return nil
}

// Mark writes the marker file, durably, before the store's first chunk.
func (s *Streams) Mark() error {
	if s.Used() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used.Load() == 2 {
		return nil
	}
	if err := s.writeMarker(); err != nil {
		return err
	}
	s.used.Store(2)
	return nil
}

// Attempt returns the attempt number of the atom key (run's seq) for its
// chunks: the one its first chunk took, or, for its first, the index's
// next. The caller holds the run's lock.
func (s *Streams) Attempt(key any, run string, seq uint64) (uint64, error) {
	s.mu.Lock()
	as := s.atoms[key]
	s.mu.Unlock()
	if as != nil {
		return as.attempt, nil
	}
	n, err := s.Index().NextAttempt(run, seq)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	if s.atoms == nil {
		s.atoms = map[any]*atomState{}
	}
	s.atoms[key] = &atomState{attempt: n}
	s.mu.Unlock()
	return n, nil
}

// Appended notes the atom key's last chunk, in stream name of run: its
// append's Waiter, for Flush.
func (s *Streams) Appended(key any, run, name string) {
	last := s.Index().LastWaiter(run, name)
	s.mu.Lock()
	if as := s.atoms[key]; as != nil {
		as.last = last
	}
	s.mu.Unlock()
}

// Last returns the Waiter of the atom key's last append, nil if it
// appended nothing.
func (s *Streams) Last(key any) *wal.Waiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	if as := s.atoms[key]; as != nil {
		return as.last
	}
	return nil
}

// Check runs before the atom key's record (run's seq) is written: an atom
// that appended no chunk, of a seq whose earlier attempts did and are
// open (they crashed), first enqueues to log an abandon record of the
// attempts up to the last, so that the log says its commit is not
// theirs.
func (s *Streams) Check(key any, run string, seq uint64, log Enqueuer) error {
	s.mu.Lock()
	as := s.atoms[key]
	s.mu.Unlock()
	if as != nil || !s.Used() {
		return nil
	}
	x := s.Index()
	upTo, ok, err := x.Abandoning(run, seq)
	if err != nil {
		return fmt.Errorf("engine: run %q seq %d: %w", run, seq, err)
	}
	if ok {
		log.AppendAsync(record.AppendStreamAbandon(nil, run, seq, upTo))
		x.Abandoned(run, seq, upTo)
	}
	return nil
}

// Done applies the atom key's commit (as seq, at pos) or its failure
// (failed) to the index, and forgets the atom.
func (s *Streams) Done(key any, run string, seq uint64, pos wal.Pos, failed bool) {
	s.mu.Lock()
	as := s.atoms[key]
	delete(s.atoms, key)
	s.mu.Unlock()
	if as == nil && !s.Used() {
		return
	}
	x := s.Index()
	if failed {
		x.Failed(run, seq)
		return
	}
	var attempt uint64
	if as != nil {
		attempt = as.attempt
	}
	x.Committed(run, seq, attempt, pos)
}

// Gone applies a run's end or deletion record (kind) to the index, if the
// log may hold chunks.
func (s *Streams) Gone(kind record.Kind, run string) {
	if s.Used() {
		s.Index().Gone(kind, run)
	}
}
