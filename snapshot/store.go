package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/privfs"
)

// Defaults of Options' zero fields.
const (
	DefaultCacheSize    = 8 << 20
	DefaultMemTableSize = 4 << 20
)

// formatMajorVersion pins Pebble's on-disk format for new stores, so that an
// upgrade of Pebble never changes it silently. (It includes WAL sync chunks,
// which let Pebble tell a torn WAL tail from corruption.)
const formatMajorVersion = pebble.FormatTableFormatV6

// Options configure Open. The zero value (or a nil *Options) means defaults,
// given field by field.
type Options struct {
	// FS is the filesystem; nil means vfs.Default (the operating system's).
	// On a filesystem rooted in vfs.Default, the store's files are created
	// 0600 and its directories 0700.
	FS vfs.FS
	// ReadOnly opens the store for reading only: every write returns
	// ErrReadOnly, and the directory must exist.
	ReadOnly bool
	// CacheSize is the size of Pebble's block cache in bytes; 0 means
	// DefaultCacheSize (8 MiB). Negative is invalid.
	CacheSize int64
	// MemTableSize is the size of Pebble's memtable in bytes; 0 means
	// DefaultMemTableSize (4 MiB). It must be under 4 GiB.
	MemTableSize uint64
	// Logger receives Pebble's log lines (informational ones at Debug,
	// errors at Error); nil means slog.Default().
	Logger *slog.Logger
}

// validate returns a copy of o with defaults applied, or why o is invalid.
func (o *Options) validate() (Options, error) {
	var v Options
	if o != nil {
		v = *o
	}
	if v.FS == nil {
		v.FS = vfs.Default
	}
	if v.CacheSize < 0 {
		return v, fmt.Errorf("%w: Options.CacheSize %d is negative", ErrInvalid, v.CacheSize)
	}
	if v.CacheSize == 0 {
		v.CacheSize = DefaultCacheSize
	}
	if v.MemTableSize == 0 {
		v.MemTableSize = DefaultMemTableSize
	}
	if v.MemTableSize >= 4<<30 {
		return v, fmt.Errorf("%w: Options.MemTableSize %d is not under 4 GiB", ErrInvalid, v.MemTableSize)
	}
	if v.Logger == nil {
		v.Logger = slog.Default()
	}
	return v, nil
}

// Store is the snapshot store of one engine store: snapshots, the atom
// position index and engine metadata, in one Pebble database. It is safe for
// concurrent use. One process at a time may open a store (Pebble holds a file
// lock on its directory).
type Store struct {
	db       *pebble.DB
	dir      string
	readOnly bool

	// commitMu serializes writes: the read-modify-write of the snapshot count
	// in Batch.Commit and DeleteRun happens under it, so snapshots (below)
	// and the count key in Pebble agree after every commit.
	commitMu sync.Mutex

	// mu guards closed. Every call holds it shared while it uses db, so Close
	// (which holds it exclusively) waits for calls in flight and no call
	// touches db after Close.
	mu struct {
		sync.RWMutex
		closed bool
	}

	// failed is the sticky error (wrapping ErrFailed) of a write that Pebble
	// could not complete; once set, writes return it. Set under commitMu.
	failed atomic.Pointer[error]

	// snapshots is the number of snapshots in the store, as kept under
	// keyCount. Written under commitMu; read atomically by Stats.
	snapshots atomic.Int64

	// Counters since Open, for Stats.
	batches          atomic.Uint64
	snapshotsWritten atomic.Uint64
	positionsWritten atomic.Uint64
	bytesCommitted   atomic.Uint64
	backgroundErrors atomic.Uint64
	openDuration     time.Duration
}

// Stats describe a Store. Getting them is cheap: no scan of the data.
type Stats struct {
	// Snapshots is the number of snapshots in the store.
	Snapshots int64
	// DiskBytes is the space Pebble's files take on disk.
	DiskBytes uint64
	// Batches, SnapshotsWritten, PositionsWritten and BytesCommitted count
	// what was committed since Open.
	Batches          uint64
	SnapshotsWritten uint64
	PositionsWritten uint64
	BytesCommitted   uint64
	// BackgroundErrors counts the errors Pebble reported from its background
	// work (flushes, compactions) since Open; they are also logged.
	BackgroundErrors uint64
	// OpenDuration is how long Open took.
	OpenDuration time.Duration
	// Closed reports whether Close was called.
	Closed bool
	// Failed is the store's sticky error (wrapping ErrFailed) after a write
	// Pebble could not complete, or nil.
	Failed error
}

// Open opens the store in dir, the Pebble directory (the engine passes
// <store>/snapshots), creating it with mode 0700 unless opts.ReadOnly. A nil
// opts means defaults. Open checks the store's format marker and fails with
// an error wrapping ErrCorrupt if it is not this package's.
func Open(dir string, opts *Options) (*Store, error) {
	start := time.Now()
	o, err := opts.validate()
	if err != nil {
		return nil, err
	}
	fs := privfs.Wrap(o.FS)
	// Pebble creates dir (and missing parents) and fsyncs the parents, so
	// that the directory entries survive a crash; privfs makes them 0700.
	s := &Store{dir: dir, readOnly: o.ReadOnly}
	cache := pebble.NewCache(o.CacheSize)
	defer cache.Unref()
	logger := pebbleLogger{l: o.Logger}
	popts := &pebble.Options{
		FS:                 fs,
		Cache:              cache,
		MemTableSize:       o.MemTableSize,
		Logger:             logger,
		ReadOnly:           o.ReadOnly,
		FormatMajorVersion: formatMajorVersion,
		EventListener: &pebble.EventListener{
			BackgroundError: func(err error) {
				s.backgroundErrors.Add(1)
				logger.Errorf("background error in %s: %v", dir, err)
			},
		},
	}
	db, err := openPebble(dir, popts)
	if err != nil {
		return nil, pebbleErr("opening "+dir, err)
	}
	s.db = db
	if err := s.checkFormat(); err != nil {
		db.Close()
		return nil, err
	}
	n, err := s.loadCount()
	if err != nil {
		db.Close()
		return nil, err
	}
	s.snapshots.Store(n)
	s.openDuration = time.Since(start)
	return s, nil
}

// pebbleErr wraps an error from Pebble with what was being done, and with
// ErrCorrupt as well when Pebble found corruption, so that callers can tell
// damaged data (errors.Is(err, ErrCorrupt)) from an I/O failure or a lock.
func pebbleErr(doing string, err error) error {
	if pebble.IsCorruptionError(err) {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, doing, err)
	}
	return fmt.Errorf("snapshot: %s: %w", doing, err)
}

// pebbleFailure converts what Pebble panics with on a failure it deems
// unrecoverable (a fatal error logged through pebbleLogger.Fatalf, or an
// fsync error, which Pebble panics with as an error value) into an error
// wrapping ErrFailed. Anything else (a runtime error, a non-error value) is
// a bug and keeps panicking.
func pebbleFailure(r any) error {
	if _, ok := r.(runtime.Error); ok {
		panic(r)
	}
	err, ok := r.(error)
	if !ok {
		panic(r)
	}
	return fmt.Errorf("%w: %v", ErrFailed, err)
}

// openPebble opens Pebble, turning a Pebble failure panic on this goroutine
// (such as a failed MANIFEST or directory sync) into an error wrapping
// ErrFailed. Pebble's Open releases what it acquired before it re-panics.
func openPebble(dir string, o *pebble.Options) (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, pebbleFailure(r)
		}
	}()
	return pebble.Open(dir, o)
}

// checkFormat verifies the format marker, writing it into a new store.
func (s *Store) checkFormat() error {
	want := append([]byte(formatMagic), FormatVersion)
	val, closer, err := s.db.Get(keyFormat)
	switch {
	case err == nil:
		defer closer.Close()
		if len(val) == len(want) && bytes.Equal(val[:4], want[:4]) && val[4] > FormatVersion {
			return fmt.Errorf("%w: %s: store format version %d, this package reads up to %d", ErrNewerFormat, s.dir, val[4], FormatVersion)
		}
		if !bytes.Equal(val, want) {
			return fmt.Errorf("%w: %s: format marker is %q, want %q", ErrCorrupt, s.dir, val, want)
		}
		return nil
	case errors.Is(err, pebble.ErrNotFound):
	default:
		return fmt.Errorf("snapshot: %s: reading the format marker: %w", s.dir, err)
	}
	// No marker: the store must be empty (new).
	it, err := s.db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("snapshot: %s: %w", s.dir, err)
	}
	nonEmpty := it.First()
	var firstKey []byte
	if nonEmpty {
		firstKey = append(firstKey, it.Key()...)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return fmt.Errorf("snapshot: %s: %w", s.dir, err)
	}
	if nonEmpty {
		return fmt.Errorf("%w: %s: no format marker, but the store holds key %q: not a snapshot store", ErrCorrupt, s.dir, firstKey)
	}
	if s.readOnly {
		return nil
	}
	// Through apply, which turns Pebble's fatal-error panic on a failed
	// write or sync into ErrFailed instead of killing the process.
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Set(keyFormat, want, nil); err != nil {
		return fmt.Errorf("snapshot: %s: writing the format marker: %w", s.dir, err)
	}
	if err := s.apply(b, pebble.Sync); err != nil {
		return fmt.Errorf("snapshot: %s: writing the format marker: %w", s.dir, err)
	}
	return nil
}

func (s *Store) loadCount() (int64, error) {
	val, closer, err := s.db.Get(keyCount)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("snapshot: %s: reading the snapshot count: %w", s.dir, err)
	}
	defer closer.Close()
	if len(val) != 8 || binary.BigEndian.Uint64(val) > 1<<62 {
		return 0, fmt.Errorf("%w: %s: snapshot count value %x is not a valid count", ErrCorrupt, s.dir, val)
	}
	return int64(binary.BigEndian.Uint64(val)), nil
}

// acquire holds s.mu shared for a call; release with s.mu.RUnlock.
func (s *Store) acquire() error {
	s.mu.RLock()
	if s.mu.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// AtOrBelow returns the run's snapshot with the greatest Seq <= seq, or an
// error wrapping ErrNotFound if it has none.
func (s *Store) AtOrBelow(runID string, seq uint64) (*Snapshot, error) {
	if err := validRunID(runID); err != nil {
		return nil, err
	}
	lo, _ := runBounds(spaceSnapshot, runID)
	_, hi := seqBounds(spaceSnapshot, runID, 0, seq)
	snap, err := s.last(lo, hi)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: run %q has no snapshot at or below seq %d", ErrNotFound, runID, seq)
	}
	return snap, err
}

// Latest returns the run's snapshot with the greatest Seq, or an error
// wrapping ErrNotFound if it has none.
func (s *Store) Latest(runID string) (*Snapshot, error) {
	if err := validRunID(runID); err != nil {
		return nil, err
	}
	snap, err := s.last(runBounds(spaceSnapshot, runID))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: run %q has no snapshot", ErrNotFound, runID)
	}
	return snap, err
}

// last decodes the last snapshot in [lo, hi).
func (s *Store) last(lo, hi []byte) (*Snapshot, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, pebbleErr("reading snapshots", err)
	}
	var snap *Snapshot
	found := it.Last()
	if found {
		var val []byte
		val, err = it.ValueAndErr()
		if err == nil {
			snap, err = DecodeSnapshot(it.Key(), val)
		}
	}
	if ierr := errors.Join(it.Error(), it.Close()); ierr != nil && err == nil {
		err = pebbleErr("reading snapshots", ierr)
	}
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrNotFound
	}
	return snap, nil
}

// Snapshots returns the seqs of the run's snapshots in ascending order (nil
// if it has none). It reads every key of the run's snapshots: it is meant for
// inspection and statistics, not for a hot path.
func (s *Store) Snapshots(runID string) ([]uint64, error) {
	if err := validRunID(runID); err != nil {
		return nil, err
	}
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	lo, hi := runBounds(spaceSnapshot, runID)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	var seqs []uint64
	for valid := it.First(); valid; valid = it.Next() {
		run, seq, perr := parseRunKey(spaceSnapshot, it.Key())
		if perr == nil && run != runID {
			perr = fmt.Errorf("%w: key %q of run %q inside the range of run %q", ErrCorrupt, it.Key(), run, runID)
		}
		if perr != nil {
			it.Close()
			return nil, perr
		}
		seqs = append(seqs, seq)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, pebbleErr(fmt.Sprintf("listing run %q", runID), err)
	}
	return seqs, nil
}

// Positions returns the log positions of the run's atoms from..to inclusive,
// one per seq. If any is missing, the error wraps ErrNotFound and names the
// first missing seq. from > to is an error wrapping ErrInvalid.
func (s *Store) Positions(runID string, from, to uint64) ([]Pos, error) {
	if err := validRunID(runID); err != nil {
		return nil, err
	}
	if from > to {
		return nil, fmt.Errorf("%w: run %q: positions from seq %d to %d: empty range", ErrInvalid, runID, from, to)
	}
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	lo, hi := seqBounds(spacePosition, runID, from, to)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	out := make([]Pos, 0, min(to-from+1, 1024))
	next := from
	var ferr error
	for valid := it.First(); valid && ferr == nil; valid = it.Next() {
		run, seq, perr := parseRunKey(spacePosition, it.Key())
		switch {
		case perr != nil:
			ferr = perr
		case run != runID:
			ferr = fmt.Errorf("%w: key %q of run %q inside the range of run %q", ErrCorrupt, it.Key(), run, runID)
		case seq != next:
			ferr = fmt.Errorf("%w: run %q has no position for seq %d", ErrNotFound, runID, next)
		default:
			val, verr := it.ValueAndErr()
			if verr != nil {
				ferr = fmt.Errorf("snapshot: run %q seq %d: %w", runID, seq, verr)
				break
			}
			p, derr := decodePos(runID, seq, val)
			if derr != nil {
				ferr = derr
				break
			}
			out = append(out, p)
			next++
		}
	}
	if ierr := errors.Join(it.Error(), it.Close()); ierr != nil && ferr == nil {
		ferr = pebbleErr(fmt.Sprintf("reading positions of run %q", runID), ierr)
	}
	if ferr != nil {
		return nil, ferr
	}
	// The seqs read are from, from+1, ..., next-1 with none skipped; the range
	// is whole when the last one read is to. (next itself may have wrapped
	// past math.MaxUint64, and to-from+1 may have too.)
	if len(out) == 0 || next-1 != to {
		return nil, fmt.Errorf("%w: run %q has no position for seq %d", ErrNotFound, runID, next)
	}
	return out, nil
}

// Meta returns the value of the engine metadata key, or an error wrapping
// ErrNotFound. The returned slice belongs to the caller.
func (s *Store) Meta(key string) ([]byte, error) {
	if err := validMetaKey(key); err != nil {
		return nil, err
	}
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	val, closer, err := s.db.Get(append([]byte{spaceMeta}, key...))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("%w: meta key %q", ErrNotFound, key)
	}
	if err != nil {
		return nil, pebbleErr(fmt.Sprintf("meta key %q", key), err)
	}
	defer closer.Close()
	return append([]byte{}, val...), nil
}

// DeleteRun removes the run's snapshots and positions in one synced batch.
// Engine metadata (PutMeta) is left alone. Deleting a run with nothing
// stored is not an error.
func (s *Store) DeleteRun(runID string) error {
	if err := validRunID(runID); err != nil {
		return err
	}
	if s.readOnly {
		return ErrReadOnly
	}
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	if f := s.failed.Load(); f != nil {
		return *f
	}

	lo, hi := runBounds(spaceSnapshot, runID)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("snapshot: deleting run %q: %w", runID, err)
	}
	var n int64
	for valid := it.First(); valid; valid = it.Next() {
		n++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return fmt.Errorf("snapshot: deleting run %q: %w", runID, err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	plo, phi := runBounds(spacePosition, runID)
	if err := errors.Join(
		b.DeleteRange(lo, hi, nil),
		b.DeleteRange(plo, phi, nil),
		setCount(b, s.snapshots.Load()-n),
	); err != nil {
		return fmt.Errorf("snapshot: deleting run %q: %w", runID, err)
	}
	if err := s.apply(b, pebble.Sync); err != nil {
		return fmt.Errorf("snapshot: deleting run %q: %w", runID, err)
	}
	s.snapshots.Add(-n)
	return nil
}

// apply commits pb to Pebble, turning a Pebble failure panic on this
// goroutine (a failed WAL write or sync, a failed directory sync when the WAL
// rotates) into the store's sticky ErrFailed. The caller holds commitMu.
func (s *Store) apply(pb *pebble.Batch, opts *pebble.WriteOptions) (err error) {
	if f := s.failed.Load(); f != nil {
		return *f
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: %w", s.dir, pebbleFailure(r))
			s.failed.Store(&err)
		}
	}()
	return pb.Commit(opts)
}

func setCount(b *pebble.Batch, n int64) error {
	return b.Set(keyCount, binary.BigEndian.AppendUint64(nil, uint64(n)), nil)
}

// Stats returns the store's statistics.
func (s *Store) Stats() Stats {
	st := Stats{
		Snapshots:        s.snapshots.Load(),
		Batches:          s.batches.Load(),
		SnapshotsWritten: s.snapshotsWritten.Load(),
		PositionsWritten: s.positionsWritten.Load(),
		BytesCommitted:   s.bytesCommitted.Load(),
		BackgroundErrors: s.backgroundErrors.Load(),
		OpenDuration:     s.openDuration,
	}
	if f := s.failed.Load(); f != nil {
		st.Failed = *f
	}
	if s.acquire() != nil {
		st.Closed = true
		return st
	}
	defer s.mu.RUnlock()
	st.DiskBytes = s.db.Metrics().DiskSpaceUsage()
	return st
}

// Close flushes nothing extra (every Commit already went through Pebble's
// WAL) and closes the store, waiting for calls in flight. Calls after Close
// return ErrClosed; a second Close returns ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	s.mu.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("snapshot: closing %s: %w", s.dir, err)
	}
	return nil
}
