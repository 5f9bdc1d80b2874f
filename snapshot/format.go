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
//	chunk           'c' | uvarint(len(run)) | run | hash -> chunk value (below)
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
// re-encodes to the same bytes. Version 1 values are written for an opaque
// frame (Snapshot.Plain unset: a sealed one, say) and stay readable.
//
// Snapshot value (version 2, "chunked"), for a plain frame (Snapshot.Plain:
// the frame's raw encoding), whose bytes are stored apart in chunks of the
// run, shared by the run's snapshots; all integers big-endian:
//
//	offset  size  field
//	     0     4  magic "CSNP" (0x43 0x53 0x4e 0x50)
//	     4     1  version = 2
//	     5     1  flags = 0 (reserved; any other value is corruption)
//	     6     8  Created: Unix seconds, int64
//	    14     4  Created: nanoseconds within the second, uint32, < 1e9
//	    18    32  Head: the run's chain head at Seq
//	    50     4  N: frame length, uint32, <= MaxFrameSize
//	    54     4  K: chunk count, uint32
//	    58        K chunk references, in frame order, each:
//	                16  hash: BLAKE3-256 of the chunk's raw bytes, first 16 bytes
//	                 v  raw length, minimal uvarint, 1 to ChunkMaxSize
//	   end     4  CRC-32C (Castagnoli) of key || value up to here
//
// The raw lengths add up to N; the frame is the chunks' bytes concatenated.
// (A frame of 0 bytes has K = 0.)
//
// Chunk key: the run's prefix, then the chunk's 16-byte hash (as in its
// references). Chunk value, all integers big-endian:
//
//	offset  size  field
//	     0     4  magic "CSCK" (0x43 0x53 0x43 0x4b)
//	     4     1  chunk version = 1
//	     5     1  flags = 0 (reserved)
//	     6     4  L: raw length, uint32, 1 to ChunkMaxSize
//	    10     C  the chunk's L raw bytes, one s2 block (klauspost/compress/s2)
//	  10+C     4  CRC-32C of key || value[0 : 10+C]
//
// A chunk is read only if its checksum holds, its block decodes to exactly
// L bytes (checked before decoding) and L is its reference's length, and
// the BLAKE3 of the bytes matches the hash in its key. The s2 block is not
// canonical (another encoder may write other bytes for the same chunk):
// the raw bytes and their hash are what is checked.
//
// Chunk boundaries (ChunkBoundaries) are content-defined: a gear rolling
// hash (a table of 256 uint64 derived from a fixed seed) over the raw
// frame, cut between ChunkMinSize and ChunkMaxSize bytes, about every
// ChunkAvgSize. Readers do not depend on them (any split reads back), only
// deduplication does.
//
// These constants, the key layout and the value layout are frozen: stores
// written with them must stay readable. A change of layout takes a new
// version byte (and a new FormatVersion for keys) and keeps a decoder for the
// old one.
const (
	// FormatVersion is the version of the key layout, kept in the store's
	// format marker and checked by Open.
	FormatVersion = 1

	// ValueVersion is the version byte of a snapshot value with an opaque
	// frame; ChunkedValueVersion that of one whose plain frame is in chunks.
	ValueVersion        = 1
	ChunkedValueVersion = 2

	// ChunkVersion is the version byte of a chunk value.
	ChunkVersion = 1

	// ChunkHashLen is the length of a chunk's hash: a prefix of its
	// BLAKE3-256 (128 bits: a collision between chunks of one run is out of
	// reach by chance).
	ChunkHashLen = 16

	// ChunkMinSize, ChunkAvgSize and ChunkMaxSize bound the content-defined
	// chunks of a plain frame: none is shorter than ChunkMinSize but the
	// last, of the frame or of a stretch before one of the writer's cuts
	// (Snapshot.Cuts; a frame under it is one chunk), they average about
	// ChunkAvgSize,
	// and none is longer than ChunkMaxSize (a chunk value of more is
	// corruption).
	ChunkMinSize = 16 << 10
	ChunkAvgSize = 64 << 10
	ChunkMaxSize = 256 << 10

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
	valueMagic       = "CSNP"
	formatMagic      = "CNSS"
	valueHeaderLen   = 4 + 1 + 1 + 8 + 4 + 32 + 4 // up to and including the frame length
	valueTrailer     = 4                          // CRC-32C
	chunkedHeaderLen = valueHeaderLen + 4         // up to and including the chunk count
	chunkHeaderLen   = 4 + 1 + 1 + 4              // up to and including the raw length
	chunkMagic       = "CSCK"
	seqLen           = 8

	spaceSnapshot = 's'
	spaceChunk    = 'c'
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
	runID, rest, err := parseRunPrefix(space, key, seqLen)
	if err != nil {
		return "", 0, err
	}
	return runID, binary.BigEndian.Uint64(rest), nil
}

// parseRunPrefix splits a key of space into its run id and the suffixLen
// bytes after it. It accepts only the exact encoding appendRunPrefix
// produces, followed by exactly suffixLen bytes.
func parseRunPrefix(space byte, key []byte, suffixLen int) (runID string, suffix []byte, err error) {
	if len(key) == 0 || key[0] != space {
		return "", nil, fmt.Errorf("%w: key %q: not a %q key", ErrCorrupt, key, space)
	}
	n, w := binary.Uvarint(key[1:])
	if w <= 0 {
		return "", nil, fmt.Errorf("%w: key %q: bad run id length", ErrCorrupt, key)
	}
	if w != uvarintLen(n) {
		return "", nil, fmt.Errorf("%w: key %q: non-minimal run id length", ErrCorrupt, key)
	}
	if n == 0 || n > MaxRunIDLen {
		return "", nil, fmt.Errorf("%w: key %q: run id length %d out of range [1, %d]", ErrCorrupt, key, n, MaxRunIDLen)
	}
	rest := key[1+w:]
	if uint64(len(rest)) != n+uint64(suffixLen) {
		return "", nil, fmt.Errorf("%w: key %q: %d bytes after the run id length, want %d", ErrCorrupt, key, len(rest), n+uint64(suffixLen))
	}
	runID = string(rest[:n])
	if err := runid.Check(runID); err != nil {
		return "", nil, fmt.Errorf("%w: key %q: %v", ErrCorrupt, key, err)
	}
	return runID, rest[n:], nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// AppendSnapshot appends the version 1 encoding of s (the value stored
// under AppendSnapshotKey(nil, s.RunID, s.Seq)), its Frame inline whatever
// s.Plain says, to dst and returns the extended slice. The checksum covers
// that key too. s must be valid (see Snapshot.Validate); for a nil or
// invalid s, AppendSnapshot returns dst unchanged. Batch.PutSnapshot
// validates and reports why; it writes a plain frame as chunks instead
// (AppendChunkedSnapshot).
func AppendSnapshot(dst []byte, s *Snapshot) []byte {
	if s.Validate() != nil {
		return dst
	}
	start := len(dst)
	dst = appendValueHeader(dst, s, ValueVersion, len(s.Frame))
	dst = append(dst, s.Frame...)
	return appendValueCRC(dst, s, start)
}

// appendValueHeader appends the fields both value versions start with:
// magic, version, flags (0), Created, Head and the frame's length.
func appendValueHeader(dst []byte, s *Snapshot, version byte, frameLen int) []byte {
	dst = append(dst, valueMagic...)
	dst = append(dst, version, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.Created.Unix()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(s.Created.Nanosecond()))
	dst = append(dst, s.Head[:]...)
	return binary.BigEndian.AppendUint32(dst, uint32(frameLen))
}

// appendValueCRC appends the CRC-32C of s's key and the value dst[start:].
func appendValueCRC(dst []byte, s *Snapshot, start int) []byte {
	key := AppendSnapshotKey(nil, s.RunID, s.Seq)
	crc := crc32c.Update(crc32c.Checksum(key), dst[start:])
	return binary.BigEndian.AppendUint32(dst, crc)
}

// DecodeSnapshot decodes the version 1 snapshot stored under key with value
// val. (A version 2 value holds no frame, only references to the store's
// chunks: it is refused here, as ErrCorrupt, and read through a Store, or
// its fields with DecodeChunkedSnapshot.) It never panics; a malformed key or value gives an error wrapping ErrCorrupt
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
	if val[4] == ChunkedValueVersion {
		return nil, bad("a chunked value (version %d): its frame is in the store's chunks", val[4])
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
