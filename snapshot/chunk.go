package snapshot

// Content-defined chunking of plain frames, and the encoding of chunked
// snapshot values (version 2) and chunk values (format.go has the byte
// diagrams).

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/klauspost/compress/s2"
	"github.com/zeebo/blake3"
)

// ChunkRef names one chunk of a chunked snapshot: the first ChunkHashLen
// bytes of the BLAKE3-256 of its raw bytes, and their length.
type ChunkRef struct {
	Hash [ChunkHashLen]byte
	Len  int
}

// ChunkHash returns the hash a ChunkRef (and a chunk key) carries for the
// chunk raw: the first ChunkHashLen bytes of its BLAKE3-256.
func ChunkHash(raw []byte) (h [ChunkHashLen]byte) {
	sum := blake3.Sum256(raw)
	copy(h[:], sum[:ChunkHashLen])
	return h
}

// gear is the gear hash's table: 256 values of splitmix64 from a fixed
// seed, computed, not stored, identically on every platform (frozen: a new
// table would only cost deduplication against chunks already stored, but
// the golden test pins it anyway).
var gear = func() (t [256]uint64) {
	x := uint64(0x434e5353_63686e6b) // "CNSS" "chnk"
	for i := range t {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		t[i] = z ^ (z >> 31)
	}
	return t
}()

// Masks of the cut test, on the gear hash's high bits (those that depend on
// the last 64 bytes): harder before the average size, easier after it
// (FastCDC's normalized chunking), so that chunk sizes gather around
// ChunkAvgSize.
const (
	maskHard = uint64(1<<17-1) << (64 - 17)
	maskEasy = uint64(1<<15-1) << (64 - 15)
)

// ChunkBoundaries returns the end offsets of the content-defined chunks of
// raw, in order (the last is len(raw); none for an empty raw). A chunk ends
// where the gear rolling hash of the bytes before the cut satisfies the cut
// test, but never before ChunkMinSize bytes nor after ChunkMaxSize; raw
// shorter than ChunkMinSize is one chunk. Cuts depend only on the bytes
// near them, so an edit or an append moves only the cuts around it: the
// chunks elsewhere stay byte-identical, and deduplicate.
func ChunkBoundaries(raw []byte) []int {
	var ends []int
	for start := 0; start < len(raw); {
		n := cutPoint(raw[start:])
		start += n
		ends = append(ends, start)
	}
	return ends
}

// ChunkBoundariesAt returns the end offsets of the chunks of raw cut at
// cuts as well: each stretch between consecutive cuts (and before the
// first, and after the last) is cut by ChunkBoundaries on its own, so a
// chunk never spans a cut. Cuts not within raw, or not after the one
// before, are ignored; without cuts it is ChunkBoundaries(raw).
func ChunkBoundariesAt(raw []byte, cuts []int) []int {
	var ends []int
	start := 0
	for i := 0; i <= len(cuts); i++ {
		c := len(raw)
		if i < len(cuts) {
			c = cuts[i]
		}
		if c <= start || c > len(raw) {
			continue
		}
		for start < c {
			start += cutPoint(raw[start:c])
			ends = append(ends, start)
		}
	}
	return ends
}

// cutPoint returns the length of the chunk at the start of b.
func cutPoint(b []byte) int {
	if len(b) <= ChunkMinSize {
		return len(b)
	}
	n := min(len(b), ChunkMaxSize)
	avg := min(n, ChunkAvgSize)
	var h uint64
	i := ChunkMinSize
	for ; i < avg; i++ {
		h = h<<1 + gear[b[i]]
		if h&maskHard == 0 {
			return i + 1
		}
	}
	for ; i < n; i++ {
		h = h<<1 + gear[b[i]]
		if h&maskEasy == 0 {
			return i + 1
		}
	}
	return n
}

// AppendChunkKey appends the Pebble key of run runID's chunk whose hash is
// h to dst.
func AppendChunkKey(dst []byte, runID string, h [ChunkHashLen]byte) []byte {
	dst = appendRunPrefix(dst, spaceChunk, runID)
	return append(dst, h[:]...)
}

// chunkBounds returns the key range [lo, hi) holding every chunk of runID.
func chunkBounds(runID string) (lo, hi []byte) {
	lo = appendRunPrefix(nil, spaceChunk, runID)
	hi = append(append([]byte(nil), lo...), ffHash[:]...)
	return lo, append(hi, 0)
}

var ffHash = func() (h [ChunkHashLen]byte) {
	for i := range h {
		h[i] = 0xff
	}
	return h
}()

// parseChunkKey splits a chunk key into its run id and hash, accepting only
// the exact encoding AppendChunkKey produces.
func parseChunkKey(key []byte) (runID string, h [ChunkHashLen]byte, err error) {
	runID, rest, err := parseRunPrefix(spaceChunk, key, ChunkHashLen)
	if err != nil {
		return "", h, err
	}
	copy(h[:], rest)
	return runID, h, nil
}

// AppendChunk appends the chunk value of raw, stored under
// AppendChunkKey(nil, runID, h) where h is raw's hash, to dst. raw must be
// 1 to ChunkMaxSize bytes; for any other raw, or an invalid runID,
// AppendChunk returns dst unchanged.
func AppendChunk(dst []byte, runID string, raw []byte) []byte {
	if len(raw) == 0 || len(raw) > ChunkMaxSize || validRunID(runID) != nil {
		return dst
	}
	key := AppendChunkKey(nil, runID, ChunkHash(raw))
	start := len(dst)
	dst = append(dst, chunkMagic...)
	dst = append(dst, ChunkVersion, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(raw)))
	body := len(dst)
	need := s2.MaxEncodedLen(len(raw))
	dst = append(dst, make([]byte, need)...)
	enc := s2.Encode(dst[body:], raw)
	dst = dst[:body+len(enc)]
	crc := crc32c.Update(crc32c.Checksum(key), dst[start:])
	return binary.BigEndian.AppendUint32(dst, crc)
}

// DecodeChunk decodes the chunk stored under key with value val and writes
// its raw bytes into dst, which must be exactly as long as the chunk (the
// length its reference gives; 0 < len(dst) <= ChunkMaxSize). It checks the
// value's checksum, the claimed and decoded lengths, and the BLAKE3 of the
// bytes against the key's hash. It never panics; any damage is an error
// wrapping ErrCorrupt that names the chunk and says what is wrong (the
// caller adds the snapshot it belongs to).
func DecodeChunk(key, val, dst []byte) error {
	runID, h, err := parseChunkKey(key)
	if err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: run %q chunk %x: %s", ErrCorrupt, runID, h[:], fmt.Sprintf(format, args...))
	}
	if len(dst) == 0 || len(dst) > ChunkMaxSize {
		return bad("asked for %d bytes, not 1 to %d", len(dst), ChunkMaxSize)
	}
	if len(val) < chunkHeaderLen+valueTrailer {
		return bad("value is %d bytes, shorter than the %d-byte minimum", len(val), chunkHeaderLen+valueTrailer)
	}
	if string(val[:4]) != chunkMagic {
		return bad("bad magic %q, want %q", val[:4], chunkMagic)
	}
	if val[4] != ChunkVersion {
		return bad("unknown chunk version %d, want %d", val[4], ChunkVersion)
	}
	if val[5] != 0 {
		return bad("reserved flags byte is %#x, want 0", val[5])
	}
	body := val[:len(val)-valueTrailer]
	got := binary.BigEndian.Uint32(val[len(val)-valueTrailer:])
	if want := crc32c.Update(crc32c.Checksum(key), body); got != want {
		return bad("checksum mismatch: stored %#08x, computed %#08x", got, want)
	}
	if n := binary.BigEndian.Uint32(val[6:10]); int64(n) != int64(len(dst)) {
		return bad("holds %d bytes, its snapshot says %d", n, len(dst))
	}
	comp := body[chunkHeaderLen:]
	if n, err := s2.DecodedLen(comp); err != nil || n != len(dst) {
		return bad("compressed block claims %d bytes (%v), want %d", n, err, len(dst))
	}
	out, err := s2.Decode(dst, comp)
	if err != nil {
		return bad("decompressing: %v", err)
	}
	if len(out) != len(dst) || &out[0] != &dst[0] {
		return bad("decompressed to %d bytes, want %d", len(out), len(dst))
	}
	if ChunkHash(dst) != h {
		return bad("its bytes do not hash to its key")
	}
	return nil
}

// AppendChunkedSnapshot appends the version 2 value of s, whose frame is
// the chunks refs in order, to dst; s.Frame is not read (the chunks are
// stored apart, under AppendChunkKey). s must be valid, and refs must be
// chunks of 1 to ChunkMaxSize bytes, at most MaxFrameSize in all; else
// AppendChunkedSnapshot returns dst unchanged.
func AppendChunkedSnapshot(dst []byte, s *Snapshot, refs []ChunkRef) []byte {
	if s.Validate() != nil {
		return dst
	}
	total := 0
	for _, r := range refs {
		if r.Len <= 0 || r.Len > ChunkMaxSize {
			return dst
		}
		total += r.Len
		if total > MaxFrameSize {
			return dst
		}
	}
	start := len(dst)
	dst = appendValueHeader(dst, s, ChunkedValueVersion, total)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(refs)))
	for _, r := range refs {
		dst = append(dst, r.Hash[:]...)
		dst = binary.AppendUvarint(dst, uint64(r.Len))
	}
	return appendValueCRC(dst, s, start)
}

// DecodeChunkedSnapshot decodes the version 2 value val stored under key:
// the snapshot's fields (Plain set, Frame nil: its bytes are in the chunks
// refs, in order) and its frame's length. It never panics; a malformed key
// or value gives an error wrapping ErrCorrupt that names the run and seq.
// Neither result aliases key or val.
func DecodeChunkedSnapshot(key, val []byte) (*Snapshot, []ChunkRef, error) {
	runID, seq, err := parseRunKey(spaceSnapshot, key)
	if err != nil {
		return nil, nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: run %q seq %d: %s", ErrCorrupt, runID, seq, fmt.Sprintf(format, args...))
	}
	if len(val) < chunkedHeaderLen+valueTrailer {
		return nil, nil, bad("value is %d bytes, shorter than the %d-byte minimum", len(val), chunkedHeaderLen+valueTrailer)
	}
	if string(val[:4]) != valueMagic {
		return nil, nil, bad("bad magic %q, want %q", val[:4], valueMagic)
	}
	if val[4] != ChunkedValueVersion {
		return nil, nil, bad("value version %d, want %d", val[4], ChunkedValueVersion)
	}
	if val[5] != 0 {
		return nil, nil, bad("reserved flags byte is %#x, want 0", val[5])
	}
	body := val[:len(val)-valueTrailer]
	got := binary.BigEndian.Uint32(val[len(val)-valueTrailer:])
	if want := crc32c.Update(crc32c.Checksum(key), body); got != want {
		return nil, nil, bad("checksum mismatch: stored %#08x, computed %#08x", got, want)
	}
	nanos := binary.BigEndian.Uint32(val[14:18])
	if nanos >= 1e9 {
		return nil, nil, bad("created nanoseconds %d out of range", nanos)
	}
	total := binary.BigEndian.Uint32(val[50:54])
	if total > MaxFrameSize {
		return nil, nil, bad("frame length %d exceeds the %d-byte limit", total, MaxFrameSize)
	}
	count := binary.BigEndian.Uint32(val[54:58])
	// A reference takes at least ChunkHashLen+1 bytes: the count is
	// checked against the bytes there before anything is allocated.
	rest := body[chunkedHeaderLen:]
	if uint64(count) > uint64(len(rest)/(ChunkHashLen+1)) {
		return nil, nil, bad("%d chunk references in %d bytes", count, len(rest))
	}
	refs := make([]ChunkRef, count)
	sum := 0
	for i := range refs {
		if len(rest) < ChunkHashLen+1 {
			return nil, nil, bad("chunk reference %d is truncated", i)
		}
		copy(refs[i].Hash[:], rest)
		rest = rest[ChunkHashLen:]
		n, w := binary.Uvarint(rest)
		if w <= 0 || w != uvarintLen(n) {
			return nil, nil, bad("chunk reference %d: bad or non-minimal length", i)
		}
		if n == 0 || n > ChunkMaxSize {
			return nil, nil, bad("chunk reference %d: length %d out of range [1, %d]", i, n, ChunkMaxSize)
		}
		rest = rest[w:]
		refs[i].Len = int(n)
		sum += int(n)
		if sum > int(total) {
			return nil, nil, bad("chunks of more than the frame's %d bytes", total)
		}
	}
	if len(rest) != 0 {
		return nil, nil, bad("%d bytes after the last chunk reference", len(rest))
	}
	if sum != int(total) {
		return nil, nil, bad("chunks of %d bytes for a frame of %d", sum, total)
	}
	s := &Snapshot{
		RunID:   runID,
		Seq:     seq,
		Plain:   true,
		Created: time.Unix(int64(binary.BigEndian.Uint64(val[6:14])), int64(nanos)).UTC(),
	}
	copy(s.Head[:], val[18:50])
	return s, refs, nil
}

// valueVersion returns the version byte of a snapshot value (0 if it has
// none), to pick its decoder.
func valueVersion(val []byte) byte {
	if len(val) < 5 {
		return 0
	}
	return val[4]
}

// chunkFrame splits raw into its chunks, cut at cuts too.
func chunkFrame(raw []byte, cuts []int) (refs []ChunkRef, ends []int) {
	ends = ChunkBoundariesAt(raw, cuts)
	refs = make([]ChunkRef, len(ends))
	start := 0
	for i, end := range ends {
		refs[i] = ChunkRef{Hash: ChunkHash(raw[start:end]), Len: end - start}
		start = end
	}
	return refs, ends
}
