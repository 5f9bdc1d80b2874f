package snapshot

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/internal/runid"
)

// The on-disk format of the snapshot store: the Pebble keys it writes and the
// encoding of their values.
//
// Keys. Every key starts with one byte naming its keyspace. Run ids follow
// the run-id rule (internal/runid: 1 to MaxRunIDLen bytes of UTF-8 without
// control characters; a key holding any other id is corruption). They are
// length-prefixed with a minimal uvarint, which is a prefix-free code, so
// the keys of one run form one contiguous range that no other run's keys
// interleave with (run "a" and run "a b" and run "ab" each have their own
// range), whatever bytes the ids hold. Seqs are 8-byte big-endian, so
// within a run, key order is seq order.
//
//	format marker   0x00 "format"                        -> "CNSS" | version (1 byte)
//	snapshot count  0x00 "count"                         -> uint64, big-endian
//	snapshot        's' | uvarint(len(run)) | run | seq  -> snapshot value (below)
//	atom position   'p' | uvarint(len(run)) | run | seq  -> uvarint(segment) | uvarint(offset)
//	engine metadata 'm' | key                            -> opaque bytes
//
// Snapshot value (version 1), all integers big-endian:
//
//	offset  size  field
//	     0     4  magic "CSNP" (0x43 0x53 0x4e 0x50)
//	     4     1  version = 1
//	     5     1  flags = 0 (reserved; any other value is corruption)
//	     6     8  Created: Unix seconds, int64
//	    14     4  Created: nanoseconds within the second, uint32, < 1e9
//	    18    32  Head: the run's chain head at Seq
//	    50     4  N: frame length, uint32, <= MaxFrameSize
//	    54     N  Frame: opaque bytes (encoded and compressed by the caller)
//	  54+N     4  CRC-32C (Castagnoli) of key || value[0 : 54+N]
//
// The checksum covers the key, so a value moved under another run or seq is
// detected as corruption. The encoding is canonical: a value that decodes
// re-encodes to the same bytes.
//
// These constants, the key layout and the value layout are frozen: stores
// written with them must stay readable. A change of layout takes a new
// version byte (and a new FormatVersion for keys) and keeps a decoder for the
// old one.
const (
	// FormatVersion is the version of the key layout, kept in the store's
	// format marker and checked by Open.
	FormatVersion = 1

	// ValueVersion is the version byte of a snapshot value.
	ValueVersion = 1

	// MaxRunIDLen bounds the length of a run id in bytes: the run-id rule's
	// bound, runid.MaxLen (the engine's). Stores written before the rule
	// took 4096-byte ids; the engine never wrote one over 256 bytes, and a
	// key holding a longer id is now corruption.
	MaxRunIDLen = runid.MaxLen

	// MaxFrameSize bounds the encoded frame carried by one snapshot.
	MaxFrameSize = 256 << 20

	// MaxMetaKeyLen and MaxMetaValueLen bound PutMeta's arguments.
	MaxMetaKeyLen   = 1024
	MaxMetaValueLen = 64 << 20
)

const (
	valueMagic     = "CSNP"
	formatMagic    = "CNSS"
	valueHeaderLen = 4 + 1 + 1 + 8 + 4 + 32 + 4 // up to and including the frame length
	valueTrailer   = 4                          // CRC-32C
	seqLen         = 8

	spaceSnapshot = 's'
	spacePosition = 'p'
	spaceMeta     = 'm'
	spaceSystem   = 0x00
)

var (
	keyFormat = []byte("\x00format")
	keyCount  = []byte("\x00count")
)

// AppendSnapshotKey appends the Pebble key of run runID's snapshot at seq to
// dst. It is the key DecodeSnapshot expects beside the value.
func AppendSnapshotKey(dst []byte, runID string, seq uint64) []byte {
	return appendRunKey(dst, spaceSnapshot, runID, seq)
}

func appendRunPrefix(dst []byte, space byte, runID string) []byte {
	dst = append(dst, space)
	dst = binary.AppendUvarint(dst, uint64(len(runID)))
	return append(dst, runID...)
}

func appendRunKey(dst []byte, space byte, runID string, seq uint64) []byte {
	dst = appendRunPrefix(dst, space, runID)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// runBounds returns the key range [lo, hi) holding every key of runID in
// space.
func runBounds(space byte, runID string) (lo, hi []byte) {
	lo = appendRunKey(nil, space, runID, 0)
	hi = append(appendRunKey(nil, space, runID, math.MaxUint64), 0)
	return lo, hi
}

// seqBounds returns the key range [lo, hi) holding the keys of runID in space
// with from <= seq <= to.
func seqBounds(space byte, runID string, from, to uint64) (lo, hi []byte) {
	lo = appendRunKey(nil, space, runID, from)
	hi = append(appendRunKey(nil, space, runID, to), 0)
	return lo, hi
}

// parseRunKey splits a key of space into its run id and seq. It accepts only
// the exact encoding appendRunKey produces.
func parseRunKey(space byte, key []byte) (runID string, seq uint64, err error) {
	if len(key) == 0 || key[0] != space {
		return "", 0, fmt.Errorf("%w: key %q: not a %q key", ErrCorrupt, key, space)
	}
	n, w := binary.Uvarint(key[1:])
	if w <= 0 {
		return "", 0, fmt.Errorf("%w: key %q: bad run id length", ErrCorrupt, key)
	}
	if w != uvarintLen(n) {
		return "", 0, fmt.Errorf("%w: key %q: non-minimal run id length", ErrCorrupt, key)
	}
	if n == 0 || n > MaxRunIDLen {
		return "", 0, fmt.Errorf("%w: key %q: run id length %d out of range [1, %d]", ErrCorrupt, key, n, MaxRunIDLen)
	}
	rest := key[1+w:]
	if uint64(len(rest)) != n+seqLen {
		return "", 0, fmt.Errorf("%w: key %q: %d bytes after the run id length, want %d", ErrCorrupt, key, len(rest), n+seqLen)
	}
	runID = string(rest[:n])
	if err := runid.Check(runID); err != nil {
		return "", 0, fmt.Errorf("%w: key %q: %v", ErrCorrupt, key, err)
	}
	return runID, binary.BigEndian.Uint64(rest[n:]), nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// AppendSnapshot appends the encoding of s (the value stored under
// AppendSnapshotKey(nil, s.RunID, s.Seq)) to dst and returns the extended
// slice. The checksum covers that key too. s must be valid (see
// Snapshot.Validate); for a nil or invalid s, AppendSnapshot returns dst
// unchanged. Batch.PutSnapshot validates and reports why.
func AppendSnapshot(dst []byte, s *Snapshot) []byte {
	if s.Validate() != nil {
		return dst
	}
	key := AppendSnapshotKey(nil, s.RunID, s.Seq)
	start := len(dst)
	dst = append(dst, valueMagic...)
	dst = append(dst, ValueVersion, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.Created.Unix()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(s.Created.Nanosecond()))
	dst = append(dst, s.Head[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s.Frame)))
	dst = append(dst, s.Frame...)
	crc := crc32c.Update(crc32c.Checksum(key), dst[start:])
	return binary.BigEndian.AppendUint32(dst, crc)
}

// DecodeSnapshot decodes the snapshot stored under key with value val. It
// never panics; a malformed key or value gives an error wrapping ErrCorrupt
// that names the run and seq (or the key) and says what is wrong. The
// returned Snapshot does not alias key or val. Created is in UTC.
func DecodeSnapshot(key, val []byte) (*Snapshot, error) {
	runID, seq, err := parseRunKey(spaceSnapshot, key)
	if err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: run %q seq %d: %s", ErrCorrupt, runID, seq, fmt.Sprintf(format, args...))
	}
	if len(val) < valueHeaderLen+valueTrailer {
		return nil, bad("value is %d bytes, shorter than the %d-byte minimum", len(val), valueHeaderLen+valueTrailer)
	}
	if string(val[:4]) != valueMagic {
		return nil, bad("bad magic %q, want %q", val[:4], valueMagic)
	}
	if val[4] != ValueVersion {
		return nil, bad("unknown value version %d, want %d", val[4], ValueVersion)
	}
	if val[5] != 0 {
		return nil, bad("reserved flags byte is %#x, want 0", val[5])
	}
	frameLen := binary.BigEndian.Uint32(val[50:54])
	if frameLen > MaxFrameSize {
		return nil, bad("frame length %d exceeds the %d-byte limit", frameLen, MaxFrameSize)
	}
	if want := valueHeaderLen + int(frameLen) + valueTrailer; len(val) != want {
		return nil, bad("value is %d bytes, want %d for a %d-byte frame (truncated or trailing bytes)", len(val), want, frameLen)
	}
	body := val[:len(val)-valueTrailer]
	got := binary.BigEndian.Uint32(val[len(val)-valueTrailer:])
	if want := crc32c.Update(crc32c.Checksum(key), body); got != want {
		return nil, bad("checksum mismatch: stored %#08x, computed %#08x", got, want)
	}
	nanos := binary.BigEndian.Uint32(val[14:18])
	if nanos >= 1e9 {
		return nil, bad("created nanoseconds %d out of range", nanos)
	}
	s := &Snapshot{
		RunID:   runID,
		Seq:     seq,
		Created: time.Unix(int64(binary.BigEndian.Uint64(val[6:14])), int64(nanos)).UTC(),
		Frame:   append([]byte(nil), val[valueHeaderLen:valueHeaderLen+int(frameLen)]...),
	}
	copy(s.Head[:], val[18:50])
	return s, nil
}

func appendPos(dst []byte, p Pos) []byte {
	dst = binary.AppendUvarint(dst, p.Segment)
	return binary.AppendUvarint(dst, uint64(p.Offset))
}

func decodePos(runID string, seq uint64, val []byte) (Pos, error) {
	seg, w1 := binary.Uvarint(val)
	if w1 <= 0 {
		return Pos{}, fmt.Errorf("%w: run %q seq %d: position value %x: bad segment", ErrCorrupt, runID, seq, val)
	}
	off, w2 := binary.Uvarint(val[w1:])
	if w2 <= 0 || off > math.MaxInt64 || w1+w2 != len(val) {
		return Pos{}, fmt.Errorf("%w: run %q seq %d: position value %x: bad offset or trailing bytes", ErrCorrupt, runID, seq, val)
	}
	// One position, one encoding: a non-minimal varint is corrupt, as in
	// every other decoder of the store.
	if w1 != len(binary.AppendUvarint(nil, seg)) || w2 != len(binary.AppendUvarint(nil, off)) {
		return Pos{}, fmt.Errorf("%w: run %q seq %d: position value %x: non-minimal varint", ErrCorrupt, runID, seq, val)
	}
	return Pos{Segment: seg, Offset: int64(off)}, nil
}

// validRunID reports, wrapping ErrInvalid, why runID cannot name a run
// (runid.Check), or nil.
func validRunID(runID string) error {
	if err := runid.Check(runID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}
