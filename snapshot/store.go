package snapshot

import (
	"bytes"
	"context"
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
	logger   *slog.Logger
	fence    *fenceFS

	// commitMu serializes writes: the read-modify-write of the snapshot count
	// in Batch.Commit and DeleteRun happens under it, so snapshots (below)
	// and the count key in Pebble agree after every commit.
	commitMu sync.Mutex

	// mu guards closed and down. Every call holds it shared while it uses
	// db, so that shutting Pebble down (which holds it exclusively to set
	// down) waits for calls in flight, and no call touches db afterwards.
	mu struct {
		sync.RWMutex
		closed bool // Close was called
		down   bool // Pebble is closing or closed: by Close, or after a failure
	}

	// failed is the sticky error (wrapping ErrFailed, and ErrCorrupt when it
	// is damage) of the first failure; once set, every call but Stats and
	// Close returns it. failedCh is closed when it is set.
	failed   atomic.Pointer[error]
	failedCh chan struct{}

	// pebbleOnce closes db once, in the background (closePebble);
	// pebbleClosed is closed when that close returns, with pebbleErr set.
	pebbleOnce   sync.Once
	pebbleClosed chan struct{}
	pebbleErr    error

	// snapshots is the number of snapshots in the store, as kept under
	// keyCount. Written under commitMu; read atomically by Stats.
	snapshots atomic.Int64

	// pins counts, per chunk key, the batches being built whose snapshots
	// reference that chunk, found in the store (chunkstore.go). A commit
	// deletes no pinned chunk; Batch.Commit holds pins from choosing the
	// chunks it deletes until its batch is in Pebble.
	pins struct {
		sync.Mutex
		m map[string]int
	}

	// memo keeps the chunking of each run's last plain snapshot put, for
	// the next one's (chunkmemo.go); dropped with the run's snapshots.
	memo chunkMemos

	// dirty is set by a commit not yet flushed, for Close.
	dirty atomic.Bool

	// deadBytes counts the bytes of the snapshots (and chunks) deleted or
	// replaced since the last compaction (compact.go); compacting is set while one runs.
	// stop ends a compaction's wait; cancel is called by Close and by a
	// failure.
	deadBytes  atomic.Int64
	chunksDead atomic.Bool // chunks were deleted since the last compaction
	compacting atomic.Bool
	stop       context.Context
	cancel     context.CancelFunc

	// inflight counts the goroutines inside a Pebble write (apply, flush)
	// that their caller may have stopped waiting for: Pebble is closed only
	// after they return (Pebble must not be closed under a write: its
	// memtable's memory is freed). Added to only with mu held shared.
	inflight sync.WaitGroup

	// Counters since Open, for Stats.
	batches          atomic.Uint64
	snapshotsWritten atomic.Uint64
	positionsWritten atomic.Uint64
	bytesCommitted   atomic.Uint64
	backgroundErrors atomic.Uint64
	compactions      atomic.Uint64
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
	// work (flushes, compactions) or as data corruption since Open. The
	// first one fails the store and is logged; later ones are only counted.
	BackgroundErrors uint64
	// Compactions counts the compactions of replaced snapshots started
	// since Open (see compact.go).
	Compactions uint64
	// OpenDuration is how long Open took.
	OpenDuration time.Duration
	// Closed reports whether Close was called.
	Closed bool
	// Failed is the store's sticky error, or nil: it wraps ErrFailed, and
	// ErrCorrupt too when the failure was damage (Pebble found corruption,
	// or the caller reported a value that disagrees with its source, Fail).
	Failed error
}

// Open opens the store in dir, the Pebble directory (the engine passes
// <store>/snapshots), creating it with mode 0700 unless opts.ReadOnly. A nil
// opts means defaults. Open checks the store's format marker and fails with
// an error wrapping ErrCorrupt if it is not this package's. A write that
// fails while Pebble opens makes Open fail with an error wrapping ErrFailed.
func Open(dir string, opts *Options) (*Store, error) {
	start := time.Now()
	o, err := opts.validate()
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, readOnly: o.ReadOnly, logger: o.Logger,
		failedCh: make(chan struct{}), pebbleClosed: make(chan struct{})}
	s.stop, s.cancel = context.WithCancel(context.Background())
	// Pebble creates dir (and missing parents) and fsyncs the parents, so
	// that the directory entries survive a crash; privfs makes them 0700.
	// The fence keeps every write failure from Pebble (see fenceFS).
	s.fence = newFenceFS(privfs.Wrap(o.FS), func(err error) { s.fail(err) })
	cache := pebble.NewCache(o.CacheSize)
	defer cache.Unref()
	logger := pebbleLogger{l: o.Logger, quiet: s.isFailed}
	popts := &pebble.Options{
		FS:                 s.fence,
		Cache:              cache,
		MemTableSize:       o.MemTableSize,
		Logger:             logger,
		ReadOnly:           o.ReadOnly,
		FormatMajorVersion: formatMajorVersion,
		// No WAL of Pebble's own: every batch goes to the memtable only, and
		// a synced Commit flushes it (see Batch.Commit). What the store holds
		// is derived from the engine's log, and the engine's checkpoint
		// records which of its generations the store holds, so a batch lost
		// in a crash is re-derived; in exchange nothing on the commit path
		// writes a file, and Pebble's WAL rotation and WAL sync failures
		// (fatal in Pebble) cannot happen.
		DisableWAL: true,
		// Table statistics are loaded on a goroutine of Pebble's that calls
		// Fatalf when a table's size disagrees with its MANIFEST (a
		// truncated file): they are only a compaction heuristic here.
		DisableTableStats: true,
		EventListener: &pebble.EventListener{
			BackgroundError: func(err error) { s.fail(err) },
			// Pebble's default for a corruption found by a read is Fatalf.
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				s.fail(fmt.Errorf("%w: %s", ErrCorrupt, info))
			},
		},
	}
	db, err := openPebble(dir, popts)
	if err != nil {
		return nil, pebbleErr("opening "+dir, err)
	}
	// Under mu: a failure while Pebble opened may be shutting it down.
	s.mu.Lock()
	s.db = db
	s.mu.Unlock()
	if err := s.Err(); err != nil {
		s.abandonOpen()
		return nil, fmt.Errorf("snapshot: opening %s: %w", dir, err)
	}
	if err := s.checkFormat(); err != nil {
		s.abandonOpen()
		return nil, err
	}
	n, err := s.loadCount()
	if err != nil {
		s.abandonOpen()
		return nil, err
	}
	if err := s.Err(); err != nil {
		s.abandonOpen()
		return nil, fmt.Errorf("snapshot: opening %s: %w", dir, err)
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
	b := s.db.NewBatch() // commit closes it
	if err := b.Set(keyFormat, want, nil); err != nil {
		b.Close()
		return fmt.Errorf("snapshot: %s: writing the format marker: %w", s.dir, err)
	}
	if err := s.commit(b, true); err != nil {
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

// acquire holds s.mu shared for a call; release with s.mu.RUnlock. A
// closed or failed store is not acquired: the error says why.
func (s *Store) acquire() error {
	s.mu.RLock()
	if s.mu.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	if err := s.Err(); err != nil || s.mu.down {
		s.mu.RUnlock()
		if err == nil {
			err = ErrClosed
		}
		return err
	}
	return nil
}

// readErr makes err, met reading from Pebble, the store's failure if it is
// one (anything but ErrNotFound and a bad argument), and returns the
// store's sticky error then (which wraps ErrCorrupt if err did), or err.
func (s *Store) readErr(err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid) {
		return err
	}
	s.fail(err)
	return s.Err()
}

// DeleteRun removes the run's snapshots, their chunks and its positions in
// one synced batch.
// Engine metadata (PutMeta) is left alone. Deleting a run with nothing
// stored is not an error.
func (s *Store) DeleteRun(runID string) error {
	if err := validRunID(runID); err != nil {
		return err
	}
	if s.readOnly {
		return ErrReadOnly
	}
	s.memo.drop(runID)
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
	b := s.db.NewBatch() // commit closes it
	plo, phi := runBounds(spacePosition, runID)
	clo, chi := chunkBounds(runID)
	if err := errors.Join(
		b.DeleteRange(lo, hi, nil),
		b.DeleteRange(clo, chi, nil),
		b.DeleteRange(plo, phi, nil),
		setCount(b, s.snapshots.Load()-n),
	); err != nil {
		b.Close()
		return fmt.Errorf("snapshot: deleting run %q: %w", runID, err)
	}
	if err := s.commit(b, true); err != nil {
		return fmt.Errorf("snapshot: deleting run %q: %w", runID, err)
	}
	s.snapshots.Add(-n)
	return nil
}

// commit writes pb into Pebble's memtable and, with sync, flushes the
// memtable, which makes pb and everything committed before it durable
// (Pebble has no WAL here: see Open). It closes pb. The caller holds
// commitMu and has acquired s.
func (s *Store) commit(pb *pebble.Batch, sync bool) error {
	if err := s.apply(pb); err != nil {
		return err
	}
	s.dirty.Store(true)
	if !sync {
		return nil
	}
	return s.flush()
}

// apply commits pb to Pebble and closes it, turning a Pebble failure panic
// into the store's sticky ErrFailed. With Pebble's WAL disabled a commit
// writes no file, but it can wait inside Pebble: a full memtable waits for
// a flush, too many tables at level 0 for a compaction, and a compaction
// that keeps failing (a damaged table) would make it wait forever. So the
// commit runs on a goroutine of its own, and apply returns at once when the
// store fails meanwhile; pb is then closed when Pebble lets go of it (or
// never, if Pebble never does: the store is abandoned, see CloseTimeout).
func (s *Store) apply(pb *pebble.Batch) error {
	if err := s.Err(); err != nil {
		pb.Close()
		return err
	}
	done := make(chan error, 1)
	s.inflight.Add(1)
	go func() {
		defer s.inflight.Done()
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = pebbleFailure(r)
				}
			}()
			err = pb.Commit(pebble.NoSync)
		}()
		pb.Close()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			s.fail(err)
			return s.Err()
		}
		return nil
	case <-s.failedCh:
		return s.Err()
	}
}

// flush writes Pebble's memtable to a table and syncs it and the MANIFEST.
// It returns once that is done, or at once when the store fails meanwhile:
// the flush then runs against the fence and ends on its own, or, when it
// waits inside Pebble for a compaction that keeps failing, never (the store
// is abandoned, see CloseTimeout). The caller has acquired s.
func (s *Store) flush() error {
	s.dirty.Store(false)
	type started struct {
		done <-chan struct{}
		err  error
	}
	ch := make(chan started, 1)
	s.inflight.Add(1)
	go func() {
		defer s.inflight.Done()
		done, err := s.db.AsyncFlush() // may wait for room in Pebble
		ch <- started{done, err}
	}()
	var done <-chan struct{}
	select {
	case st := <-ch:
		if st.err != nil {
			s.fail(st.err)
			return s.Err()
		}
		done = st.done
	case <-s.failedCh:
		return s.Err()
	}
	select {
	case <-done:
	case <-s.failedCh:
	}
	// A failure the fence hid from Pebble during the flush is the store's.
	return s.Err()
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
		Compactions:      s.compactions.Load(),
		OpenDuration:     s.openDuration,
		Failed:           s.Err(),
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	st.Closed = s.mu.closed
	if !s.mu.closed && !s.mu.down && st.Failed == nil {
		st.DiskBytes = s.db.Metrics().DiskSpaceUsage()
	}
	return st
}

// Close makes what was committed durable (it flushes Pebble's memtable, as
// a synced Commit does), compacts the snapshots replaced or deleted since
// the last compaction when they are a quarter of Pebble's files or more
// (compactAtClose), closes the store and waits for calls in flight.
// It returns within about CloseTimeout whatever Pebble does. Calls after
// Close return ErrClosed; a second Close returns ErrClosed. Closing a failed
// store flushes nothing and returns nil (its failure is Stats.Failed).
func (s *Store) Close() error {
	s.cancel() // a compaction in progress lets go of s.mu
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.mu.closed = true
	s.memo.clear()
	var ferr error
	if !s.mu.down && !s.readOnly && s.Err() == nil && s.dirty.Load() {
		s.commitMu.Lock()
		ferr = s.flush()
		s.commitMu.Unlock()
	}
	if !s.mu.down && !s.readOnly && s.Err() == nil && ferr == nil {
		s.compactAtClose()
	}
	s.mu.down = true
	failed := s.Err() != nil
	s.mu.Unlock()
	err := s.waitPebble()
	if failed {
		// Its failure is in Stats and was logged; so was an abandonment.
		if err != nil {
			s.logger.Debug("snapshot: closing a failed store", "dir", s.dir, "err", err)
		}
		return nil
	}
	if ferr != nil {
		return fmt.Errorf("snapshot: closing %s: %w", s.dir, ferr)
	}
	return err
}
