package ledger

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"slices"
)

// table is a loaded persisted index: the bytes AppendTable wrote, verified
// once and then binary-searched in place. It is immutable once built.
type table struct {
	b      []byte // the whole table, header included; nil: no table
	n      int    // number of entries
	counts [5]int // entries per Status
}

func (t *table) key(i int) []byte {
	off := tableHeaderSize + i*tableEntrySize
	return t.b[off : off+len(Fingerprint{}) : off+len(Fingerprint{})]
}

// find returns the index of fp in t, if present. It reads only the probed
// entries and allocates nothing. Fingerprints are uniform (they are BLAKE3
// outputs), so it first interpolates on their leading 8 bytes, which finds
// an entry of a 1M-entry table in about 4 probes instead of 20; after 8
// probes it falls back to bisection, so that any sorted table, however
// skewed, costs O(log n).
func (t *table) find(fp *Fingerprint) (int, bool) {
	want := binary.BigEndian.Uint64(fp[:8])
	lo, hi := 0, t.n-1 // inclusive bounds
	for step := 0; lo <= hi; step++ {
		m := int(uint(lo+hi) >> 1)
		if step < 8 {
			klo := binary.BigEndian.Uint64(t.key(lo))
			khi := binary.BigEndian.Uint64(t.key(hi))
			if want < klo || want > khi {
				return 0, false
			}
			m = lo
			if d := khi - klo; d != 0 {
				// (want-klo)*(hi-lo)/d <= hi-lo; the high word of the
				// product is below d, so Div64 cannot overflow.
				ph, pl := bits.Mul64(want-klo, uint64(hi-lo))
				q, _ := bits.Div64(ph, pl, d)
				m = lo + int(q)
			}
		}
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
			hi = m - 1
		default:
			return m, true
		}
	}
	return 0, false
}

// at returns entry i as an entry value (no result held).
func (t *table) at(i int) entry {
	off := tableHeaderSize + i*tableEntrySize
	e := t.b[off : off+tableEntrySize]
	return entry{
		status:    Status(e[tableStatusOff]),
		intentLoc: getLoc(e[tableIntentOff:]),
		certLoc:   getLoc(e[tableCertOff:]),
	}
}

func getLoc(b []byte) Loc {
	return Loc{Segment: binary.LittleEndian.Uint64(b), Offset: int64(binary.LittleEndian.Uint64(b[8:]))}
}

func putLoc(b []byte, l Loc) {
	binary.LittleEndian.PutUint64(b, l.Segment)
	binary.LittleEndian.PutUint64(b[8:], uint64(l.Offset))
}

// tableWriter appends a table to a buffer, entries in ascending order.
type tableWriter struct {
	buf    []byte
	start  int
	n      int
	counts [5]int
}

func newTableWriter(dst []byte, n int) *tableWriter {
	dst = slices.Grow(dst, tableHeaderSize+n*tableEntrySize)
	w := &tableWriter{buf: dst, start: len(dst)}
	w.buf = append(w.buf, make([]byte, tableHeaderSize)...)
	return w
}

func (w *tableWriter) add(fp *Fingerprint, e *entry) {
	var rec [tableEntrySize]byte
	copy(rec[:], fp[:])
	rec[tableStatusOff] = byte(e.status)
	putLoc(rec[tableIntentOff:], e.intentLoc)
	putLoc(rec[tableCertOff:], e.certLoc)
	w.buf = append(w.buf, rec[:]...)
	w.n++
	w.counts[e.status]++
}

// finish writes the header and returns the whole buffer and the table part.
func (w *tableWriter) finish() ([]byte, table) {
	h := w.buf[w.start : w.start+tableHeaderSize]
	copy(h, tableMagic)
	binary.LittleEndian.PutUint16(h[4:], tableVersion)
	binary.LittleEndian.PutUint16(h[6:], tableEntrySize)
	binary.LittleEndian.PutUint64(h[8:], uint64(w.n))
	binary.LittleEndian.PutUint32(h[16:], crc32.Checksum(w.buf[w.start+tableHeaderSize:], crcTable))
	binary.LittleEndian.PutUint32(h[20:], crc32.Checksum(h[:20], crcTable))
	tb := w.buf[w.start:len(w.buf):len(w.buf)]
	return w.buf, table{b: tb, n: w.n, counts: w.counts}
}

// parseTable verifies b as a table: header, checksums, statuses, reserved
// bytes and strict order. It allocates nothing and keeps b.
func parseTable(b []byte) (table, error) {
	if len(b) < tableHeaderSize {
		return table{}, corruptf("table", len(b), "truncated header (%d bytes, want %d)", len(b), tableHeaderSize)
	}
	if string(b[:4]) != tableMagic {
		return table{}, corruptf("table", 0, "bad magic %q", b[:4])
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != tableVersion {
		return table{}, corruptf("table", 4, "unknown version %d", v)
	}
	if got, want := crc32.Checksum(b[:20], crcTable), binary.LittleEndian.Uint32(b[20:]); got != want {
		return table{}, corruptf("table", 20, "header checksum %#08x, want %#08x", got, want)
	}
	if s := binary.LittleEndian.Uint16(b[6:]); s != tableEntrySize {
		return table{}, corruptf("table", 6, "entry size %d, want %d", s, tableEntrySize)
	}
	count := binary.LittleEndian.Uint64(b[8:])
	body := b[tableHeaderSize:]
	if count > uint64(len(body)/tableEntrySize) || uint64(len(body)) != count*tableEntrySize {
		return table{}, corruptf("table", 8, "%d entries need %d bytes after the header, have %d",
			count, count*tableEntrySize, len(body))
	}
	// One pass, a chunk at a time so that the checksum and the entry checks
	// read each byte from cache once.
	t := table{b: b[:len(b):len(b)], n: int(count)}
	const chunk = 64 // entries
	crc := uint32(0)
	var prev uint64 // first 8 bytes of the previous fingerprint, big-endian
	for lo := 0; lo < t.n; lo += chunk {
		hi := min(lo+chunk, t.n)
		crc = crc32.Update(crc, crcTable, body[lo*tableEntrySize:hi*tableEntrySize])
		for i := lo; i < hi; i++ {
			off := tableHeaderSize + i*tableEntrySize
			e := b[off : off+tableEntrySize]
			// Status and the reserved bytes as one little-endian word: the
			// status in the low byte, zeros above.
			if w := binary.LittleEndian.Uint64(e[tableStatusOff:]); w < uint64(StatusIntent) || w > uint64(StatusResolved) {
				if st := e[tableStatusOff]; st < byte(StatusIntent) || st > byte(StatusResolved) {
					return table{}, corruptf("table", off+tableStatusOff, "entry %d has bad status %d", i, st)
				}
				k := 1
				for e[tableStatusOff+k] == 0 {
					k++
				}
				return table{}, corruptf("table", off+tableStatusOff+k, "entry %d has non-zero reserved byte", i)
			}
			t.counts[e[tableStatusOff]]++
			head := binary.BigEndian.Uint64(e)
			if i > 0 && (head < prev || (head == prev && bytes.Compare(b[off-tableEntrySize:off-tableEntrySize+32], e[:32]) >= 0)) {
				return table{}, corruptf("table", off, "entry %d is not in ascending fingerprint order", i)
			}
			prev = head
		}
	}
	if want := binary.LittleEndian.Uint32(b[16:]); crc != want {
		return table{}, corruptf("table", 16, "body checksum %#08x, want %#08x", crc, want)
	}
	return t, nil
}
