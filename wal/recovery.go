package wal

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/durable"
)

// Recovery: what Open does before the log accepts appends. It lists and
// checks the segments, scans the newest one for its tail (a torn tail is
// trimmed and counted, damage before it is a *CorruptionError), and, for a
// writable log, resumes the newest segment at its tail or seals it and
// activates the next. StartWriting is the writable half, deferred for a log
// opened with DeferWrites. The package documentation's "Crash safety",
// under Open, says what each step guarantees.

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

// createDir creates the log directory (0700) and the parents it lacks if
// it is missing, and syncs the parent of each so that the new directory
// entries are durable.
func (l *Log) createDir() error {
	if err := durable.MkdirAll(l.fs, l.dir); err != nil {
		return fmt.Errorf("wal: %w", err)
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
	// stale is the end of the last nonzero byte in [stop, stop+unsynced)
	// (stop if none), when the scan's last read covered that range
	// (staleKnown): resume then needs no second read of it. The bytes are
	// the file's as of the scan; nothing writes the segment between the
	// scan and resume (a deferred log writes nothing before StartWriting).
	stale      int64
	staleKnown bool
}

// noteStale sets end.stale for a log that will resume (not ReadOnly),
// from what the scan last read of [stop, stop+unsynced) and a read of the
// rest: the bytes the scan holds are not read twice.
func (l *Log) noteStale(s *segFile, end *scanEnd) error {
	if l.readOnly && l.deferred == nil {
		return nil
	}
	from, to := end.stop, min(end.size, end.stop+l.unsynced)
	end.stale, end.staleKnown = from, true
	if to <= from {
		return nil
	}
	if bufEnd := s.bufOff + int64(s.bufLen); s.bufOff <= from && from < bufEnd {
		if i := lastNonzeroIndex(s.buf[from-s.bufOff : min(to, bufEnd)-s.bufOff]); i >= 0 {
			end.stale = from + int64(i) + 1
		}
		from = min(to, bufEnd)
	}
	// The scan is over: its buffer is free to read the rest through.
	rest, err := lastNonzeroBuf(s.f, s.id, from, to, s.buf)
	s.bufLen = 0
	if err != nil {
		end.staleKnown = false
		return err
	}
	if rest > from {
		end.stale = rest
	}
	return nil
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

// scanNewest checks the newest segment's header and scans it for its tail.
func (l *Log) scanNewest(id uint64, hint Pos, info *RecoveryInfo) (scanEnd, error) {
	end := scanEnd{synced: SegmentHeaderSize}
	name := l.path(segmentName(id))
	f, cm, err := l.openSegmentMapped(id)
	if err != nil {
		return end, err
	}
	defer f.Close()
	if cm != nil {
		return end, &CorruptionError{Segment: id, Offset: 0, File: name, Reason: "the newest segment is a compacted one (compaction never rewrites the newest): segments after it are missing"}
	}
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
		return end, l.noteStale(s, &end)
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
	// segment is zero-filled now, to a small capacity (the initial one),
	// so that an Open needs little free space.
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
// and found nothing past it, or when the whole log is known durable
// (Options.AtRest): then an empty newest segment, whose name the process
// that created it made durable, needs no directory fsync either.
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
	stale := end.stale
	if !end.staleKnown {
		if stale, err = lastNonzero(f, id, stop, min(end.size, stop+l.unsynced)); err != nil {
			return fail(err)
		}
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
	clean := l.durableHint != (Pos{}) && info.ScanFrom == l.durableHint && tail == l.durableHint.Offset && stale == tail ||
		l.atRest && stale == tail
	if !synced && !l.noSync && !clean {
		if err := f.SyncData(); err != nil {
			return fail(fmt.Errorf("wal: sync segment %d (%s) before resuming it: %w", id, l.path(segmentName(id)), unwrapPathErr(err)))
		}
		synced = true
	}
	if tail == SegmentHeaderSize && !l.noSync && !l.atRest {
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
	l.w.spareAt = max(end.size/2, tail+(end.size-tail)/2)
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
	if off, err := writeZeros(f, from, to); err != nil {
		return fmt.Errorf("wal: zero stale bytes of segment %d (%s) at offset %d: %w", id, l.path(segmentName(id)), off, unwrapPathErr(err))
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
