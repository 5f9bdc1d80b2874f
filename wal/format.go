package wal

import (
	"encoding/binary"
	"fmt"

	"github.com/continuumdb/continuum/internal/crc32c"
)

// On-disk format, version 1. Every constant in this file is FROZEN: a change
// makes existing logs unreadable, so it needs a new FormatVersion and a
// reader for the old one.
//
// A log is a directory of segment files named "%016x.wal" after their
// segment id (1, 2, 3, ... with no gaps). Every segment starts with a
// 40-byte header, followed by 8-byte aligned records:
//
//	segment header (SegmentHeaderSize = 40 bytes, little endian)
//	+--------+---------+-------+------------+-------------+-------+--------+
//	| 0..8   | 8..12   | 12..16| 16..24     | 24..32      | 32..36| 36..40 |
//	| magic  | version | flags | segment id | first offset| crc   | zero   |
//	+--------+---------+-------+------------+-------------+-------+--------+
//	  magic  = "CNTMWAL\x00"; version = 1; flags = 0;
//	  first offset = offset of the first record (40), so the first Pos of the
//	  segment is {id, 40}; crc = CRC32C(bytes 0..32).
//
//	record (RecordHeaderSize = 16 bytes, then payload, then zero padding
//	up to the next multiple of 8)
//	+---------+---------+------+------+---------+----------+-------------+-----+
//	| 0..4    | 4..8    | 8    | 9    | 10..12  | 12..16   | 16..16+len  | pad |
//	| crc     | length  | type | zero | hcheck  | synced   | payload     | 0s  |
//	+---------+---------+------+------+---------+----------+-------------+-----+
//	  crc    = CRC32C(segment id as 8 LE bytes || header bytes 4..16 || payload):
//	           it covers the header, the payload and the segment id, so the
//	           stale bytes of another segment never validate here.
//	  length = payload length, at most MaxRecordSize and never past the
//	           segment's end; checked before anything is allocated.
//	  type   = 1 (data, last of its batch), 2 (data, more of its batch
//	           follow), 3 (seal: the segment ends here; no payload).
//	  hcheck = low 16 bits of CRC32C(segment id || header bytes 4..10 ||
//	           header bytes 12..16): lets recovery trust a length whose
//	           payload failed its crc, and skip garbage quickly.
//	  synced = the offset up to which this segment was durable (fdatasync
//	           returned) when the write holding this record was issued.
//	           A valid record whose synced field lies past a bad record
//	           proves that bad record had been made durable: recovery then
//	           reports corruption instead of trimming a torn tail.
//
// A batch is a run of type-2 records closed by a type-1 record; a batch never
// spans segments. A sealed segment ends with a seal record; the newest
// segment may end anywhere (its tail is found by scanning records). An
// all-zero record header marks the end of written data: segments are
// zero-filled ahead of use and never recycled with stale contents, and a
// writable Open zeroes whatever a crash left past the newest segment's tail
// before appending there.
const (
	// FormatVersion is the version written in every segment header.
	FormatVersion = 1
	// SegmentHeaderSize is the size of a segment header; the first record
	// of a segment starts at this offset.
	SegmentHeaderSize = 40
	// RecordHeaderSize is the size of the fixed record header.
	RecordHeaderSize = 16
	// RecordAlign is the alignment of every record start.
	RecordAlign = 8
	// MaxRecordSize bounds one record's payload: 64 MiB minus the room for a
	// segment header, a record header and a seal. A log also refuses records
	// that cannot fit in one of its segments (ErrTooLarge).
	MaxRecordSize = 64<<20 - SegmentHeaderSize - 2*RecordHeaderSize

	// MinSegmentSize and MaxSegmentSize bound Options.SegmentSize. Offsets
	// are stored in 32 bits, hence the upper bound.
	MinSegmentSize = 4 << 10
	MaxSegmentSize = 1 << 30
	// DefaultSegmentSize is used when Options.SegmentSize is zero.
	DefaultSegmentSize = 64 << 20

	segmentMagic = "CNTMWAL\x00"

	recTypeLast = 1 // data record that closes its batch
	recTypeMore = 2 // data record followed by more of its batch
	recTypeSeal = 3 // end of a sealed segment
)

// segmentName is the file name of segment id.
func segmentName(id uint64) string { return fmt.Sprintf("%016x.wal", id) }

// encodeSegmentHeader writes the header of segment id into b[:SegmentHeaderSize].
func encodeSegmentHeader(b []byte, id uint64) {
	_ = b[SegmentHeaderSize-1]
	copy(b[0:8], segmentMagic)
	binary.LittleEndian.PutUint32(b[8:12], FormatVersion)
	binary.LittleEndian.PutUint32(b[12:16], 0)
	binary.LittleEndian.PutUint64(b[16:24], id)
	binary.LittleEndian.PutUint64(b[24:32], SegmentHeaderSize)
	binary.LittleEndian.PutUint32(b[32:36], crc32c.Checksum(b[0:32]))
	binary.LittleEndian.PutUint32(b[36:40], 0)
}

// decodeSegmentHeader checks a segment header read from the file of segment
// want. It returns a reason for the first problem found, or "".
func decodeSegmentHeader(b []byte, want uint64) string {
	if len(b) < SegmentHeaderSize {
		return fmt.Sprintf("segment header is %d bytes, want %d", len(b), SegmentHeaderSize)
	}
	if string(b[0:8]) != segmentMagic {
		return fmt.Sprintf("bad magic %q", b[0:8])
	}
	if got, want := binary.LittleEndian.Uint32(b[32:36]), crc32c.Checksum(b[0:32]); got != want {
		return fmt.Sprintf("segment header checksum %08x, computed %08x", got, want)
	}
	if v := binary.LittleEndian.Uint32(b[8:12]); v != FormatVersion {
		return fmt.Sprintf("unsupported format version %d (this build reads %d)", v, FormatVersion)
	}
	if f := binary.LittleEndian.Uint32(b[12:16]); f != 0 && f != flagCompacted { // compact.go
		return fmt.Sprintf("unknown segment flags %#x", f)
	}
	if id := binary.LittleEndian.Uint64(b[16:24]); id != want {
		return fmt.Sprintf("header names segment %d, file name says %d", id, want)
	}
	if first := binary.LittleEndian.Uint64(b[24:32]); first != SegmentHeaderSize {
		return fmt.Sprintf("first record offset %d, want %d", first, SegmentHeaderSize)
	}
	if binary.LittleEndian.Uint32(b[36:40]) != 0 {
		return "nonzero padding in segment header"
	}
	return ""
}

// recordHeader is a decoded record header.
type recordHeader struct {
	crc    uint32
	length uint32
	typ    byte
	synced uint32
}

// alignUp rounds n up to RecordAlign.
func alignUp(n int64) int64 { return (n + RecordAlign - 1) &^ (RecordAlign - 1) }

// recordSpan is the number of bytes a record with an n-byte payload
// occupies, padding included.
func recordSpan(n int) int64 { return alignUp(RecordHeaderSize + int64(n)) }

// sealSpan is the room a seal record needs; every segment reserves it.
const sealSpan = RecordHeaderSize

func segIDBytes(id uint64) [8]byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], id)
	return b
}

// segSeed is the CRC-32C of a segment's id bytes, which every checksum of
// its records starts with: computed once per segment or batch, it saves
// the writer two checksum updates per record, and a reader two and, as
// the id bytes passed by value escaped into crc32, two allocations.
func segSeed(seg *[8]byte) uint32 { return crc32c.Update(0, seg[:]) }

// headerCheckFrom is a record header's check, continued from seed,
// segSeed of the segment's id.
func headerCheckFrom(seed uint32, h []byte) uint16 {
	c := crc32c.Update(seed, h[4:10])
	c = crc32c.Update(c, h[12:16])
	return uint16(c)
}

// appendRecord appends one framed record (header, payload, padding) to dst.
func appendRecord(dst []byte, seg [8]byte, typ byte, synced uint32, payload []byte) []byte {
	return appendRecordFrom(dst, segSeed(&seg), typ, synced, payload)
}

// appendRecordFrom is appendRecord with seed, segSeed of the segment's id.
func appendRecordFrom(dst []byte, seed uint32, typ byte, synced uint32, payload []byte) []byte {
	start := len(dst)
	span := int(recordSpan(len(payload)))
	dst = append(dst, make([]byte, span)...)
	h := dst[start : start+RecordHeaderSize]
	binary.LittleEndian.PutUint32(h[4:8], uint32(len(payload)))
	h[8] = typ
	h[9] = 0
	binary.LittleEndian.PutUint32(h[12:16], synced)
	binary.LittleEndian.PutUint16(h[10:12], headerCheckFrom(seed, h))
	copy(dst[start+RecordHeaderSize:], payload)
	c := crc32c.Update(seed, h[4:16])
	c = crc32c.Update(c, payload)
	binary.LittleEndian.PutUint32(h[0:4], c)
	return dst
}

// parseHeader checks a record header found at offset off of the segment
// whose checksum seed is seed (segSeed), whose records may not extend
// past limit. It returns a reason for the first problem, or "". It does
// not check the payload crc.
func parseHeader(h []byte, seed uint32, off, limit int64) (recordHeader, string) {
	rh := recordHeader{
		crc:    binary.LittleEndian.Uint32(h[0:4]),
		length: binary.LittleEndian.Uint32(h[4:8]),
		typ:    h[8],
		synced: binary.LittleEndian.Uint32(h[12:16]),
	}
	if got := binary.LittleEndian.Uint16(h[10:12]); got != headerCheckFrom(seed, h) {
		return rh, "record header check failed"
	}
	switch rh.typ {
	case recTypeLast, recTypeMore:
	case recTypeSeal:
		if rh.length != 0 {
			return rh, fmt.Sprintf("seal record with %d-byte payload", rh.length)
		}
	default:
		return rh, fmt.Sprintf("unknown record type %d", rh.typ)
	}
	if h[9] != 0 {
		return rh, "nonzero reserved byte in record header"
	}
	if rh.length > MaxRecordSize {
		return rh, fmt.Sprintf("record length %d exceeds the maximum %d", rh.length, MaxRecordSize)
	}
	if end := off + recordSpan(int(rh.length)); end > limit {
		return rh, fmt.Sprintf("record of %d bytes runs past the segment end %d", rh.length, limit)
	}
	if int64(rh.synced) > off || rh.synced < SegmentHeaderSize {
		return rh, fmt.Sprintf("synced mark %d out of range [%d, %d]", rh.synced, SegmentHeaderSize, off)
	}
	return rh, ""
}

// payloadOK reports whether the record crc matches header and payload,
// from seed (segSeed).
func payloadOK(h []byte, seed uint32, payload []byte, want uint32) bool {
	c := crc32c.Update(seed, h[4:16])
	c = crc32c.Update(c, payload)
	return c == want
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
