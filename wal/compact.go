package wal

// Compaction: a sealed segment rewritten without some of its records, in
// place (same segment id, same file name), so that the space of records
// nobody will read again is reclaimed while every other record keeps its
// position. Positions are what the layers above store (replay positions,
// atom indexes, ledger tables, in-memory position lists), so keeping them
// is what lets compaction change nothing but the segment file.
//
// On-disk format of a compacted segment (FROZEN like format.go):
//
//	segment header (40 bytes): as in format.go, with flags = 1 (compacted)
//	table header (16 bytes, little endian)
//	+---------+-----------+--------+--------+
//	| 0..4    | 4..8      | 8..12  | 12..16 |
//	| count   | notes len | crc    | zero   |
//	+---------+-----------+--------+--------+
//	count entries (16 bytes each), in log order
//	+-----------+-----------+---------+-----------+
//	| 0..4      | 4..8      | 8..12   | 12..16    |
//	| offset    | physical  | span    | note len  |
//	+-----------+-----------+---------+-----------+
//	notes (notes len bytes: the notes of the removed entries, in order)
//	zero padding to a multiple of 8, then the kept records
//
//	  offset   = where the record starts in the segment as written (its
//	             Pos.Offset, which never changes);
//	  physical = where its frame starts in this file, or 0: removed;
//	  span     = the bytes the frame takes (header, payload, padding);
//	  note     = for a removed record, what the compaction's caller said
//	             of it (opaque here: the engine names the record's kind
//	             and run); 0 for a kept one;
//	  crc      = CRC32C(segment id as 8 LE bytes || table header bytes
//	             0..8 || entries || notes).
//
// The entries tile the segment as written: the first starts at
// SegmentHeaderSize, each next one where the one before ends, and the last
// is the kept seal. A kept frame is the original's byte for byte: its
// checksum covers the segment id, not its offset, so it still verifies.
//
// # Crash safety
//
// Compact writes the new file as the segment's name plus .tmp (every
// entry, note and kept frame), fsyncs it, renames it over the segment and
// fsyncs the directory. The rename is the commit point: before it the
// segment is as it was (a writable Open removes the leftover .tmp), after
// it the segment is compacted; both read the same kept records at the
// same positions. Readers that had the old file open keep reading it
// (it stays readable until they close it); ReadAt reopens after.

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/internal/durable"
)

const (
	// flagCompacted in a segment header's flags: the segment was
	// rewritten by Compact and carries a table after its header.
	flagCompacted = 1

	compactTableHeaderSize = 16
	compactEntrySize       = 16
)

// ErrReclaimed is returned by ReadAt for a record that compaction removed.
var ErrReclaimed = errors.New("wal: record reclaimed by compaction")

// compactEntry is one record of a compacted segment's table.
type compactEntry struct {
	off  int64  // Pos.Offset of the record
	phys int64  // offset of its frame in the file; 0: removed
	span int64  // bytes of its frame
	note []byte // removed: the caller's note
}

// compactMap is the table of a compacted segment.
type compactMap struct {
	entries []compactEntry
}

// find returns the index of the entry at offset off.
func (m *compactMap) find(off int64) (int, bool) {
	return slices.BinarySearchFunc(m.entries, off, func(e compactEntry, off int64) int { return cmp.Compare(e.off, off) })
}

// Reclaimed is a record that compaction removed from a segment.
type Reclaimed struct {
	Pos  Pos    // where it was
	Span int64  // the bytes it took
	Note []byte // what the compaction's caller said of it
}

// CompactInfo is what one Compact did.
type CompactInfo struct {
	Segment   uint64
	Kept      int   // data records kept
	Removed   int   // data records removed by this call
	SizeAfter int64 // the new file's size
	// Reclaimed is the file size before minus after: the space freed.
	// Negative when a segment with few and small records gains a table
	// larger than what it lost (Compact does not rewrite a segment it
	// would remove nothing from).
	Reclaimed int64
}

// segmentHeaderFlags returns the flags of a header decodeSegmentHeader
// accepted.
func segmentHeaderFlags(b []byte) uint32 { return binary.LittleEndian.Uint32(b[12:16]) }

// openSegmentMapped is openSegment plus the table of a compacted segment
// (nil for one never compacted).
func (l *Log) openSegmentMapped(id uint64) (vfs.File, *compactMap, error) {
	f, err := l.openSegment(id)
	if err != nil {
		return nil, nil, err
	}
	var hdr [SegmentHeaderSize]byte
	if _, err := readFull(f, hdr[:], 0); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("wal: read segment %d (%s) header: %w", id, l.path(segmentName(id)), unwrapPathErr(err))
	}
	if segmentHeaderFlags(hdr[:])&flagCompacted == 0 {
		return f, nil, nil
	}
	m, err := l.loadCompactMap(f, id)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, m, nil
}

// loadCompactMap reads and checks the table of compacted segment id.
func (l *Log) loadCompactMap(f vfs.File, id uint64) (*compactMap, error) {
	name := l.path(segmentName(id))
	bad := func(format string, args ...any) error {
		return &CorruptionError{Segment: id, Offset: SegmentHeaderSize, File: name, Reason: "compaction table: " + fmt.Sprintf(format, args...)}
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("wal: stat segment %d (%s): %w", id, name, unwrapPathErr(err))
	}
	size := fi.Size()
	var th [compactTableHeaderSize]byte
	if _, err := readFull(f, th[:], SegmentHeaderSize); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, bad("cut short: the file has %d bytes", size)
		}
		return nil, fmt.Errorf("wal: read segment %d (%s) at offset %d: %w", id, name, SegmentHeaderSize, unwrapPathErr(err))
	}
	count := int64(binary.LittleEndian.Uint32(th[0:4]))
	notesLen := int64(binary.LittleEndian.Uint32(th[4:8]))
	if binary.LittleEndian.Uint32(th[12:16]) != 0 {
		return nil, bad("nonzero padding")
	}
	bodyStart := int64(SegmentHeaderSize + compactTableHeaderSize)
	if count == 0 || bodyStart+count*compactEntrySize+notesLen > size {
		return nil, bad("%d entries and %d bytes of notes do not fit in a %d-byte file", count, notesLen, size)
	}
	body := make([]byte, count*compactEntrySize+notesLen)
	if _, err := readFull(f, body, bodyStart); err != nil {
		return nil, fmt.Errorf("wal: read segment %d (%s) at offset %d: %w", id, name, bodyStart, unwrapPathErr(err))
	}
	seg := segIDBytes(id)
	c := crc32c.Update(0, seg[:])
	c = crc32c.Update(c, th[0:8])
	c = crc32c.Update(c, body)
	if got := binary.LittleEndian.Uint32(th[8:12]); got != c {
		return nil, bad("checksum %08x, computed %08x", got, c)
	}
	dataStart := alignUp(bodyStart + int64(len(body)))
	notes := body[count*compactEntrySize:]
	m := &compactMap{entries: make([]compactEntry, count)}
	next, physNext := int64(SegmentHeaderSize), dataStart
	for i := range m.entries {
		b := body[i*compactEntrySize:]
		e := compactEntry{
			off:  int64(binary.LittleEndian.Uint32(b[0:4])),
			phys: int64(binary.LittleEndian.Uint32(b[4:8])),
			span: int64(binary.LittleEndian.Uint32(b[8:12])),
		}
		nl := int64(binary.LittleEndian.Uint32(b[12:16]))
		switch {
		case e.off != next:
			return nil, bad("entry %d starts at %d, the one before ends at %d", i, e.off, next)
		case e.span < RecordHeaderSize || e.span%RecordAlign != 0:
			return nil, bad("entry %d has span %d", i, e.span)
		case e.phys != 0 && nl != 0:
			return nil, bad("entry %d is kept and has a note", i)
		case e.phys != 0 && (e.phys != physNext || e.phys+e.span > size):
			return nil, bad("entry %d's frame at %d (span %d) is not where the frames before end (%d) or runs past the file (%d bytes)", i, e.phys, e.span, physNext, size)
		case nl > int64(len(notes)):
			return nil, bad("entry %d's note of %d bytes runs past the notes", i, nl)
		}
		if e.phys == 0 {
			e.note, notes = notes[:nl:nl], notes[nl:]
		} else {
			physNext += e.span
		}
		next += e.span
		m.entries[i] = e
	}
	if len(notes) != 0 {
		return nil, bad("%d bytes of notes name no entry", len(notes))
	}
	if m.entries[count-1].phys == 0 {
		return nil, bad("its last entry (the seal) is removed")
	}
	return m, nil
}

// decodeCompacted is decode for a compacted segment: off is a record's
// position, the frame is read where the table says. A removed record is
// stSkip, with next the offset after it.
func (s *segFile) decodeCompacted(off int64) (decoded, error) {
	i, ok := s.cm.find(off)
	if !ok {
		return decoded{st: stBadHeader, reason: fmt.Sprintf("no record starts at offset %d of the compacted segment", off)}, nil
	}
	e := s.cm.entries[i]
	if e.phys == 0 {
		return decoded{st: stSkip, next: off + e.span, reason: "record reclaimed by compaction"}, nil
	}
	h, err := s.window(e.phys, RecordHeaderSize)
	if err != nil {
		return decoded{}, err
	}
	if len(h) < RecordHeaderSize {
		return decoded{st: stShort, reason: fmt.Sprintf("record header cut short after %d bytes", len(h))}, nil
	}
	rh, why := parseHeader(h, s.seed, off, MaxSegmentSize)
	if why != "" {
		return decoded{st: stBadHeader, h: rh, reason: why}, nil
	}
	if span := recordSpan(int(rh.length)); span != e.span {
		return decoded{st: stBadHeader, h: rh, reason: fmt.Sprintf("%d-byte record, the compaction table says %d", span, e.span)}, nil
	}
	full, err := s.window(e.phys, int(e.span))
	if err != nil {
		return decoded{}, err
	}
	next := off + e.span
	if int64(len(full)) < e.span {
		return decoded{st: stShort, h: rh, next: next, reason: fmt.Sprintf("%d-byte record cut short: file ends", rh.length)}, nil
	}
	payload := full[RecordHeaderSize : RecordHeaderSize+int(rh.length)]
	if !payloadOK(full[:RecordHeaderSize], s.seed, payload, rh.crc) {
		return decoded{st: stBadPayload, h: rh, next: next, reason: "record checksum mismatch"}, nil
	}
	return decoded{st: stOK, h: rh, payload: payload, next: next}, nil
}

// Reclaimed returns the records compaction removed from segment id, in
// log order: none for a segment never compacted.
func (l *Log) Reclaimed(id uint64) ([]Reclaimed, error) {
	if l.isClosed() {
		return nil, ErrClosed
	}
	f, m, err := l.openSegmentMapped(id)
	if err != nil {
		return nil, err
	}
	f.Close()
	if m == nil {
		return nil, nil
	}
	var out []Reclaimed
	for _, e := range m.entries {
		if e.phys == 0 {
			out = append(out, Reclaimed{Pos: Pos{id, e.off}, Span: e.span, Note: e.note})
		}
	}
	return out, nil
}

// Compact rewrites sealed segment id (never the active one) without the
// records drop removes, keeping every other record at its position (see
// the file's comment for the format and the crash safety). drop is called
// with each data record that is still in the segment, in order; rec is
// valid only during the call. It returns remove and, for a removed
// record, a note kept in the segment's table (Log.Reclaimed returns it);
// its error stops Compact with the segment unchanged. A segment compacted
// before keeps what it removed then. Nothing is rewritten when drop
// removes nothing. Compact and RemoveBelow must not run at once.
func (l *Log) Compact(id uint64, drop func(pos Pos, rec []byte) (note []byte, remove bool, err error)) (CompactInfo, error) {
	info := CompactInfo{Segment: id}
	if l.isClosed() {
		return info, ErrClosed
	}
	if l.readOnly {
		return info, ErrReadOnly
	}
	l.segs.Lock()
	i := slices.IndexFunc(l.segs.list, func(s SegmentInfo) bool { return s.ID == id })
	ok := i >= 0 && i < len(l.segs.list)-1 && l.segs.list[i].Sealed
	l.segs.Unlock()
	if !ok {
		return info, fmt.Errorf("%w: segment %d is not a sealed segment of the log (the newest is never compacted)", ErrBadPos, id)
	}
	name := l.path(segmentName(id))
	f, m, err := l.openSegmentMapped(id)
	if err != nil {
		return info, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return info, fmt.Errorf("wal: stat segment %d (%s): %w", id, name, unwrapPathErr(err))
	}
	sizeBefore := fi.Size()
	sf := newSegFile(f, id, name, sizeBefore)
	sf.cm = m

	// The table: every record, as written, with what becomes of it. src
	// is where a kept frame is read from.
	type entry struct {
		compactEntry
		keep bool
		src  int64
	}
	var entries []entry
	removed := 0
	for off := int64(SegmentHeaderSize); ; {
		if m != nil {
			if j, found := m.find(off); found && m.entries[j].phys == 0 {
				entries = append(entries, entry{compactEntry: m.entries[j]})
				off += m.entries[j].span
				continue
			}
		}
		dec, err := sf.decode(off)
		if err != nil {
			return info, err
		}
		if dec.st != stOK {
			return info, sf.corrupt(off, dec.reason+" (compaction reads the whole segment)")
		}
		e := entry{compactEntry: compactEntry{off: off, span: dec.next - off}, keep: true, src: off}
		if m != nil {
			j, _ := m.find(off)
			e.src = m.entries[j].phys
		}
		if dec.h.typ == recTypeSeal {
			entries = append(entries, e)
			break
		}
		note, rm, err := drop(Pos{id, off}, dec.payload)
		if err != nil {
			return info, err
		}
		if rm {
			e.keep, e.note = false, append([]byte(nil), note...)
			removed++
		} else {
			info.Kept++
		}
		entries = append(entries, e)
		off = dec.next
	}
	info.Removed = removed
	if removed == 0 {
		info.SizeAfter = sizeBefore
		return info, nil
	}

	// The new file: header, table, notes, then the kept frames.
	notesLen := 0
	for _, e := range entries {
		notesLen += len(e.note)
	}
	tableEnd := int64(SegmentHeaderSize+compactTableHeaderSize) + int64(len(entries))*compactEntrySize + int64(notesLen)
	phys := alignUp(tableEnd)
	buf := make([]byte, phys, max(phys, 1<<20))
	encodeSegmentHeader(buf, id)
	binary.LittleEndian.PutUint32(buf[12:16], flagCompacted)
	binary.LittleEndian.PutUint32(buf[32:36], crc32c.Checksum(buf[0:32]))
	th := buf[SegmentHeaderSize : SegmentHeaderSize+compactTableHeaderSize]
	binary.LittleEndian.PutUint32(th[0:4], uint32(len(entries)))
	binary.LittleEndian.PutUint32(th[4:8], uint32(notesLen))
	body := buf[SegmentHeaderSize+compactTableHeaderSize : tableEnd]
	notes := body[len(entries)*compactEntrySize:]
	for k := range entries {
		e := &entries[k]
		if e.keep {
			e.phys = phys
			phys += e.span
		}
		b := body[k*compactEntrySize:]
		binary.LittleEndian.PutUint32(b[0:4], uint32(e.off))
		binary.LittleEndian.PutUint32(b[4:8], uint32(e.phys))
		binary.LittleEndian.PutUint32(b[8:12], uint32(e.span))
		binary.LittleEndian.PutUint32(b[12:16], uint32(len(e.note)))
		notes = notes[copy(notes, e.note):]
	}
	seg := segIDBytes(id)
	c := crc32c.Update(0, seg[:])
	c = crc32c.Update(c, th[0:8])
	c = crc32c.Update(c, body)
	binary.LittleEndian.PutUint32(th[8:12], c)

	tmp := name + segTmpSuffix
	out, err := durable.Create(l.fs, tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return info, fmt.Errorf("wal: compact segment %d: create %s: %w", id, tmp, unwrapPathErr(err))
	}
	fail := func(what string, err error) (CompactInfo, error) {
		if out != nil {
			out.Close()
		}
		if rerr := l.fs.Remove(tmp); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			l.logger.Warn("wal: remove the file of a failed compaction", "file", tmp, "err", rerr)
		}
		return info, fmt.Errorf("wal: compact segment %d: %s %s: %w", id, what, tmp, unwrapPathErr(err))
	}
	// vfs.File.Write may modify its argument: buf is private and refilled
	// after every write. Each write is handed to writeback at once
	// (SyncTo: sync_file_range on Linux, no durability promised), so that
	// the final fsync has little left to write and the log's own
	// fdatasyncs do not queue behind megabytes of this file.
	written := int64(0)
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		if _, err := out.Write(buf); err != nil {
			return err
		}
		written += int64(len(buf))
		buf = buf[:0]
		_, err := out.SyncTo(written)
		return err
	}
	for _, e := range entries {
		if !e.keep {
			continue
		}
		frame, err := sf.window(e.src, int(e.span))
		if err != nil {
			return fail("read a kept record for", err)
		}
		if int64(len(frame)) < e.span {
			return fail("read a kept record for", sf.corrupt(e.off, "record cut short"))
		}
		if len(buf)+len(frame) > cap(buf) {
			if err := flush(); err != nil {
				return fail("write", err)
			}
		}
		buf = append(buf, frame...)
	}
	if err := flush(); err != nil {
		return fail("write", err)
	}
	if err := out.Sync(); err != nil {
		return fail("sync", err)
	}
	err = out.Close()
	out = nil
	if err != nil {
		return fail("close", err)
	}
	// The commit point.
	l.compacted.Store(2) // before: a reader that sees the new file must know
	if err := l.fs.Rename(tmp, name); err != nil {
		return fail("rename over the segment", err)
	}
	l.rd.Lock()
	if rf, ok := l.rd.files[id]; ok {
		rf.Close()
		delete(l.rd.files, id)
		delete(l.rd.maps, id)
	}
	l.rd.Unlock()
	l.segs.Lock()
	if i := slices.IndexFunc(l.segs.list, func(s SegmentInfo) bool { return s.ID == id }); i >= 0 {
		l.segs.list[i].Size = written
	}
	l.segs.Unlock()
	info.SizeAfter, info.Reclaimed = written, sizeBefore-written
	if err := l.syncDir(); err != nil {
		return info, err
	}
	return info, nil
}

// AnyCompacted reports whether a segment of the log is a compacted one.
// The first call reads the header of every sealed segment (Open only
// stats them); the answer is cached, and Compact keeps it up to date. A
// header that cannot be read counts as compacted: the caller is asking
// whether records may be missing, and the read that meets the damage
// reports it.
func (l *Log) AnyCompacted() bool {
	switch l.compacted.Load() {
	case 1:
		return false
	case 2:
		return true
	}
	any := false
	for _, s := range l.Segments() {
		if !s.Sealed {
			continue
		}
		f, m, err := l.openSegmentMapped(s.ID)
		if err != nil {
			any = true
			break
		}
		f.Close()
		if m != nil {
			any = true
			break
		}
	}
	if any {
		l.compacted.Store(2)
	} else {
		l.compacted.CompareAndSwap(0, 1)
	}
	return any
}
