package frame

// An s2 block encoder with a dictionary for short records (the commit
// path's deltas and ledger records), writing blocks that s2's own
// Dict.Decode reads: the format is s2's, only the encoder is ours.
//
// s2's Dict.Encode clears a 64 KiB hash table on the stack for every
// block, however short, and indexes its dictionary at every third
// position only, so it misses most of what a trained dictionary offers a
// short record. Here the dictionary's table is built once per dictionary,
// at every position, and only read after; the table of the record's own
// positions is pooled and sized to the record (about one entry per byte,
// at most 8 Ki): only that part is cleared. On the log's bodies the blocks are
// 5-7% smaller than s2's (which is what brings the log within 1.2x of
// zstd's best level with the same dictionary), for 1.2-1.5x its CPU: the
// clearing turned out not to be where s2's time goes
// (bench/RESULTS-commitpath-2026-12-06.md).
//
// The encoder is greedy; at each position it probes (every other one,
// fewer in a run of literals) it takes the longest of three candidates:
// the last offset (an s2 repeat, 2 bytes), the record's own history and
// the dictionary. The block keeps s2's rules for a dictionary (s2's
// s2DecodeDict): a copy lies wholly in the dictionary or wholly in the
// record, and no copy reaches into the dictionary from past
// MaxDictSrcOffset (records here are shorter than that).

import (
	"encoding/binary"
	"math/bits"
	"sync"
)

const (
	s2DictTableBits = 16 // the dictionary's table: up to 64 KiB of content, every position
	s2SrcTableBits  = 13 // the record's table
	s2HashBytes     = 5  // bytes a hash covers; matches are at least s2MinMatch
	s2MinMatch      = 4
	// s2DictMaxSrc is the longest record encodeS2Dict takes: positions are
	// kept in 16 bits, and every position of such a record may refer to
	// the dictionary (s2's MaxDictSrcOffset).
	s2DictMaxSrc = 1<<16 - 1
	// s2 tags (the format's low two bits).
	s2TagLiteral = 0x00
	s2TagCopy1   = 0x01
	s2TagCopy2   = 0x02
	s2TagCopy4   = 0x03
)

// s2DictTable is a dictionary's hash table for encodeS2Dict: for each hash
// of s2HashBytes bytes, the last position of the content with that hash,
// plus one (0: none). Immutable once built.
type s2DictTable struct {
	content []byte // the s2 dictionary's bytes (at most s2.MaxDictSize)
	tab     []uint16
	bits    uint // len(tab) is 1<<bits: about half an entry per byte of content
}

// newS2DictTable indexes content, which must be the bytes the matching
// s2.Dict was made of, with its repeat offset at 0.
func newS2DictTable(content []byte) *s2DictTable {
	b := uint(min(max(bits.Len(uint(len(content)))-1, 8), s2DictTableBits))
	t := &s2DictTable{content: content, tab: make([]uint16, 1<<b), bits: b}
	// Later positions overwrite earlier ones: the nearer the end, the
	// shorter the offset (a trained dictionary ends with what is most
	// common).
	for i := 0; i+8 <= len(content) && i < 1<<16-1; i++ {
		t.tab[s2Hash(load64(content, i), b)] = uint16(i + 1)
	}
	return t
}

// s2Scratch is the record's table of one encodeS2Dict call: for each
// hash, the last position with it, plus one (0: none). A call uses the
// first 1<<bits entries, about one per byte of the record, and clears
// only those.
type s2Scratch struct {
	tab [1 << s2SrcTableBits]uint16
}

var s2Scratches = sync.Pool{New: func() any { return new(s2Scratch) }}

func load64(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }
func load32(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[i:]) }

// s2Prime5 is s2Hash's multiplier (s2's hash5).
const s2Prime5 = 889523592379

// s2Hash hashes the low s2HashBytes bytes of u into bits bits.
func s2Hash(u uint64, bits uint) uint32 {
	return uint32(((u << (64 - 8*s2HashBytes)) * s2Prime5) >> (64 - bits))
}

// matchLen returns how many bytes a and b share at their start.
func matchLen(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)>>3
		}
	}
	for ; i < n && a[i] == b[i]; i++ {
	}
	return i
}

// encodeS2Dict appends to dst an s2 block of src (its length, then its
// elements) that t's dictionary decodes, and returns the extended slice.
// len(src) must be at most s2DictMaxSrc. The block is at most
// s2.MaxEncodedLen(len(src)) bytes.
//
// The search for a match (the three candidates: the last offset, the
// record's table, the dictionary's) is written into the loop rather than
// called, with its state in locals: a function of it spilled its state to
// the stack and back on every probe, a third of the encoder's time.
func encodeS2Dict(dst, src []byte, t *s2DictTable) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(src)))
	if len(src) < 16 {
		return emitS2Literal(dst, src)
	}
	sc := s2Scratches.Get().(*s2Scratch)
	sbits := uint(min(max(bits.Len(uint(len(src))), 8), s2SrcTableBits))
	stab := sc.tab[:1<<sbits]
	clear(stab)
	dict, dtab := t.content, t.tab
	sshift, dshift := 64-sbits, 64-t.bits
	nd := len(dict)
	repeat := 0            // the last copy's offset; 0 before the first
	sLimit := len(src) - 8 // load64 at s
	nextEmit, s := 0, 0
	for s <= sLimit {
		// The longest match at s: its offset, in s2's terms (from the
		// record's position back, into the dictionary past the record's
		// start), and its length; none of s2MinMatch bytes leaves n 0.
		// s goes into the record's table.
		cv := load64(src, s)
		c4 := uint32(cv)
		off, n := 0, 0
		if r := repeat; r > 0 {
			if r <= s {
				if c := s - r; load32(src, c) == c4 {
					off, n = r, 4+matchLen(src[c+4:], src[s+4:])
				}
			} else if p := nd - r + s; p >= 0 && p+4 <= nd && load32(dict, p) == c4 {
				off, n = r, 4+matchLen(dict[p+4:], src[s+4:])
			}
		}
		hp := (cv << (64 - 8*s2HashBytes)) * s2Prime5 // s2Hash's product, for both tables
		h := uint32(hp >> sshift)
		if e := stab[h]; e != 0 {
			if c := int(e) - 1; load32(src, c) == c4 {
				if l := 4 + matchLen(src[c+4:], src[s+4:]); l > n {
					off, n = s-c, l
				}
			}
		}
		stab[h] = uint16(s + 1)
		if e := dtab[uint32(hp>>dshift)]; e != 0 {
			// A dictionary copy must end within the dictionary; one at an
			// offset past 64 KiB takes 5 bytes, worth it from 6 on.
			if p := int(e) - 1; p+4 <= nd && load32(dict, p) == c4 {
				if l := 4 + matchLen(dict[p+4:], src[s+4:]); l > n && (l >= 6 || nd-p+s < 1<<16) {
					off, n = nd-p+s, l
				}
			}
		}
		if n == 0 {
			// Every other position, and faster through what does not
			// compress: half the probes of every position for 3-7% more
			// bytes on deltas.
			s += 2 + (s-nextEmit)>>5
			continue
		}
		// Extend backwards over the literals not yet emitted, within the
		// copy's region (the record or the dictionary).
		for s > nextEmit {
			if off <= s-1 {
				if src[s-1-off] != src[s-1] {
					break
				}
			} else if off > s {
				p := nd - off + s - 1
				if p < 0 || dict[p] != src[s-1] {
					break
				}
			} else {
				break // off == s: the byte before is the dictionary's last, a copy spanning both
			}
			s--
			n++
		}
		dst = emitS2Literal(dst, src[nextEmit:s])
		if off == repeat {
			dst = emitS2Repeat(dst, off, n)
		} else {
			dst = emitS2Copy(dst, off, n)
		}
		repeat = off
		// Index a few positions the copy covers, for later matches: the
		// last three and the two after its start, in that order (a later
		// entry wins a shared slot). A hash covers 5 bytes, so one load
		// of 8 serves neighbouring positions.
		end := s + n
		if end-1 <= sLimit {
			v := load64(src, end-3)
			stab[s2Hash(v, sbits)] = uint16(end - 2)
			stab[s2Hash(v>>8, sbits)] = uint16(end - 1)
			stab[s2Hash(v>>16, sbits)] = uint16(end)
			v = load64(src, s+1)
			stab[s2Hash(v, sbits)] = uint16(s + 2)
			stab[s2Hash(v>>8, sbits)] = uint16(s + 3)
		} else {
			// Near the end: only the positions a probe could take (8
			// bytes left).
			for _, i := range [...]int{end - 3, end - 2, end - 1, s + 1, s + 2} {
				if i <= sLimit {
					stab[s2Hash(load64(src, i), sbits)] = uint16(i + 1)
				}
			}
		}
		s, nextEmit = end, end
	}
	dst = emitS2Literal(dst, src[nextEmit:])
	s2Scratches.Put(sc)
	return dst
}

// emitS2Literal appends lit as literal elements.
func emitS2Literal(dst, lit []byte) []byte {
	if len(lit) == 0 {
		return dst
	}
	switch n := uint32(len(lit) - 1); {
	case n < 60:
		dst = append(dst, byte(n)<<2|s2TagLiteral)
	case n < 1<<8:
		dst = append(dst, 60<<2|s2TagLiteral, byte(n))
	case n < 1<<16:
		dst = append(dst, 61<<2|s2TagLiteral, byte(n), byte(n>>8))
	case n < 1<<24:
		dst = append(dst, 62<<2|s2TagLiteral, byte(n), byte(n>>8), byte(n>>16))
	default:
		dst = append(dst, 63<<2|s2TagLiteral, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	}
	return append(dst, lit...)
}

// emitS2Repeat appends a copy of n >= 4 bytes at the last offset off, as
// s2's emitRepeat does.
func emitS2Repeat(dst []byte, off, n int) []byte {
	n -= 4
	switch {
	case n <= 4:
		return append(dst, byte(n)<<2|s2TagCopy1, 0)
	case n < 8 && off < 2048:
		return append(dst, byte(off>>8)<<5|byte(n)<<2|s2TagCopy1, byte(off))
	case n < 1<<8+4:
		n -= 4
		return append(dst, 5<<2|s2TagCopy1, 0, byte(n))
	case n < 1<<16+1<<8:
		n -= 1 << 8
		return append(dst, 6<<2|s2TagCopy1, 0, byte(n), byte(n>>8))
	}
	const maxRepeat = 1<<24 - 1
	n -= 1 << 16
	left := 0
	if n > maxRepeat {
		left = n - maxRepeat + 4
		n = maxRepeat - 4
	}
	dst = append(dst, 7<<2|s2TagCopy1, 0, byte(n), byte(n>>8), byte(n>>16))
	if left > 0 {
		return emitS2Repeat(dst, off, left)
	}
	return dst
}

// emitS2Copy appends a copy of n >= 4 bytes at offset off >= 1, as s2's
// emitCopy does: the first part with its offset, the rest as repeats.
func emitS2Copy(dst []byte, off, n int) []byte {
	if off >= 1<<16 {
		if n > 64 {
			dst = append(dst, 63<<2|s2TagCopy4, byte(off), byte(off>>8), byte(off>>16), byte(off>>24))
			n -= 64
			if n >= 4 {
				return emitS2Repeat(dst, off, n)
			}
		}
		if n == 0 {
			return dst
		}
		return append(dst, byte(n-1)<<2|s2TagCopy4, byte(off), byte(off>>8), byte(off>>16), byte(off>>24))
	}
	if n > 64 {
		if off < 2048 {
			dst = append(dst, byte(off>>8)<<5|(8-4)<<2|s2TagCopy1, byte(off))
			n -= 8
		} else {
			dst = append(dst, 59<<2|s2TagCopy2, byte(off), byte(off>>8))
			n -= 60
		}
		return emitS2Repeat(dst, off, n)
	}
	if n >= 12 || off >= 2048 {
		return append(dst, byte(n-1)<<2|s2TagCopy2, byte(off), byte(off>>8))
	}
	return append(dst, byte(off>>8)<<5|byte(n-4)<<2|s2TagCopy1, byte(off))
}
