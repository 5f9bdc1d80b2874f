package wal

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Reading: segFile decodes the records of one segment (for recovery and
// readers alike), Reader is the cursor over the durable log, ReadAt and
// ScanAfter read single records, and every read of a segment opens it
// through openSegment, which checks its header.

// readChunk is how much a segFile reads at a time.
const readChunk = 256 << 10

// readAtChunk is how much ReadAt reads with its first pread: the header and
// the start of the payload, all of a small record.
const readAtChunk = 4 << 10

var readAtPool = sync.Pool{New: func() any { b := make([]byte, readAtChunk); return &b }}

// segFile decodes records of one segment through a read buffer. It is used
// by recovery, Reader and ReadAt; it is not safe for concurrent use.
type segFile struct {
	f    vfs.File
	id   uint64
	seed uint32 // segSeed of its id
	name string
	// size is how far records may be read: the file size, or the durable
	// end of the active segment.
	size int64

	buf    []byte // buf[:bufLen] holds the file bytes at bufOff
	bufOff int64
	bufLen int

	cm *compactMap // the table of a compacted segment (compact.go), or nil
}

func newSegFile(f vfs.File, id uint64, name string, size int64) *segFile {
	seg := segIDBytes(id)
	return &segFile{f: f, id: id, seed: segSeed(&seg), name: name, size: size}
}

// window returns the n bytes at off, or fewer if size or the file ends
// first. n is bounded by the caller (by size and MaxRecordSize).
func (s *segFile) window(off int64, n int) ([]byte, error) {
	if off >= s.size {
		return nil, nil
	}
	if int64(n) > s.size-off {
		n = int(s.size - off)
	}
	if off >= s.bufOff && off+int64(n) <= s.bufOff+int64(s.bufLen) {
		i := off - s.bufOff
		return s.buf[i : i+int64(n)], nil
	}
	want := int64(max(n, readChunk))
	want = min(want, s.size-off)
	if int64(cap(s.buf)) < want {
		s.buf = make([]byte, want)
	}
	s.buf = s.buf[:want]
	got, err := readFull(s.f, s.buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		s.bufLen = 0
		return nil, fmt.Errorf("wal: read segment %d (%s) at offset %d: %w", s.id, s.name, off, err)
	}
	s.bufOff, s.bufLen = off, got
	return s.buf[:min(n, got)], nil
}

// status classifies what decode found at an offset.
type status int

const (
	stOK         status = iota // a valid record
	stEnd                      // nothing written here: zero header or end of data
	stShort                    // the data ends inside the record
	stBadHeader                // the header does not check: its length is unknown
	stBadPayload               // header checks, payload crc does not: length known
	stSkip                     // a record compaction removed; next is the offset after it
)

// decoded is one decode result. payload aliases the segFile's buffer.
type decoded struct {
	st      status
	h       recordHeader
	payload []byte
	next    int64 // offset after the record (when its length is known)
	reason  string
}

// decode reads the record at off.
func (s *segFile) decode(off int64) (decoded, error) {
	if s.cm != nil {
		return s.decodeCompacted(off)
	}
	h, err := s.window(off, RecordHeaderSize)
	if err != nil {
		return decoded{}, err
	}
	if len(h) < RecordHeaderSize {
		if allZero(h) {
			return decoded{st: stEnd, reason: "end of data"}, nil
		}
		return decoded{st: stShort, reason: fmt.Sprintf("record header cut short after %d bytes", len(h))}, nil
	}
	if allZero(h) {
		return decoded{st: stEnd, reason: "zero record header"}, nil
	}
	rh, why := parseHeader(h, s.seed, off, MaxSegmentSize)
	if why != "" {
		return decoded{st: stBadHeader, h: rh, reason: why}, nil
	}
	span := recordSpan(int(rh.length))
	next := off + span
	if next > s.size {
		return decoded{st: stShort, h: rh, next: next,
			reason: fmt.Sprintf("%d-byte record cut short: data ends at %d", rh.length, s.size)}, nil
	}
	full, err := s.window(off, int(span))
	if err != nil {
		return decoded{}, err
	}
	if int64(len(full)) < span {
		return decoded{st: stShort, h: rh, next: next,
			reason: fmt.Sprintf("%d-byte record cut short: file ends at %d", rh.length, off+int64(len(full)))}, nil
	}
	payload := full[RecordHeaderSize : RecordHeaderSize+int(rh.length)]
	if !payloadOK(full[:RecordHeaderSize], s.seed, payload, rh.crc) {
		return decoded{st: stBadPayload, h: rh, next: next, reason: "record checksum mismatch"}, nil
	}
	return decoded{st: stOK, h: rh, payload: payload, next: next}, nil
}

// attested looks past a bad record at x for a valid record whose synced
// mark lies beyond x: proof that x had been made durable, so the bad record
// is corruption, not a torn write. It returns that record's offset.
func (s *segFile) attested(x int64) (int64, bool, error) {
	for o := alignUp(x + 1); o+RecordHeaderSize <= s.size; o += RecordAlign {
		h, err := s.window(o, RecordHeaderSize)
		if err != nil {
			return 0, false, err
		}
		if len(h) < RecordHeaderSize {
			break
		}
		if allZero(h) {
			continue
		}
		if _, why := parseHeader(h, s.seed, o, MaxSegmentSize); why != "" {
			continue
		}
		d, err := s.decode(o)
		if err != nil {
			return 0, false, err
		}
		if d.st == stOK && int64(d.h.synced) > x {
			return o, true, nil
		}
	}
	return 0, false, nil
}

func (s *segFile) corrupt(off int64, reason string) *CorruptionError {
	return &CorruptionError{Segment: s.id, Offset: off, File: s.name, Reason: reason}
}

// Reader is a cursor over durable records, in log order. It follows the
// log as it grows: after Next returns false with a nil Err, a later Next may
// return more records. A Reader is not safe for concurrent use.
type Reader struct {
	l      *Log
	pos    Pos // where the next record starts
	cur    Pos // the current record
	rec    []byte
	sf     *segFile
	full   bool // sf.size is the file size (the segment is sealed)
	err    error
	closed bool
}

// NewReader returns a cursor over the durable records that start at or
// after from. from must be the zero Pos (the beginning of the log), End(),
// or the start of a record (a Pos returned by an append, Reader.Pos or
// Reader.NextPos).
func (l *Log) NewReader(from Pos) (*Reader, error) {
	if l.isClosed() {
		return nil, ErrClosed
	}
	first := l.firstPos()
	if from == (Pos{}) {
		from = first
	}
	d := l.durablePos()
	if from.Segment < first.Segment || d.Less(from) || from.Offset < SegmentHeaderSize || from.Offset%RecordAlign != 0 {
		return nil, fmt.Errorf("%w: %v is outside the log [%v, %v]", ErrBadPos, from, first, d)
	}
	r := &Reader{l: l, pos: from}
	if from != d && from.Offset != SegmentHeaderSize {
		if err := r.open(from.Segment, d); err != nil {
			return nil, err
		}
		dec, err := r.sf.decode(from.Offset)
		if err != nil {
			r.Close()
			return nil, err
		}
		if dec.st != stOK && dec.st != stSkip {
			r.Close()
			return nil, fmt.Errorf("%w: no record starts at %v: %s", ErrBadPos, from, dec.reason)
		}
	}
	return r, nil
}

// open points the reader at segment id, closing the previous one.
func (r *Reader) open(id uint64, d Pos) error {
	if r.sf != nil && r.sf.id == id {
		return nil
	}
	if r.sf != nil {
		r.sf.f.Close()
		r.sf = nil
	}
	f, cm, err := r.l.openSegmentMapped(id)
	if err != nil {
		return err
	}
	r.sf = newSegFile(f, id, r.l.path(segmentName(id)), d.Offset)
	r.sf.cm = cm
	r.full = false
	return r.size(d)
}

// size sets how far the current segment may be read: the durable end while
// it is the active segment, its file size once it is sealed.
func (r *Reader) size(d Pos) error {
	if r.sf.id == d.Segment {
		r.sf.size = d.Offset
		return nil
	}
	if r.full {
		return nil
	}
	fi, err := r.sf.f.Stat()
	if err != nil {
		return fmt.Errorf("wal: stat segment %d (%s): %w", r.sf.id, r.sf.name, unwrapPathErr(err))
	}
	r.sf.size, r.full = fi.Size(), true
	return nil
}

// Next advances to the next durable record. It returns false at the end of
// the durable log or on error (see Err).
func (r *Reader) Next() bool {
	if r.err != nil || r.closed {
		return false
	}
	for {
		d := r.l.durablePos()
		if r.pos.Segment > d.Segment || (r.pos.Segment == d.Segment && r.pos.Offset >= d.Offset) {
			return false
		}
		if err := r.open(r.pos.Segment, d); err != nil {
			r.err = err
			return false
		}
		if err := r.size(d); err != nil {
			r.err = err
			return false
		}
		dec, err := r.sf.decode(r.pos.Offset)
		if err != nil {
			r.err = err
			return false
		}
		if dec.st == stSkip {
			r.pos.Offset = dec.next
			continue
		}
		if dec.st != stOK {
			reason := dec.reason
			if dec.st == stEnd || dec.st == stShort {
				reason += " before the segment's seal (truncated or zeroed)"
			}
			r.err = r.sf.corrupt(r.pos.Offset, reason)
			return false
		}
		if dec.h.typ == recTypeSeal {
			if r.pos.Segment == d.Segment {
				return false
			}
			r.pos = Pos{Segment: r.pos.Segment + 1, Offset: SegmentHeaderSize}
			continue
		}
		r.cur = r.pos
		r.rec = dec.payload
		r.pos.Offset = dec.next
		return true
	}
}

// Record is the current record. It is valid until the next call to Next;
// copy it to keep it.
func (r *Reader) Record() []byte { return r.rec }

// Pos is where the current record starts.
func (r *Reader) Pos() Pos { return r.cur }

// NextPos is where the record after the current one starts (a valid from
// for NewReader, and a valid Options.ScanFrom).
func (r *Reader) NextPos() Pos { return r.pos }

// Err is the error that stopped Next, or nil at a clean end. Damage before
// the durable end is a *CorruptionError (errors.Is(err, ErrCorrupt)).
func (r *Reader) Err() error { return r.err }

// Close releases the reader's file. It is idempotent.
func (r *Reader) Close() error {
	r.closed = true
	r.rec = nil
	if r.sf != nil {
		err := r.sf.f.Close()
		r.sf = nil
		return err
	}
	return nil
}

// ReadAt returns a copy of the durable record that starts at pos.
func (l *Log) ReadAt(pos Pos) ([]byte, error) { return l.readAt(pos, nil) }

// A ReadCache holds the bytes of a segment that ReadAtCache read last,
// for a reader of many records that lie near each other (a replay of a
// run's atoms and the certificates they refer to, which the log holds in
// order). Its zero value is ready to use; it is not safe for concurrent
// use. It holds at most readCacheMax bytes.
type ReadCache struct {
	f    vfs.File    // the segment's handle the bytes were read through
	cm   *compactMap // and its compaction map: a compaction changes both
	seg  uint64      // the segment
	phys int64       // the file offset of buf[0]
	buf  []byte      // durable bytes of the segment from phys
	next int         // the size of the next read: doubles up to readCacheMax
	used int64       // the file offset past the records served from buf
}

// readCacheMax is the largest read of a ReadCache: a run's atoms in a log
// shared by a few dozen runs lie some kilobytes apart.
const readCacheMax = 64 << 10

// ReadAtCache is ReadAt through c: a record that starts in the bytes c
// holds is served from them (the rest of a longer one is read), and any
// other is read with the bytes after it: 4 KiB at first (as ReadAt
// reads), twice as many as the last read, up to 64 KiB, when the records
// served from the bytes held reached their last quarter, half as many
// (not below 4 KiB) when they used less than half. The record returned
// is a copy either way, checked as ReadAt checks it.
func (l *Log) ReadAtCache(pos Pos, c *ReadCache) ([]byte, error) { return l.readAt(pos, c) }

func (l *Log) readAt(pos Pos, c *ReadCache) ([]byte, error) {
	if l.isClosed() {
		return nil, ErrClosed
	}
	first, d := l.firstPos(), l.durablePos()
	if pos.Segment < first.Segment || !pos.Less(d) || pos.Offset < SegmentHeaderSize || pos.Offset%RecordAlign != 0 {
		return nil, fmt.Errorf("%w: %v is outside the durable log [%v, %v)", ErrBadPos, pos, first, d)
	}
	f, cm, err := l.readHandle(pos.Segment)
	if err != nil {
		return nil, err
	}
	defer l.rd.RUnlock()
	phys := pos.Offset // where the frame is in the file
	if cm != nil {
		i, ok := cm.find(pos.Offset)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: no record starts at %v (a compacted segment)", ErrBadPos, pos)
		case cm.entries[i].phys == 0:
			return nil, fmt.Errorf("%w: %v", ErrReclaimed, pos)
		}
		phys = cm.entries[i].phys
	}
	size := d.Offset
	if pos.Segment != d.Segment {
		size = MaxSegmentSize
	}
	// The segment's path is built only for an error: StateAt reads up to a
	// snapshot window of atoms this way, one call each.
	ce := func(reason string) error {
		return &CorruptionError{Segment: pos.Segment, Offset: pos.Offset, File: l.path(segmentName(pos.Segment)), Reason: reason}
	}
	// One pread of the header and the first readAtChunk bytes; a record
	// that does not fit gets a second one for the rest of its payload.
	// Through a cache that holds the header, no first pread: its bytes
	// after the header stand for the first read's, all there was.
	var head []byte
	var want int64
	var n int
	if c != nil && c.f == f && c.cm == cm && c.seg == pos.Segment && phys >= c.phys && phys+RecordHeaderSize <= c.phys+int64(len(c.buf)) {
		head = c.buf[phys-c.phys:]
		n, want = len(head), int64(len(head))
	} else {
		var buf []byte
		if c != nil {
			// Reads grow while the records served from the bytes held
			// reach to their end (a reader going through the log in
			// order) and shrink to readAtChunk, ReadAt's read, while they
			// use less than half of them (records read far apart).
			switch used := c.used - c.phys; {
			case used >= int64(len(c.buf))*3/4:
				c.next = min(max(2*c.next, readAtChunk), readCacheMax)
			case used < int64(len(c.buf))/2:
				c.next = max(c.next/2, readAtChunk)
			}
			if cap(c.buf) < c.next {
				c.buf = make([]byte, c.next)
			}
			c.f, c.cm, c.seg, c.phys, c.buf = nil, nil, 0, 0, c.buf[:c.next]
			buf = c.buf
		} else {
			bp := readAtPool.Get().(*[]byte)
			defer readAtPool.Put(bp)
			buf = *bp
		}
		want = min(int64(len(buf)), size-pos.Offset)
		head = buf[:want]
		var err error
		n, err = readFull(f, head, phys)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("wal: read segment %d (%s) at offset %d: %w", pos.Segment, l.path(segmentName(pos.Segment)), pos.Offset, unwrapPathErr(err))
		}
		head = head[:n]
		if c != nil {
			c.f, c.cm, c.seg, c.phys, c.buf, c.used = f, cm, pos.Segment, phys, head, phys
		}
	}
	if n < RecordHeaderSize {
		if n == 0 {
			return nil, fmt.Errorf("%w: %v is past the end of segment %d", ErrBadPos, pos, pos.Segment)
		}
		return nil, ce(fmt.Sprintf("record header cut short after %d bytes", n))
	}
	hb := head[:RecordHeaderSize]
	seg := segIDBytes(pos.Segment)
	seed := segSeed(&seg)
	rh, why := parseHeader(hb, seed, pos.Offset, size)
	if why != "" {
		if allZero(hb) {
			why = "no record here (zero header)"
		}
		return nil, ce(why)
	}
	if rh.typ == recTypeSeal {
		return nil, fmt.Errorf("%w: %v is a segment seal, not a record", ErrBadPos, pos)
	}
	out := make([]byte, rh.length)
	got := copy(out, head[RecordHeaderSize:])
	if got < len(out) {
		if int64(n) < want { // the file ended
			return nil, ce(fmt.Sprintf("%d-byte record cut short after %d bytes", rh.length, got))
		}
		m, err := readFull(f, out[got:], phys+int64(n))
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, ce(fmt.Sprintf("%d-byte record cut short after %d bytes", rh.length, got+m))
			}
			return nil, fmt.Errorf("wal: read segment %d (%s) at offset %d: %w", pos.Segment, l.path(segmentName(pos.Segment)), pos.Offset, unwrapPathErr(err))
		}
	}
	if !payloadOK(hb, seed, out, rh.crc) {
		return nil, ce("record checksum mismatch")
	}
	if c != nil {
		c.used = max(c.used, phys+RecordHeaderSize+int64(len(out)))
	}
	return out, nil
}

// SegmentName returns the file name of segment id in a log directory.
func SegmentName(id uint64) string { return segmentName(id) }

// ScanAfter calls fn with each valid record after the damaged one at bad
// (the position of a *CorruptionError), in log order, until fn returns
// false, so that a caller reporting the damage can name what follows it.
// It resumes right after bad when the damaged record's header (length) is
// intact, else at the next 8-byte aligned offset that holds a record with
// a valid header and checksum, and reads on to the end of the data of
// each segment (past a ReadDamaged log's durable end: it is for reports,
// not for replay). It never changes the log; rec is valid only during fn.
func (l *Log) ScanAfter(bad Pos, fn func(pos Pos, rec []byte) bool) error {
	if l.isClosed() {
		return ErrClosed
	}
	l.segs.Lock()
	var newest uint64
	if n := len(l.segs.list); n > 0 {
		newest = l.segs.list[n-1].ID
	}
	l.segs.Unlock()
	for seg := bad.Segment; seg <= newest; seg++ {
		f, cm, err := l.openSegmentMapped(seg)
		if err != nil {
			if seg == bad.Segment {
				continue // a damaged header: go on with the next segment
			}
			return err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("wal: stat segment %d: %w", seg, err)
		}
		sf := newSegFile(f, seg, l.path(segmentName(seg)), fi.Size())
		sf.cm = cm
		off := int64(SegmentHeaderSize)
		if seg == bad.Segment {
			off = alignUp(bad.Offset + 1)
			if dec, err := sf.decode(bad.Offset); err == nil && dec.st == stBadPayload && dec.next > bad.Offset {
				off = dec.next
			}
		}
		synced := false // found a valid record: read on record by record
		for off+RecordHeaderSize <= sf.size {
			dec, err := sf.decode(off)
			if err != nil {
				f.Close()
				return err
			}
			if dec.st == stSkip {
				off = dec.next
				continue
			}
			if dec.st != stOK {
				if synced {
					break // the end of this segment's data, or more damage
				}
				off += RecordAlign
				continue
			}
			synced = true
			if dec.h.typ == recTypeSeal {
				break
			}
			if !fn(Pos{seg, off}, dec.payload) {
				f.Close()
				return nil
			}
			off = dec.next
		}
		f.Close()
	}
	return nil
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

// readHandle returns a cached read handle for segment id, and its
// compaction table (nil if none), with l.rd read-locked; the caller must
// RUnlock.
func (l *Log) readHandle(id uint64) (vfs.File, *compactMap, error) {
	for {
		l.rd.RLock()
		if f, ok := l.rd.files[id]; ok {
			return f, l.rd.maps[id], nil
		}
		l.rd.RUnlock()
		l.rd.Lock()
		if _, ok := l.rd.files[id]; !ok {
			f, cm, err := l.openSegmentMapped(id)
			if err != nil {
				l.rd.Unlock()
				return nil, nil, err
			}
			l.rd.files[id] = f
			if cm != nil {
				l.rd.maps[id] = cm
			}
		}
		l.rd.Unlock()
	}
}
