package wal

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The Log, its options, Open and Close, and what the log reports about
// itself. The writer (group commit, the owner goroutine, sticky errors) is
// in writer.go, Open's recovery in recovery.go, reading in reader.go,
// segment files in segment.go and the byte layout in format.go.

// Options configures a Log. The zero value is the default for every field.
type Options struct {
	// FS is the filesystem holding the log; nil means vfs.Default (the
	// operating system's).
	FS vfs.FS
	// SegmentSize is the largest capacity of a segment file; 0 means
	// DefaultSegmentSize (64 MiB). It must lie in [MinSegmentSize,
	// MaxSegmentSize] and be a multiple of RecordAlign. Segments start at
	// InitialSegmentSize and double up to it (see the package
	// documentation).
	SegmentSize int64
	// InitialSegmentSize is the capacity of a new log's first segment, and
	// of the segment a writable Open starts when it cannot resume the
	// newest one; 0 means MinPrealloc (64 KiB). It must be a multiple of
	// 4 KiB, at least MinSegmentSize; a value above SegmentSize means
	// SegmentSize. A larger one saves a few rotations while the log is
	// young, for as much more disk and zero-filling in Open.
	InitialSegmentSize int64
	// NoSync skips fdatasync: an append returns once its write reached the
	// operating system. UNSAFE: a machine crash loses acknowledged records.
	// Only for tests and benchmarks.
	NoSync bool
	// MinSyncInterval, if positive, spaces group commits at least this far
	// apart so that each fdatasync carries more records (throughput-bound
	// users). 0 syncs as soon as anything is pending; an idle log never
	// waits.
	MinSyncInterval time.Duration
	// ReadOnly opens the log for reading only: recovery reports a torn tail
	// but trims nothing, and nothing is created, renamed, removed or written.
	ReadOnly bool
	// DeferWrites opens the log like ReadOnly (recovery writes, creates,
	// trims and removes nothing; records can be read) until StartWriting,
	// which then does what a writable Open does: trims a torn tail,
	// activates a segment and starts accepting appends. A caller that
	// validates what the log holds before it changes anything (the engine,
	// whose refused Open must leave the store as it found it) opens it so.
	DeferWrites bool
	// ReadDamaged, with ReadOnly or DeferWrites, opens a log whose newest
	// segment is corrupt (not torn) instead of failing: RecoveryInfo.Damage
	// says where, and the records before the damage can be read, so that a
	// caller can say whose records the damage reaches. Such a log never
	// becomes writable (StartWriting fails with the damage).
	ReadDamaged bool
	// ScanFrom hints that the records before it were validated earlier (the
	// engine passes its checkpoint). If it is a record start in the newest
	// segment, or its end (End() at an earlier close), the recovery scan
	// starts there; otherwise the newest segment is scanned from its start.
	// It must be a position this log returned (a record's Pos, NextPos or
	// End): a hint inside a record's payload could be mistaken for the end
	// of the data. The zero Pos scans the whole newest segment.
	ScanFrom Pos
	// ScanFromDurable asserts that every record before ScanFrom was durable
	// (fdatasynced) when the hint was taken, as the engine's checkpoint
	// guarantees: it names only positions the log had reported durable.
	// When the recovery scan then finds nothing at all past ScanFrom (the
	// log was closed, or its process died, with nothing written after the
	// hint), resuming the newest segment skips its fdatasync: the page
	// cache holds nothing there that the disk does not. Anything found past
	// the hint, a record or a stale byte, is synced as without it.
	ScanFromDurable bool
	// AtRest asserts that everything in the log directory is durable: the
	// segments' bytes, their sizes and their names. That holds when the
	// last process to write the log closed it, every write and fsync of it
	// succeeded, and nothing has written since (the engine knows it from
	// its clean-close mark). A writable Open then resumes the newest
	// segment with no fdatasync and, when that segment holds no record
	// yet, no directory fsync: there is nothing in the page cache that the
	// disk lacks. Stale bytes past the tail are still zeroed and synced. A
	// false assertion loses, at a power loss, what the page cache held and
	// the disk did not: the records of a process that died before their
	// fdatasync, which this one would then have read as the log.
	AtRest bool
	// Logger receives recovery reports and background errors; nil discards.
	Logger *slog.Logger
	// OnGroupCommit, if set, is called once for every group commit once it
	// is durable, before its appends return, on the goroutine that owns the
	// log: it must return quickly and must not call the Log (the next
	// group waits for it).
	OnGroupCommit func(GroupCommit)
	// Replicate, if set, is called for every group commit once its records
	// are durable here and before its appends return (and before readers
	// see them), on the goroutine that owns the log, with the records of
	// each append of the group in order: appends[i] is the i-th append's
	// batch, whole. Its error fails every append of the group, none of
	// which is then acknowledged, and is final for the log like an fsync
	// error (I8): the records are durable here but the replica may or may
	// not hold them, so no later record may follow them. The slices are
	// the writers' and valid only during the call: a replicator that
	// keeps them copies. The next group waits for it; group commit
	// gathers the appends that arrive meanwhile into that next group.
	Replicate func(appends [][][]byte) error
}

// Pos is the position of a record: its segment and the byte offset where it
// starts. Positions are comparable with == and ordered by Less. The zero Pos
// means "the very beginning of the log".
type Pos struct {
	Segment uint64
	Offset  int64
}

// Less reports whether p comes before q in the log.
func (p Pos) Less(q Pos) bool {
	return p.Segment < q.Segment || (p.Segment == q.Segment && p.Offset < q.Offset)
}

func (p Pos) String() string { return string(p.AppendTo(nil)) }

// AppendTo appends p as String writes it: readers that name the position
// of every record they read use it without fmt.
func (p Pos) AppendTo(b []byte) []byte {
	b = strconv.AppendUint(b, p.Segment, 10)
	b = append(b, ':')
	return strconv.AppendInt(b, p.Offset, 10)
}

// RecoveryInfo is what Open found.
type RecoveryInfo struct {
	Segments    int    // segment files found
	Newest      uint64 // id of the newest segment found (0 if none)
	ScanFrom    Pos    // where the tail scan started
	Tail        Pos    // end of the valid records of the newest segment
	Records     int64  // complete records scanned from ScanFrom to Tail
	TornBytes   int64  // bytes past Tail that were trimmed (or found, in ReadOnly)
	TornRecords int    // records past Tail that were trimmed (or found): the incomplete one and the rest of its batch
	Sealed      bool   // the newest segment was already sealed
	Resumed     bool   // a writable Open kept appending in the newest segment, at Tail
	ZeroedBytes int64  // bytes past Tail that a writable Open zeroed before resuming there
	// Damage is the corruption the scan of the newest segment met, when the
	// log was opened with ReadDamaged (Open fails with it otherwise); Tail
	// is then the start of the batch holding the damaged record, and the
	// records before it can be read.
	Damage *CorruptionError
}

// SegmentInfo describes one segment file.
type SegmentInfo struct {
	ID     uint64
	First  Pos   // position of its first record
	Size   int64 // file size when found or created (a segment created without a spare grows up to SegmentSize)
	Sealed bool  // no more records will be appended to it
}

// Stats are cumulative counters since Open.
type Stats struct {
	Appends      int64 // accepted appends (a batch counts once)
	Records      int64 // records made durable
	Bytes        int64 // payload bytes made durable
	WrittenBytes int64 // framed bytes written (headers, padding, seals)
	Writes       int64 // group-commit writes
	Syncs        int64 // fdatasync calls on segments
	SyncNanos    int64 // total time spent in those fdatasyncs
	MaxSyncNanos int64 // slowest one
	Rotations    int64 // segments sealed and replaced
	Segments     int   // segment files now
	// SpareFailures counts the background preparations of a spare segment
	// that failed (their files removed; a rotation then creates its
	// segment on demand). A failure may be a failed fsync.
	SpareFailures int64
}

// maxUnsynced bounds the bytes of the active segment that may be written but
// not yet durable: the owner never writes past l.w.synced+maxUnsynced
// without an fdatasync in between (with NoSync it cannot). Recovery relies
// on it: after a crash, every byte written but not made durable lies within
// maxUnsynced of where its scan stops, so a writable Open reads only that
// far past the tail to find stale bytes. It is a variable so that tests can
// make it small enough to matter in small segments; a Log copies it at Open.
var maxUnsynced int64 = 512 << 10

// Log is a segmented write-ahead log. All methods are safe for concurrent use.
type Log struct {
	dir      string
	fs       vfs.FS
	segSize  int64
	initSize int64 // Options.InitialSegmentSize, or MinPrealloc
	unsynced int64 // maxUnsynced as of Open
	noSync   bool
	// atRest is Options.AtRest.
	atRest bool
	// durableHint is Options.ScanFrom when ScanFromDurable is set.
	durableHint Pos
	minSync     time.Duration
	readOnly    bool
	readDamaged bool // Options.ReadDamaged
	// deferred holds what recovery found until StartWriting, for a log
	// opened with DeferWrites; nil otherwise and once writing started.
	deferred *deferredStart
	logger   *slog.Logger
	recovery RecoveryInfo // immutable after Open

	// onGroupCommit is Options.OnGroupCommit (observe.go); nil: none.
	onGroupCommit func(GroupCommit)
	// replicate is Options.Replicate (writer.go's flush); nil: none.
	replicate func(appends [][][]byte) error

	// durable is the end of the durable records (readers stop there).
	// Written only by the owner goroutine (and Open); read lock-free.
	durable atomic.Pointer[Pos]
	// first is the first position of the oldest segment.
	first atomic.Pointer[Pos]

	// q is the queue between writers and the owner goroutine.
	q struct {
		sync.Mutex
		pending []*Waiter // appended by writers, taken whole by the owner
		closed  bool      // no more appends accepted
		err     error     // sticky write/sync error (I8); set by the owner
	}
	wake      chan struct{} // capacity 1: "something is pending"
	closing   chan struct{} // closed by Close: cuts a MinSyncInterval wait short
	ownerDone chan struct{} // closed when the owner goroutine exits

	// wmu is held by whoever writes the active segment: the owner
	// goroutine, or an Append that found no group being written and writes
	// its own (writer.go). It guards w once writing started; the owner
	// holds it when it exits, so Close reads w after the last writer.
	wmu sync.Mutex
	// w is guarded by wmu (and owned by Open before the owner starts).
	w struct {
		f   vfs.File
		seg uint64
		// segID is seg as the 8 bytes every record checksum covers.
		segID [8]byte
		off   int64 // next write offset in f
		// cap is the active segment's capacity: records and the seal end
		// by it (capFor; a resumed segment's is its file size).
		cap int64
		// synced is an offset up to which f is known durable; every record
		// carries the value it had when the record was encoded. It equals
		// off between flushes (without NoSync).
		synced int64
		buf    []byte
		// queue is the array of the last batch taken from q.pending,
		// cleared: it becomes the next pending queue (writePending).
		queue     []*Waiter
		spare     chan error // result of the background spare preparation
		preparing bool       // a prepareSpare is running; its result comes on spare
		spareAt   int64      // the offset from which the spare is prepared (maybePrepareSpare)
		haveSpare bool       // a complete spare file exists (checked again before use)
		lastSync  time.Time
		// durables is the rest of a block of Pos values that flush
		// publishes as durable, one per group commit (storeDurable):
		// each is written once, before it is published, and never
		// again, so that a reader may hold it, for one allocation per
		// block rather than per group.
		durables []Pos
	}

	// segs lists the segment files, oldest first; the last one is active
	// in a writable log.
	segs struct {
		sync.Mutex
		list []SegmentInfo
	}

	// rd caches read handles for ReadAt, and the tables of the compacted
	// ones; closed by RemoveBelow, Compact and Close.
	rd struct {
		sync.RWMutex
		files map[uint64]vfs.File
		maps  map[uint64]*compactMap
	}
	// compacted caches whether a segment of the log is a compacted one
	// (compact.go: AnyCompacted): 0 not known yet, 1 no, 2 yes.
	compacted atomic.Int32

	stats struct {
		appends, records, bytes, written, writes, syncs, syncNanos, maxSync, rotations, spareFailures atomic.Int64
	}

	closeOnce sync.Once
	closeErr  error
	closedF   atomic.Bool
}

func (o *Options) validate() error {
	if o.SegmentSize != 0 && (o.SegmentSize < MinSegmentSize || o.SegmentSize > MaxSegmentSize || o.SegmentSize%RecordAlign != 0) {
		return fmt.Errorf("%w: SegmentSize %d must be a multiple of %d in [%d, %d]",
			ErrBadOptions, o.SegmentSize, RecordAlign, MinSegmentSize, MaxSegmentSize)
	}
	if n := o.InitialSegmentSize; n != 0 && (n < MinSegmentSize || n > MaxSegmentSize || n%(4<<10) != 0) {
		return fmt.Errorf("%w: InitialSegmentSize %d must be a multiple of 4 KiB in [%d, %d]",
			ErrBadOptions, n, MinSegmentSize, MaxSegmentSize)
	}
	if o.MinSyncInterval < 0 {
		return fmt.Errorf("%w: negative MinSyncInterval %v", ErrBadOptions, o.MinSyncInterval)
	}
	return nil
}

// Open opens the log in dir, creating dir (0700) if it is missing and the
// log is writable, and recovers it: the newest segment is scanned record by
// record, a torn tail is trimmed and counted, and anything worse is a
// *CorruptionError. A writable log then appends right after the last valid
// record of the newest segment (a torn tail is zeroed and synced first), or
// to a fresh segment when the newest one is sealed or full. A brand-new log
// starts on a zero-filled first segment of InitialSegmentSize bytes.
func Open(dir string, opts *Options) (*Log, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.InitialSegmentSize == 0 {
		o.InitialSegmentSize = MinPrealloc
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Log{
		dir: dir, fs: o.FS, segSize: o.SegmentSize, initSize: min(o.InitialSegmentSize, o.SegmentSize), noSync: o.NoSync,
		minSync: o.MinSyncInterval, readOnly: o.ReadOnly, logger: o.Logger, unsynced: maxUnsynced,
		wake: make(chan struct{}, 1), closing: make(chan struct{}), ownerDone: make(chan struct{}),
	}
	if o.ScanFromDurable {
		l.durableHint = o.ScanFrom
	}
	l.atRest = o.AtRest
	l.rd.files = map[uint64]vfs.File{}
	l.rd.maps = map[uint64]*compactMap{}
	l.w.spare = make(chan error, 1)
	l.readDamaged = o.ReadDamaged
	l.onGroupCommit = o.OnGroupCommit
	l.replicate = o.Replicate
	if o.DeferWrites && !o.ReadOnly {
		l.readOnly = true // until StartWriting
		l.deferred = &deferredStart{}
	}
	if !l.readOnly {
		if err := l.createDir(); err != nil {
			return nil, err
		}
	}
	if err := l.recover(o.ScanFrom); err != nil {
		l.closeFiles()
		return nil, err
	}
	if l.readOnly {
		if l.deferred == nil {
			close(l.ownerDone)
		}
		return l, nil
	}
	go l.run()
	return l, nil
}

func (l *Log) durablePos() Pos { return *l.durable.Load() }
func (l *Log) firstPos() Pos   { return *l.first.Load() }
func (l *Log) isClosed() bool  { return l.closedF.Load() }

// End is where the next record will start if it fits in the active segment:
// the end of the durable log.
func (l *Log) End() Pos { return l.durablePos() }

// Recovery reports what Open found.
func (l *Log) Recovery() RecoveryInfo { return l.recovery }

// Stats returns the counters; cheap.
func (l *Log) Stats() Stats {
	l.segs.Lock()
	n := len(l.segs.list)
	l.segs.Unlock()
	return Stats{
		Appends: l.stats.appends.Load(), Records: l.stats.records.Load(), Bytes: l.stats.bytes.Load(),
		WrittenBytes: l.stats.written.Load(), Writes: l.stats.writes.Load(), Syncs: l.stats.syncs.Load(),
		SyncNanos: l.stats.syncNanos.Load(), MaxSyncNanos: l.stats.maxSync.Load(),
		Rotations: l.stats.rotations.Load(), Segments: n, SpareFailures: l.stats.spareFailures.Load(),
	}
}

// Segments lists the segment files, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.segs.Lock()
	defer l.segs.Unlock()
	return slices.Clone(l.segs.list)
}

// RemoveBelow removes the whole segments whose records all lie before pos
// (segments with an id below pos.Segment), never the active one, then syncs
// the directory. It returns how many files it removed.
func (l *Log) RemoveBelow(pos Pos) (int, error) {
	if l.isClosed() {
		return 0, ErrClosed
	}
	if l.readOnly {
		return 0, ErrReadOnly
	}
	l.segs.Lock()
	defer l.segs.Unlock()
	removed := 0
	for len(l.segs.list) > 1 && l.segs.list[0].ID < pos.Segment && l.segs.list[0].Sealed {
		id := l.segs.list[0].ID
		l.rd.Lock()
		if f, ok := l.rd.files[id]; ok {
			f.Close()
			delete(l.rd.files, id)
			delete(l.rd.maps, id)
		}
		l.rd.Unlock()
		if err := l.fs.Remove(l.path(segmentName(id))); err != nil {
			return removed, fmt.Errorf("wal: remove segment %d (%s): %w", id, l.path(segmentName(id)), unwrapPathErr(err))
		}
		l.segs.list = l.segs.list[1:]
		f := l.segs.list[0].First
		l.first.Store(&f)
		removed++
	}
	if removed > 0 {
		if err := l.syncDir(); err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// Close writes and syncs everything pending, stops the owner goroutine and
// closes the files. It is idempotent; later calls return the first result.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.q.Lock()
		l.q.closed = true
		l.q.Unlock()
		close(l.closing)
		if !l.readOnly {
			select {
			case l.wake <- struct{}{}:
			default:
			}
		}
		if l.deferred != nil { // writing never started: no owner goroutine
			l.deferred = nil
			close(l.ownerDone)
		}
		<-l.ownerDone
		l.closedF.Store(true)
		var errs []error
		if !l.readOnly {
			if err := l.stickyErr(); err != nil {
				errs = append(errs, err)
			} else if l.noSync && l.w.f != nil {
				if err := l.w.f.SyncData(); err != nil {
					errs = append(errs, fmt.Errorf("wal: sync segment %d (%s): %w", l.w.seg, l.path(segmentName(l.w.seg)), unwrapPathErr(err)))
				}
			}
			if l.w.preparing {
				if err := <-l.w.spare; err != nil {
					l.logger.Warn("wal: preparing a spare segment failed", "err", err)
				}
				l.w.preparing = false
			}
			if len(errs) == 0 {
				l.trimAtRest()
			}
		}
		errs = append(errs, l.closeFiles())
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

func (l *Log) closeFiles() error {
	var errs []error
	if l.w.f != nil {
		errs = append(errs, l.w.f.Close())
		l.w.f = nil
	}
	if l.w.preparing {
		<-l.w.spare
		l.w.preparing = false
	}
	l.rd.Lock()
	for id, f := range l.rd.files {
		errs = append(errs, f.Close())
		delete(l.rd.files, id)
		delete(l.rd.maps, id)
	}
	l.rd.Unlock()
	return errors.Join(errs...)
}
