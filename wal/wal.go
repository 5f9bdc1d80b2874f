package wal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configures a Log. The zero value is the default for every field.
type Options struct {
	// FS is the filesystem holding the log; nil means vfs.Default (the
	// operating system's).
	FS vfs.FS
	// SegmentSize is the largest capacity of a segment file; 0 means
	// DefaultSegmentSize (64 MiB). It must lie in [MinSegmentSize,
	// MaxSegmentSize] and be a multiple of RecordAlign. Segments start at
	// MinPrealloc and double up to it (see the package documentation).
	SegmentSize int64
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
	// Logger receives recovery reports and background errors; nil discards.
	Logger *slog.Logger
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

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Segment, p.Offset) }

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
	unsynced int64 // maxUnsynced as of Open
	noSync   bool
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

	// w is owned by the owner goroutine (and by Open before it starts).
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
		synced    int64
		buf       []byte
		spare     chan error // result of the background spare preparation
		preparing bool       // a prepareSpare is running; its result comes on spare
		haveSpare bool       // a complete spare file exists (checked again before use)
		lastSync  time.Time
	}

	// segs lists the segment files, oldest first; the last one is active
	// in a writable log.
	segs struct {
		sync.Mutex
		list []SegmentInfo
	}

	// rd caches read handles for ReadAt; closed by RemoveBelow and Close.
	rd struct {
		sync.RWMutex
		files map[uint64]vfs.File
	}

	stats struct {
		appends, records, bytes, written, writes, syncs, syncNanos, maxSync, rotations atomic.Int64
	}

	closeOnce sync.Once
	closeErr  error
	closedF   atomic.Bool
}

// Waiter is the handle of an asynchronous append.
type Waiter struct {
	recs [][]byte
	span int64
	pos  []Pos
	err  error
	done chan struct{}
}

// Wait blocks until the records are durable, the append failed, or ctx is
// done. A ctx that ends first returns ctx.Err() but does not cancel the
// append: the records may still become durable.
func (w *Waiter) Wait(ctx context.Context) ([]Pos, error) {
	select {
	case <-w.done:
		return w.pos, w.err
	default:
	}
	select {
	case <-w.done:
		return w.pos, w.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Done is closed when the append completed (durable or failed).
func (w *Waiter) Done() <-chan struct{} { return w.done }

func (w *Waiter) finish(err error) {
	if err != nil {
		w.pos = nil
	}
	w.err = err
	w.recs = nil
	close(w.done)
}

func (o *Options) validate() error {
	if o.SegmentSize != 0 && (o.SegmentSize < MinSegmentSize || o.SegmentSize > MaxSegmentSize || o.SegmentSize%RecordAlign != 0) {
		return fmt.Errorf("%w: SegmentSize %d must be a multiple of %d in [%d, %d]",
			ErrBadOptions, o.SegmentSize, RecordAlign, MinSegmentSize, MaxSegmentSize)
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
// starts on a zero-filled first segment of MinPrealloc bytes.
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
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Log{
		dir: dir, fs: o.FS, segSize: o.SegmentSize, noSync: o.NoSync,
		minSync: o.MinSyncInterval, readOnly: o.ReadOnly, logger: o.Logger, unsynced: maxUnsynced,
		wake: make(chan struct{}, 1), closing: make(chan struct{}), ownerDone: make(chan struct{}),
	}
	if o.ScanFromDurable {
		l.durableHint = o.ScanFrom
	}
	l.rd.files = map[uint64]vfs.File{}
	l.w.spare = make(chan error, 1)
	l.readDamaged = o.ReadDamaged
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

// deferredStart is what the recovery of a DeferWrites log found, kept for
// StartWriting.
type deferredStart struct {
	ids       []uint64
	info      RecoveryInfo
	end       scanEnd
	haveSpare bool
	leftovers []string // temporary files of an interrupted preparation
}

// StartWriting makes a log opened with DeferWrites writable: it does what
// a writable Open does after its recovery scan (removes leftover temporary
// files, trims a torn tail, resumes or activates a segment) and starts the
// owner goroutine. It must be called at most once, before any Append, and
// not concurrently with readers of the newest segment's tail. On error the
// log stays read-only and must be closed.
func (l *Log) StartWriting() error {
	d := l.deferred
	if d == nil {
		return fmt.Errorf("%w: StartWriting of a log not opened with DeferWrites", ErrBadOptions)
	}
	if d.info.Damage != nil {
		return d.info.Damage
	}
	l.deferred = nil
	l.readOnly = false
	for _, n := range d.leftovers {
		if err := l.fs.Remove(l.path(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.readOnly = true
			return fmt.Errorf("wal: remove leftover %s: %w", n, err)
		}
	}
	info := d.info
	if err := l.startWriting(d.ids, &info, d.end, d.haveSpare); err != nil {
		l.readOnly = true
		close(l.ownerDone)
		return err
	}
	l.recovery = info
	l.logTorn()
	go l.run()
	return nil
}

// createDir creates the log directory if it is missing, and syncs its
// parent so that the new directory entry is durable.
func (l *Log) createDir() error {
	if _, err := l.fs.Stat(l.dir); err == nil {
		return nil
	}
	if err := l.fs.MkdirAll(l.dir, 0o700); err != nil {
		return fmt.Errorf("wal: create directory %s: %w", l.dir, err)
	}
	parent := l.fs.PathDir(l.dir)
	d, err := l.fs.OpenDir(parent)
	if err != nil {
		return fmt.Errorf("wal: open directory %s: %w", parent, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("wal: sync directory %s: %w", parent, err)
	}
	return nil
}

// recover lists, checks and scans the segments, then (writable) resumes the
// newest one or activates the next.
func (l *Log) recover(scanFrom Pos) error {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return fmt.Errorf("wal: list %s: %w", l.dir, err)
	}
	var ids []uint64
	haveSpare := false
	for _, n := range names {
		if id, ok := parseSegmentName(n); ok {
			ids = append(ids, id)
			continue
		}
		switch {
		case n == spareName:
			haveSpare = true
		case n == spareTmpName || (len(n) == 24 && n[20:] == segTmpSuffix):
			// A crash interrupted preparing this file; it never held a record.
			if l.deferred != nil {
				l.deferred.leftovers = append(l.deferred.leftovers, n)
			} else if !l.readOnly {
				if err := l.fs.Remove(l.path(n)); err != nil {
					return fmt.Errorf("wal: remove leftover %s: %w", n, err)
				}
			}
		}
	}
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] != ids[i-1]+1 {
			return &CorruptionError{Segment: ids[i-1] + 1, File: l.path(segmentName(ids[i-1] + 1)),
				Reason: fmt.Sprintf("segment missing between %d and %d", ids[i-1], ids[i])}
		}
	}
	info := RecoveryInfo{Segments: len(ids)}
	var end scanEnd
	// A sealed segment is only stat'ed: its header is checked when it is
	// first opened for reading (openSegment), so that Open costs what the
	// tail costs, not one open per segment of history. The newest one's
	// header is checked by its scan.
	for _, id := range ids[:max(0, len(ids)-1)] {
		size, err := l.segmentSize(id)
		if err != nil {
			return err
		}
		l.segs.list = append(l.segs.list, SegmentInfo{ID: id, First: Pos{id, SegmentHeaderSize}, Size: size, Sealed: true})
	}
	if len(ids) > 0 {
		newest := ids[len(ids)-1]
		info.Newest = newest
		if end, err = l.scanNewest(newest, scanFrom, &info); err != nil {
			var ce *CorruptionError
			if !(l.readOnly && l.readDamaged && errors.As(err, &ce) && ce.Segment == newest) {
				return err
			}
			info.Damage = ce
			if info.Tail.Segment != newest { // its header: nothing of it is readable
				info.Tail = Pos{newest, SegmentHeaderSize}
			}
		}
		l.segs.list = append(l.segs.list, SegmentInfo{ID: newest, First: Pos{newest, SegmentHeaderSize}, Size: end.size, Sealed: info.Sealed})
	}
	if l.deferred != nil {
		l.deferred.ids, l.deferred.info, l.deferred.end, l.deferred.haveSpare = ids, info, end, haveSpare
	}
	if l.readOnly {
		l.recovery = info
		if l.deferred == nil {
			l.logTorn()
		}
		d := info.Tail
		if len(ids) == 0 {
			d = Pos{1, SegmentHeaderSize}
		}
		l.durable.Store(&d)
		f := Pos{1, SegmentHeaderSize}
		if len(ids) > 0 {
			f = Pos{ids[0], SegmentHeaderSize}
		}
		l.first.Store(&f)
		return nil
	}
	err = l.startWriting(ids, &info, end, haveSpare)
	l.recovery = info
	l.logTorn()
	return err
}

func (l *Log) logTorn() {
	info := l.recovery
	if info.TornBytes > 0 || info.TornRecords > 0 || info.ZeroedBytes > 0 {
		l.logger.Warn("wal: torn tail", "segment", info.Newest, "tail", info.Tail.String(),
			"torn_bytes", info.TornBytes, "torn_records", info.TornRecords,
			"zeroed_bytes", info.ZeroedBytes, "trimmed", !l.readOnly)
	}
}

// scanEnd is what the tail scan of the newest segment found besides
// RecoveryInfo: where it stopped, the largest synced mark it read, and the
// file size.
type scanEnd struct {
	stop   int64 // offset of the first thing that is not a valid record (or of the seal)
	synced int64 // largest synced mark of the records read (SegmentHeaderSize if none)
	size   int64 // file size
}

// segmentSize returns the size of sealed segment id's file without opening
// it; a file too short to hold a header is reported as corrupt here, since
// the size shows it for free.
func (l *Log) segmentSize(id uint64) (int64, error) {
	name := l.path(segmentName(id))
	fi, err := l.fs.Stat(name)
	if err != nil {
		return 0, fmt.Errorf("wal: stat segment %d (%s): %w", id, l.path(segmentName(id)), unwrapPathErr(err))
	}
	if fi.Size() < SegmentHeaderSize {
		return 0, &CorruptionError{Segment: id, Offset: 0, File: name,
			Reason: fmt.Sprintf("segment header is %d bytes, want %d", fi.Size(), SegmentHeaderSize)}
	}
	return fi.Size(), nil
}

// openSegment opens segment id for reading and checks its header: every
// reader of a segment goes through here, so a damaged header is reported
// by the first read of the segment, before any of its records.
func (l *Log) openSegment(id uint64) (vfs.File, error) {
	name := l.path(segmentName(id))
	f, err := l.fs.Open(name)
	if err != nil {
		return nil, fmt.Errorf("wal: open segment %d (%s): %w", id, l.path(segmentName(id)), unwrapPathErr(err))
	}
	var hdr [SegmentHeaderSize]byte
	n, err := readFull(f, hdr[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, fmt.Errorf("wal: read segment %d (%s) header: %w", id, l.path(segmentName(id)), unwrapPathErr(err))
	}
	if why := decodeSegmentHeader(hdr[:n], id); why != "" {
		f.Close()
		return nil, &CorruptionError{Segment: id, Offset: 0, File: name, Reason: why}
	}
	return f, nil
}

// scanNewest checks the newest segment's header and scans it for its tail.
func (l *Log) scanNewest(id uint64, hint Pos, info *RecoveryInfo) (scanEnd, error) {
	end := scanEnd{synced: SegmentHeaderSize}
	name := l.path(segmentName(id))
	f, err := l.openSegment(id)
	if err != nil {
		return end, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return end, fmt.Errorf("wal: stat segment %d (%s): %w", id, l.path(segmentName(id)), unwrapPathErr(err))
	}
	end.size = fi.Size()
	s := newSegFile(f, id, name, fi.Size())
	from := int64(SegmentHeaderSize)
	if hint.Segment == id && hint.Offset > SegmentHeaderSize && hint.Offset%RecordAlign == 0 && hint.Offset < s.size {
		d, err := s.decode(hint.Offset)
		if err != nil {
			return end, err
		}
		// A record start, or the end of the data: a hint taken at the tail
		// (the engine's checkpoint after a clean close) is where the next
		// record goes, and a scan from there finds the tail at once. A full
		// scan would stop at the same zero header.
		if d.st == stOK || d.st == stEnd {
			from = hint.Offset
		} else {
			l.logger.Info("wal: ScanFrom is not a record start; scanning the newest segment from its start",
				"scan_from", hint.String(), "reason", d.reason)
		}
	}
	info.ScanFrom = Pos{id, from}
	off, batchStart, pending := from, from, 0
	for {
		d, err := s.decode(off)
		if err != nil {
			return end, err
		}
		end.stop = off
		switch d.st {
		case stOK:
			switch d.h.typ {
			case recTypeSeal:
				if pending > 0 {
					info.Tail = Pos{id, batchStart}
					return end, s.corrupt(off, fmt.Sprintf("seal after an unfinished batch of %d records", pending))
				}
				info.Tail, info.Sealed = Pos{id, off}, true
				return end, nil
			}
			end.synced = max(end.synced, int64(d.h.synced))
			switch d.h.typ {
			case recTypeMore:
				pending++
			case recTypeLast:
				info.Records += int64(pending) + 1
				pending, batchStart = 0, d.next
			}
			off = d.next
			continue
		case stEnd:
			info.TornBytes, info.TornRecords = off-batchStart, pending
		case stShort:
			info.TornBytes, info.TornRecords = s.size-batchStart, pending+1
		case stBadHeader, stBadPayload:
			at, proven, err := s.attested(off)
			if err != nil {
				return end, err
			}
			if proven {
				info.Tail = Pos{id, batchStart}
				return end, s.corrupt(off, fmt.Sprintf("%s (the record at offset %d shows this one was durable)", d.reason, at))
			}
			end := off + RecordHeaderSize
			if d.st == stBadPayload {
				end = d.next
			}
			info.TornBytes, info.TornRecords = end-batchStart, pending+1
		}
		info.Tail = Pos{id, batchStart}
		return end, nil
	}
}

// startWriting resumes the recovered newest segment at its tail when it is
// unsealed and has room; otherwise it seals it there (or drops it when it
// holds no record) and activates the next one.
func (l *Log) startWriting(ids []uint64, info *RecoveryInfo, end scanEnd, haveSpare bool) error {
	var spare int64
	if haveSpare {
		var ok bool
		if spare, ok = l.spareSize(); !ok {
			if err := l.fs.Remove(l.path(spareName)); err != nil {
				return fmt.Errorf("wal: remove mis-sized spare %s: %w", l.path(spareName), unwrapPathErr(err))
			}
			haveSpare = false
		}
	}
	l.w.haveSpare = haveSpare
	next := uint64(1)
	if len(ids) > 0 {
		newest := ids[len(ids)-1]
		next = newest + 1
		// A segment's capacity is its file's size: every segment is
		// zero-filled to its capacity before it is named, except one
		// created growing at a rotation without a spare, which a restart
		// then seals where it ends.
		room := info.Tail.Offset+recordSpan(0) <= end.size-sealSpan
		if !info.Sealed && room {
			ok, err := l.resume(newest, info, end)
			if err != nil || ok {
				return err
			}
		}
		switch {
		case info.Sealed:
			// A process killed between writing the seal and its fdatasync
			// leaves a sealed segment that is only in the page cache: make
			// it durable before a newer segment exists.
			if err := l.syncSegment(newest); err != nil {
				return err
			}
		case info.Tail.Offset == SegmentHeaderSize:
			// The newest segment holds no record: no acknowledged record can
			// be in it (each one is preceded by durable records back to the
			// header). Replace it rather than leave an empty sealed file.
			if err := l.fs.Remove(l.path(segmentName(newest))); err != nil {
				return fmt.Errorf("wal: remove empty segment %d (%s): %w", newest, l.path(segmentName(newest)), unwrapPathErr(err))
			}
			if err := l.syncDir(); err != nil {
				return err
			}
			l.segs.list = l.segs.list[:len(l.segs.list)-1]
			next = newest
		default:
			if err := l.sealAt(newest, info.Tail.Offset); err != nil {
				return err
			}
			l.segs.list[len(l.segs.list)-1].Sealed = true
		}
	}
	// Open never leaves a growing active segment: without a spare, the new
	// segment is zero-filled now, to a small capacity (MinPrealloc), so
	// that an Open needs little free space.
	size := l.capFor(0, 0)
	if haveSpare {
		size = spare
	}
	f, err := l.activate(next, size, haveSpare, !haveSpare)
	if err != nil {
		return err
	}
	if haveSpare {
		l.w.haveSpare = false
	}
	l.setActive(f, next, size)
	l.setFirst()
	return nil
}

func (l *Log) setFirst() {
	first := l.segs.list[0].First
	l.first.Store(&first)
}

// resume makes the unsealed newest segment id the active one, appending at
// info.Tail. It reports false, having changed nothing, when the segment must
// be sealed instead.
//
// What lies past the tail must be zero before a record is written there, or
// a stale record left by a write that never became durable could later be
// read as part of the log (a new record ending exactly where it starts). The
// writer never has more than l.unsynced bytes written but not durable, all
// past a durable offset that the scan went beyond, so every stale byte lies
// in [stop, stop+unsynced); the records of an unfinished batch in [Tail,
// stop) are stale too. Both are zeroed, each followed by an fdatasync: the
// bytes past stop first, so that a crash while zeroing [Tail, stop) leaves
// its survivors within reach of the next scan.
//
// A clean tail is resumed with no write, but with one fdatasync: the scan
// may have read records that are only in the page cache (a process killed
// between a write and its fdatasync), and readers are about to see them as
// the log, so they must survive a power loss that follows. Nothing being
// dirty in the common case, it costs a device cache flush, which is skipped
// when the scan started at a hint known durable (Options.ScanFromDurable)
// and found nothing past it.
func (l *Log) resume(id uint64, info *RecoveryInfo, end scanEnd) (bool, error) {
	tail, stop := info.Tail.Offset, end.stop
	if stop < tail || stop-tail > l.unsynced {
		// A torn batch larger than the window: sealing at the tail makes
		// whatever lies past it unreachable, whatever its extent.
		return false, nil
	}
	name := l.path(segmentName(id))
	f, err := l.fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return false, fmt.Errorf("wal: open segment %d (%s) to resume it: %w", id, l.path(segmentName(id)), unwrapPathErr(err))
	}
	fail := func(err error) (bool, error) {
		f.Close()
		return false, err
	}
	stale, err := lastNonzero(f, id, stop, min(end.size, stop+l.unsynced))
	if err != nil {
		return fail(err)
	}
	synced := false // an fdatasync covered everything up to the tail
	if stale > stop {
		if err := l.zeroRange(f, id, stop, stale); err != nil {
			return fail(err)
		}
		synced = !l.noSync
	}
	if stop > tail {
		if err := l.zeroRange(f, id, tail, stop); err != nil {
			return fail(err)
		}
		synced = !l.noSync
	}
	// Nothing past a position known durable: nothing to make durable.
	clean := l.durableHint != (Pos{}) && info.ScanFrom == l.durableHint && tail == l.durableHint.Offset && stale == tail
	if !synced && !l.noSync && !clean {
		if err := f.SyncData(); err != nil {
			return fail(fmt.Errorf("wal: sync segment %d (%s) before resuming it: %w", id, l.path(segmentName(id)), unwrapPathErr(err)))
		}
		synced = true
	}
	if tail == SegmentHeaderSize && !l.noSync {
		// No record yet: the segment may have been renamed into place just
		// before a crash, its name not yet durable. (Records are written
		// only after the directory sync that follows the rename.)
		if err := l.syncDir(); err != nil {
			return fail(err)
		}
	}
	info.Resumed = true
	info.ZeroedBytes = stale - tail
	l.w.f, l.w.seg, l.w.segID = f, id, segIDBytes(id)
	l.w.off, l.w.synced, l.w.cap = tail, tail, end.size
	if !synced {
		// NoSync: the largest synced mark read is the best proven bound.
		l.w.synced = min(end.synced, tail)
	}
	d := Pos{id, tail}
	l.durable.Store(&d)
	l.setFirst()
	return true, nil
}

// zeroRange writes zeros over [from, to) of segment id and syncs them
// (unless NoSync).
func (l *Log) zeroRange(f vfs.File, id uint64, from, to int64) error {
	zeros := make([]byte, min(256<<10, to-from))
	for off := from; off < to; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), to-off)
		clear(zeros) // vfs writes may modify their argument
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("wal: zero stale bytes of segment %d (%s) at offset %d: %w", id, l.path(segmentName(id)), off, unwrapPathErr(err))
		}
	}
	if l.noSync {
		return nil
	}
	if err := f.SyncData(); err != nil {
		return fmt.Errorf("wal: sync zeroed tail of segment %d (%s): %w", id, l.path(segmentName(id)), unwrapPathErr(err))
	}
	return nil
}

// syncSegment makes what segment id holds durable.
func (l *Log) syncSegment(id uint64) error {
	f, err := l.fs.OpenReadWrite(l.path(segmentName(id)), vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("wal: open segment %d (%s) to sync it: %w", id, l.path(segmentName(id)), unwrapPathErr(err))
	}
	defer f.Close()
	if err := f.SyncData(); err != nil {
		return fmt.Errorf("wal: sync segment %d (%s): %w", id, l.path(segmentName(id)), unwrapPathErr(err))
	}
	return nil
}

// sealAt makes segment id end at off: what precedes off is synced, then a
// seal record is written there and synced, so stale bytes after it are never
// read again.
func (l *Log) sealAt(id uint64, off int64) error {
	f, err := l.fs.OpenReadWrite(l.path(segmentName(id)), vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("wal: open segment %d (%s) to seal it: %w", id, l.path(segmentName(id)), unwrapPathErr(err))
	}
	defer f.Close()
	if err := f.SyncData(); err != nil {
		return fmt.Errorf("wal: sync segment %d (%s) before sealing: %w", id, l.path(segmentName(id)), unwrapPathErr(err))
	}
	seal := appendRecord(nil, segIDBytes(id), recTypeSeal, uint32(off), nil)
	if _, err := f.WriteAt(seal, off); err != nil {
		return fmt.Errorf("wal: seal segment %d (%s) at offset %d: %w", id, l.path(segmentName(id)), off, unwrapPathErr(err))
	}
	if err := f.SyncData(); err != nil {
		return fmt.Errorf("wal: sync seal of segment %d (%s): %w", id, l.path(segmentName(id)), unwrapPathErr(err))
	}
	return nil
}

// setActive installs f as the new, empty active segment id of capacity
// size (owner or Open only).
func (l *Log) setActive(f vfs.File, id uint64, size int64) {
	l.w.f, l.w.seg, l.w.segID = f, id, segIDBytes(id)
	l.w.off, l.w.synced, l.w.cap = SegmentHeaderSize, SegmentHeaderSize, size
	d := Pos{id, SegmentHeaderSize}
	l.durable.Store(&d)
	l.segs.Lock()
	l.segs.list = append(l.segs.list, SegmentInfo{ID: id, First: d, Size: size})
	l.segs.Unlock()
}

// maybePrepareSpare starts zero-filling the next segment (twice the active
// one's capacity, up to the segment size) in the background once the
// active one is half full and no spare exists or is being made (owner
// only). Preparing it lazily keeps the zero-fill away from an Open and
// from the first commits after it.
func (l *Log) maybePrepareSpare() {
	if l.w.preparing || l.w.haveSpare || l.w.off < l.w.cap/2 {
		return
	}
	l.w.preparing = true
	size := l.capFor(l.w.cap, 0)
	go func() { l.w.spare <- l.prepareSpare(size) }()
}

func (l *Log) durablePos() Pos { return *l.durable.Load() }
func (l *Log) firstPos() Pos   { return *l.first.Load() }
func (l *Log) isClosed() bool  { return l.closedF.Load() }

// AppendAsync enqueues recs as one all-or-nothing batch and returns at once.
// recs must not be modified until the Waiter is done.
func (l *Log) AppendAsync(recs ...[]byte) *Waiter {
	w := &Waiter{recs: recs, done: make(chan struct{})}
	if l.readOnly {
		w.finish(ErrReadOnly)
		return w
	}
	for i, r := range recs {
		if len(r) > MaxRecordSize {
			w.finish(fmt.Errorf("%w: record %d is %d bytes, the maximum is %d", ErrTooLarge, i, len(r), MaxRecordSize))
			return w
		}
		w.span += recordSpan(len(r))
	}
	if limit := l.segSize - SegmentHeaderSize - sealSpan; w.span > limit {
		w.finish(fmt.Errorf("%w: batch of %d records takes %d bytes, a segment holds %d", ErrTooLarge, len(recs), w.span, limit))
		return w
	}
	if len(recs) == 0 {
		w.pos = []Pos{}
		close(w.done)
		return w
	}
	l.q.Lock()
	if l.q.closed {
		l.q.Unlock()
		w.finish(ErrClosed)
		return w
	}
	if err := l.q.err; err != nil {
		l.q.Unlock()
		w.finish(err)
		return w
	}
	l.q.pending = append(l.q.pending, w)
	l.q.Unlock()
	l.stats.appends.Add(1)
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return w
}

// Append writes one record and blocks until it is durable (or, with NoSync,
// written). ctx bounds the wait only: when ctx ends first the record may
// still become durable.
func (l *Log) Append(ctx context.Context, rec []byte) (Pos, error) {
	pos, err := l.AppendAsync(rec).Wait(ctx)
	if err != nil {
		return Pos{}, err
	}
	return pos[0], nil
}

// AppendBatch writes recs as one batch, all or nothing across a crash, and
// blocks until it is durable. A batch never spans segments.
func (l *Log) AppendBatch(ctx context.Context, recs [][]byte) ([]Pos, error) {
	return l.AppendAsync(recs...).Wait(ctx)
}

// run is the owner goroutine: it alone writes and syncs the active segment.
func (l *Log) run() {
	defer close(l.ownerDone)
	var spare []*Waiter
	for {
		<-l.wake
		if l.minSync > 0 {
			if d := time.Until(l.w.lastSync.Add(l.minSync)); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-l.closing:
					t.Stop()
				}
			}
		}
		l.q.Lock()
		batch := l.q.pending
		l.q.pending = spare[:0]
		closed := l.q.closed
		l.q.Unlock()
		if len(batch) > 0 {
			l.commit(batch)
			clear(batch)
		}
		// batch's array becomes the next pending queue: never the one just
		// handed to writers, even when batch was empty.
		spare = batch
		if closed {
			l.q.Lock()
			empty := len(l.q.pending) == 0
			l.q.Unlock()
			if empty {
				return
			}
			select {
			case l.wake <- struct{}{}:
			default:
			}
		}
	}
}

func (l *Log) stickyErr() error {
	l.q.Lock()
	defer l.q.Unlock()
	return l.q.err
}

// fail records a sticky error (I8) and fails the given waiters with it.
func (l *Log) fail(err error, ws []*Waiter) {
	l.q.Lock()
	if l.q.err == nil {
		l.q.err = err
	} else {
		err = l.q.err
	}
	l.q.Unlock()
	for _, w := range ws {
		w.finish(err)
	}
}

// commit writes a group of pending appends with one write and one fdatasync
// per segment touched.
func (l *Log) commit(batch []*Waiter) {
	if err := l.stickyErr(); err != nil {
		l.fail(err, batch)
		return
	}
	buf := l.w.buf[:0]
	start := 0 // batch[start:i] are encoded in buf
	for i, w := range batch {
		if l.w.off+int64(len(buf))+w.span > l.w.cap-sealSpan {
			if len(buf) > 0 {
				if !l.flush(buf, batch[start:i]) {
					l.fail(l.stickyErr(), batch[i:])
					return
				}
				buf = buf[:0]
			}
			start = i
			if err := l.rotate(w.span); err != nil {
				l.fail(err, batch[i:])
				return
			}
		}
		w.pos = make([]Pos, len(w.recs))
		synced := uint32(l.w.synced)
		for j, r := range w.recs {
			w.pos[j] = Pos{l.w.seg, l.w.off + int64(len(buf))}
			typ := byte(recTypeMore)
			if j == len(w.recs)-1 {
				typ = recTypeLast
			}
			buf = appendRecord(buf, l.w.segID, typ, synced, r)
		}
	}
	l.flush(buf, batch[start:])
	l.w.buf = buf[:0]
	l.maybePrepareSpare()
}

// flush writes buf at the active offset, syncs, publishes the new durable
// end and completes ws. It reports false after a (sticky) failure.
//
// Every write starts at the durable end (l.w.synced == l.w.off: Open and
// every flush leave it so), and none is larger than l.unsynced: a larger buf
// is written in pieces with an fdatasync after each, so that recovery finds
// every byte that was written but not made durable within l.unsynced of
// where its scan stops. The records keep the synced mark they were encoded
// with, which only understates what was durable.
func (l *Log) flush(buf []byte, ws []*Waiter) bool {
	for rest := buf; len(rest) > 0; {
		n := int64(len(rest))
		if !l.noSync {
			n = min(n, l.unsynced)
		}
		if _, err := l.w.f.WriteAt(rest[:n], l.w.off); err != nil {
			l.fail(fmt.Errorf("wal: write segment %d (%s) at offset %d: %w", l.w.seg, l.path(segmentName(l.w.seg)), l.w.off, unwrapPathErr(err)), ws)
			return false
		}
		l.stats.writes.Add(1)
		l.stats.written.Add(n)
		l.w.off += n
		rest = rest[n:]
		if !l.noSync {
			if err := l.syncActive(); err != nil {
				l.fail(err, ws)
				return false
			}
		}
	}
	d := Pos{l.w.seg, l.w.off}
	l.durable.Store(&d)
	var recs, bytes int64
	for _, w := range ws {
		recs += int64(len(w.recs))
		for _, r := range w.recs {
			bytes += int64(len(r))
		}
		w.finish(nil)
	}
	l.stats.records.Add(recs)
	l.stats.bytes.Add(bytes)
	return true
}

func (l *Log) syncActive() error {
	t0 := time.Now()
	err := l.w.f.SyncData()
	l.w.lastSync = time.Now()
	ns := l.w.lastSync.Sub(t0).Nanoseconds()
	l.stats.syncs.Add(1)
	l.stats.syncNanos.Add(ns)
	if ns > l.stats.maxSync.Load() {
		l.stats.maxSync.Store(ns)
	}
	if err != nil {
		return fmt.Errorf("wal: sync segment %d (%s): %w", l.w.seg, l.path(segmentName(l.w.seg)), unwrapPathErr(err))
	}
	l.w.synced = l.w.off
	return nil
}

// rotate seals the active segment and activates the next one, with room
// for a batch spanning need bytes.
func (l *Log) rotate(need int64) error {
	seal := appendRecord(nil, l.w.segID, recTypeSeal, uint32(l.w.synced), nil)
	if _, err := l.w.f.WriteAt(seal, l.w.off); err != nil {
		return fmt.Errorf("wal: seal segment %d (%s) at offset %d: %w", l.w.seg, l.path(segmentName(l.w.seg)), l.w.off, unwrapPathErr(err))
	}
	l.stats.written.Add(int64(len(seal)))
	sealAt := l.w.off
	l.w.off += int64(len(seal))
	if err := l.syncActive(); err != nil {
		return err
	}
	if err := l.w.f.Close(); err != nil {
		return fmt.Errorf("wal: close segment %d (%s): %w", l.w.seg, l.path(segmentName(l.w.seg)), unwrapPathErr(err))
	}
	l.w.f = nil
	if l.w.preparing {
		err := <-l.w.spare
		if err != nil {
			l.logger.Error("wal: preparing a spare segment failed; creating one on demand", "err", err)
		}
		l.w.preparing = false
		l.w.haveSpare = err == nil
	}
	size := l.capFor(l.w.cap, need)
	useSpare := false
	if l.w.haveSpare {
		// A spare too small for this batch stays for a later rotation.
		n, ok := l.spareSize()
		l.w.haveSpare = ok
		if useSpare = ok && n >= SegmentHeaderSize+need+sealSpan; useSpare {
			size = n
		}
	}
	next := l.w.seg + 1
	f, err := l.activate(next, size, useSpare, false)
	if err != nil {
		// Readers may still stop at the seal; nothing was acknowledged past it.
		d := Pos{l.w.seg, sealAt}
		l.durable.Store(&d)
		return err
	}
	l.segs.Lock()
	l.segs.list[len(l.segs.list)-1].Sealed = true
	l.segs.Unlock()
	l.stats.rotations.Add(1)
	if useSpare {
		l.w.haveSpare = false
	}
	l.setActive(f, next, size)
	return nil
}

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
		Rotations: l.stats.rotations.Load(), Segments: n,
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

// readHandle returns a cached read handle for segment id with l.rd
// read-locked; the caller must RUnlock.
func (l *Log) readHandle(id uint64) (vfs.File, error) {
	for {
		l.rd.RLock()
		if f, ok := l.rd.files[id]; ok {
			return f, nil
		}
		l.rd.RUnlock()
		l.rd.Lock()
		if _, ok := l.rd.files[id]; !ok {
			f, err := l.openSegment(id)
			if err != nil {
				l.rd.Unlock()
				return nil, err
			}
			l.rd.files[id] = f
		}
		l.rd.Unlock()
	}
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
	}
	l.rd.Unlock()
	return errors.Join(errs...)
}
