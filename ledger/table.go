package ledger

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"

	"github.com/continuumdb/continuum/internal/crc32c"
)

// table is a loaded persisted index: the bytes AppendTable wrote, verified
// once and then binary-searched in place. It is immutable once built.
type table struct {
	b      []byte // the whole table, header included; nil: no table
	hdr    int    // header size: tableHeaderSize (v1) or tableHeaderSizeV2 (v2, v3)
	esize  int    // entry size: tableEntrySize (v1, v2) or tableEntrySizeV3
	origin TableOrigin
	n      int    // number of entries
	counts [5]int // entries per Status
	// fence holds the leading 8 bytes (big-endian) of the fingerprint of
	// every fenceStride-th entry: a 128 KB summary of a 1M-entry table,
	// built during the verification pass, that keeps the search of the
	// cold 72 MB down to one block of fenceStride entries.
	fence []uint64
}

// fenceStride is the number of entries per fence: 64 entries are 3 to
// 4.5 KB, about one page.
const fenceStride = 64

func (t *table) key(i int) []byte {
	off := t.hdr + i*t.esize
	return t.b[off : off+len(Fingerprint{}) : off+len(Fingerprint{})]
}

// find returns the index of fp in t, if present. It allocates nothing. It
// bisects the fence (small, usually cached) for the block that may hold fp,
// then bisects that block, whose entries share a page or two: a handful of
// cold cache lines instead of 20 scattered over the whole table. Entries
// whose leading 8 bytes are equal may span blocks; the range then covers
// them all.
func (t *table) find(fp *Fingerprint) (int, bool) {
	want := binary.BigEndian.Uint64(fp[:8])
	// Blocks [fLo, fHi) may hold want: fLo is the last block whose fence
	// is below want (entries before it are smaller), fHi the first whose
	// fence is above it.
	fHi, _ := slices.BinarySearch(t.fence, want+1)
	if want == math.MaxUint64 {
		fHi = len(t.fence)
	}
	fLo, _ := slices.BinarySearch(t.fence, want)
	fLo = max(fLo-1, 0)
	lo, hi := fLo*fenceStride, min(fHi*fenceStride, t.n)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		k := t.key(m)
		c := 0
		if got := binary.BigEndian.Uint64(k[:8]); got < want {
			c = -1
		} else if got > want {
			c = 1
		} else {
			c = bytes.Compare(k[8:], fp[8:])
		}
		switch {
		case c < 0:
			lo = m + 1
		case c > 0:
			hi = m
		default:
			return m, true
		}
	}
	return 0, false
}

// buildFence fills t.fence from the entries.
func (t *table) buildFence() {
	t.fence = make([]uint64, 0, (t.n+fenceStride-1)/fenceStride)
	for i := 0; i < t.n; i += fenceStride {
		t.fence = append(t.fence, binary.BigEndian.Uint64(t.key(i)))
	}
}

// at returns entry i as an entry value (no result held).
func (t *table) at(i int) entry {
	off := t.hdr + i*t.esize
	if t.esize == tableEntrySizeV3 {
		return entryV3(t.b[off : off+tableEntrySizeV3])
	}
	e := t.b[off : off+tableEntrySize]
	return entry{
		status:    Status(e[tableStatusOff]),
		intentLoc: getLoc(e[tableIntentOff:]),
		certLoc:   getLoc(e[tableCertOff:]),
	}
}

// entryV3 decodes a version 3 entry (format.go): the status is in the top
// two bits of the intent's offset.
func entryV3(e []byte) entry {
	io := binary.LittleEndian.Uint32(e[36:])
	return entry{
		status:    Status(io>>30) + StatusIntent,
		intentLoc: Loc{Segment: uint64(binary.LittleEndian.Uint32(e[32:])), Offset: int64(io & v3OffsetMask)},
		certLoc:   Loc{Segment: uint64(binary.LittleEndian.Uint32(e[40:])), Offset: int64(binary.LittleEndian.Uint32(e[44:]))},
	}
}

// v3OffsetMask keeps an offset's 30 bits in a version 3 entry.
const v3OffsetMask = 1<<30 - 1

// fitsV3 reports whether l fits a version 3 entry: a segment in 32 bits,
// an offset in 30 (a segment is at most 1 GiB, wal.MaxSegmentSize).
func fitsV3(l Loc) bool {
	return l.Segment <= math.MaxUint32 && l.Offset >= 0 && l.Offset <= v3OffsetMask
}

// putEntryV3 writes e's version 3 form after fp into rec.
func putEntryV3(rec []byte, fp *Fingerprint, e *entry) {
	copy(rec, fp[:])
	binary.LittleEndian.PutUint32(rec[32:], uint32(e.intentLoc.Segment))
	binary.LittleEndian.PutUint32(rec[36:], uint32(e.intentLoc.Offset)|uint32(e.status-StatusIntent)<<30)
	binary.LittleEndian.PutUint32(rec[40:], uint32(e.certLoc.Segment))
	binary.LittleEndian.PutUint32(rec[44:], uint32(e.certLoc.Offset))
}

// putEntry writes e's version 1 and 2 form after fp into rec.
func putEntry(rec []byte, fp *Fingerprint, e *entry) {
	copy(rec, fp[:])
	rec[tableStatusOff] = byte(e.status)
	clear(rec[tableStatusOff+1 : tableIntentOff])
	putLoc(rec[tableIntentOff:], e.intentLoc)
	putLoc(rec[tableCertOff:], e.certLoc)
}

func getLoc(b []byte) Loc {
	return Loc{Segment: binary.LittleEndian.Uint64(b), Offset: int64(binary.LittleEndian.Uint64(b[8:]))}
}

func putLoc(b []byte, l Loc) {
	binary.LittleEndian.PutUint64(b, l.Segment)
	binary.LittleEndian.PutUint64(b[8:], uint64(l.Offset))
}

// tableWriter appends a table to a buffer, entries in ascending order. A
// table with an origin is written as version 3 (48-byte entries) while
// every location fits one; the first that does not turns what was written
// into version 2 (72-byte entries), which takes any.
type tableWriter struct {
	buf    []byte
	start  int
	hdr    int
	esize  int
	origin *TableOrigin // nil: a version 1 table (no origin)
	n      int
	counts [5]int
}

func newTableWriter(dst []byte, n int, origin *TableOrigin) *tableWriter {
	hdr, esize := tableHeaderSize, tableEntrySize
	if origin != nil {
		hdr, esize = tableHeaderSizeV2, tableEntrySizeV3
	}
	dst = slices.Grow(dst, hdr+n*esize)
	w := &tableWriter{buf: dst, start: len(dst), hdr: hdr, esize: esize, origin: origin}
	w.buf = append(w.buf, make([]byte, hdr)...)
	return w
}

func (w *tableWriter) add(fp *Fingerprint, e *entry) {
	if w.esize == tableEntrySizeV3 && !(fitsV3(e.intentLoc) && fitsV3(e.certLoc)) {
		w.widen()
	}
	var rec [tableEntrySize]byte
	if w.esize == tableEntrySizeV3 {
		putEntryV3(rec[:], fp, e)
	} else {
		putEntry(rec[:], fp, e)
	}
	w.buf = append(w.buf, rec[:w.esize]...)
	w.n++
	w.counts[e.status]++
}

// widen rewrites the version 3 entries written so far as version 2's.
func (w *tableWriter) widen() {
	body := w.start + w.hdr
	old := slices.Clone(w.buf[body:])
	w.buf = slices.Grow(w.buf[:body], (w.n+1)*tableEntrySize)
	var rec [tableEntrySize]byte
	for i := range w.n {
		e := old[i*tableEntrySizeV3 : (i+1)*tableEntrySizeV3]
		ent := entryV3(e)
		putEntry(rec[:], (*Fingerprint)(e[:32]), &ent)
		w.buf = append(w.buf, rec[:]...)
	}
	w.esize = tableEntrySize
}

// finish writes the header and returns the whole buffer and the table part.
func (w *tableWriter) finish() ([]byte, table) {
	h := w.buf[w.start : w.start+w.hdr]
	copy(h, tableMagic)
	binary.LittleEndian.PutUint16(h[6:], uint16(w.esize))
	binary.LittleEndian.PutUint64(h[8:], uint64(w.n))
	body := crc32c.Checksum(w.buf[w.start+w.hdr:])
	var origin TableOrigin
	if w.origin == nil {
		binary.LittleEndian.PutUint16(h[4:], tableVersion)
		binary.LittleEndian.PutUint32(h[16:], body)
		binary.LittleEndian.PutUint32(h[20:], crc32c.Checksum(h[:20]))
	} else {
		origin = *w.origin
		v := uint16(tableVersion3)
		if w.esize == tableEntrySize {
			v = tableVersion2
		}
		binary.LittleEndian.PutUint16(h[4:], v)
		binary.LittleEndian.PutUint64(h[16:], origin.Gen)
		putLoc(h[24:], origin.Pos)
		binary.LittleEndian.PutUint32(h[40:], body)
		binary.LittleEndian.PutUint32(h[44:], crc32c.Checksum(h[:44]))
	}
	t := table{b: w.buf[w.start:len(w.buf):len(w.buf)], hdr: w.hdr, esize: w.esize, origin: origin, n: w.n, counts: w.counts}
	t.buildFence()
	return w.buf, t
}

// parseTable verifies b as a table: header, checksums, statuses, reserved
// bytes and strict order. It keeps b and allocates only the fence.
func parseTable(b []byte) (table, error) {
	hdr, esize, origin, bodyCRC, err := parseTableHeader(b)
	if err != nil {
		return table{}, err
	}
	count := binary.LittleEndian.Uint64(b[8:])
	body := b[hdr:]
	if count > uint64(len(body)/esize) || uint64(len(body)) != count*uint64(esize) {
		return table{}, corruptf("table", 8, "%d entries need %d bytes after the header, have %d",
			count, count*uint64(esize), len(body))
	}
	// One pass, a chunk at a time so that the checksum and the entry checks
	// read each byte from cache once.
	t := table{b: b[:len(b):len(b)], hdr: hdr, esize: esize, origin: origin, n: int(count)}
	t.fence = make([]uint64, 0, (t.n+fenceStride-1)/fenceStride)
	const chunk = fenceStride // entries
	crc := uint32(0)
	var prev uint64 // first 8 bytes of the previous fingerprint, big-endian
	for lo := 0; lo < t.n; lo += chunk {
		hi := min(lo+chunk, t.n)
		crc = crc32c.Update(crc, body[lo*esize:hi*esize])
		for i := lo; i < hi; i++ {
			off := hdr + i*esize
			e := b[off : off+esize]
			var st Status
			if esize == tableEntrySizeV3 {
				// Two bits of status: every value is one.
				st = Status(e[39]>>6) + StatusIntent
			} else if w := binary.LittleEndian.Uint64(e[tableStatusOff:]); w >= uint64(StatusIntent) && w <= uint64(StatusResolved) {
				// Status and the reserved bytes as one little-endian
				// word: the status in the low byte, zeros above.
				st = Status(w)
			} else {
				if st := e[tableStatusOff]; st < byte(StatusIntent) || st > byte(StatusResolved) {
					return table{}, corruptf("table", off+tableStatusOff, "entry %d has bad status %d", i, st)
				}
				k := 1
				for e[tableStatusOff+k] == 0 {
					k++
				}
				return table{}, corruptf("table", off+tableStatusOff+k, "entry %d has non-zero reserved byte", i)
			}
			t.counts[st]++
			head := binary.BigEndian.Uint64(e)
			if i > 0 && (head < prev || (head == prev && bytes.Compare(b[off-esize:off-esize+32], e[:32]) >= 0)) {
				return table{}, corruptf("table", off, "entry %d is not in ascending fingerprint order", i)
			}
			prev = head
			if i%fenceStride == 0 {
				t.fence = append(t.fence, head)
			}
		}
	}
	if crc != bodyCRC {
		return table{}, corruptf("table", hdr-8, "body checksum %#08x, want %#08x", crc, bodyCRC)
	}
	return t, nil
}

// parseTableHeader checks a table's header (magic, version, checksum,
// entry size) and returns its size, the size of its entries, the table's
// origin (zero for version 1) and the stored checksum of the entries.
func parseTableHeader(b []byte) (hdr, esize int, origin TableOrigin, bodyCRC uint32, err error) {
	if len(b) < 6 {
		return 0, 0, origin, 0, corruptf("table", len(b), "truncated header (%d bytes)", len(b))
	}
	if string(b[:4]) != tableMagic {
		return 0, 0, origin, 0, corruptf("table", 0, "bad magic %q", b[:4])
	}
	v := binary.LittleEndian.Uint16(b[4:])
	switch v {
	case tableVersion:
		hdr, esize = tableHeaderSize, tableEntrySize
	case tableVersion2:
		hdr, esize = tableHeaderSizeV2, tableEntrySize
	case tableVersion3:
		hdr, esize = tableHeaderSizeV2, tableEntrySizeV3
	default:
		return 0, 0, origin, 0, corruptf("table", 4, "unknown version %d", v)
	}
	if len(b) < hdr {
		return 0, 0, origin, 0, corruptf("table", len(b), "truncated header (%d bytes, want %d)", len(b), hdr)
	}
	if got, want := crc32c.Checksum(b[:hdr-4]), binary.LittleEndian.Uint32(b[hdr-4:]); got != want {
		return 0, 0, origin, 0, corruptf("table", hdr-4, "header checksum %#08x, want %#08x", got, want)
	}
	if s := binary.LittleEndian.Uint16(b[6:]); int(s) != esize {
		return 0, 0, origin, 0, corruptf("table", 6, "entry size %d, want %d", s, esize)
	}
	if v != tableVersion {
		origin = TableOrigin{Gen: binary.LittleEndian.Uint64(b[16:]), Pos: getLoc(b[24:])}
	}
	return hdr, esize, origin, binary.LittleEndian.Uint32(b[hdr-8:]), nil
}

// TableOrigin is what a persisted table derives from: the generation of
// the engine checkpoint that wrote it and the log position its records
// end at (the checkpoint's replay position). A version 1 table has none
// (the zero value).
type TableOrigin struct {
	Gen uint64
	Pos Loc
}

// ReadTableOrigin checks b's header (not its entries: LoadTable does) and
// returns the origin it names, so that a caller can tell a table written
// for another checkpoint (an older copy, a file of another store) before
// it loads it. A version 1 table has the zero origin.
func ReadTableOrigin(b []byte) (TableOrigin, error) {
	_, _, origin, _, err := parseTableHeader(b)
	return origin, err
}
