package layout

// WAITS, version 3: version 2 (waits.go) sealed per block, what an
// encrypted store writes (until 2026-12 it sealed version 1 or 2 whole,
// record.PlaceWaits: still read, UnsealWaits and the index's load). The
// table is cut into blocks of block bytes (the last one shorter), each
// sealed on its own with the store's key (record.BlockSealer), bound to
// its index and to the header, so that a reader opens only the blocks
// it reads, and no block moves: to another index, into another WAITS (of
// another generation, or of the same one: the header's id), under a
// header changed in any byte, nor out of a file cut short (the header
// gives the length, and each block is bound to it). All integers
// little-endian. Every constant here is frozen.
//
//	header (64 bytes, at 0, in the clear, bound into every block's seal):
//	  "CNTMWAIT" | version u16 = 3 | 0 u16 | block u32 |
//	  length u64 (the table's) | nblocks u32 | 0 u32 |
//	  key no u64 (the data key every block names) | id [16] (random, one per file) |
//	  gen u64 (the checkpoint's: the blocks' place names it too)
//	blocks (at 64): nblocks x sealed(the table's bytes from block*k, up to block of them)
//
// A sealed block is the seal package's envelope (0xc5 | uvarint key no |
// nonce | ciphertext | tag: record.SealedLen of its plaintext), so block k
// is at 64 + k x SealedLen(block, key no). The header is authenticated by
// the first block a reader opens (OpenSealedWaits opens block 0, which
// holds the table's own header).
//
// Block size: 4 KiB, version 2's checksum block and the page size: a
// lookup by run (a binary search of the runs section, then the entry)
// opens about two blocks per probe, each 4 KiB of AES-GCM (a few µs), and
// a block adds 30 bytes of seal (0.7%). The reader keeps the last
// waitsCacheBlocks blocks it opened (waitsCacheBlocks x 4 KiB of
// plaintext, whatever the table's size), and the ids the first
// waitsFenceDepth probes of its searches by run read (at most 1,023).

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

const (
	waitsVersion3 = 3
	waitsHeader3  = 64
	// waitsMinBlock and waitsMaxBlock bound a sealed WAITS's block size.
	waitsMinBlock = 512
	waitsMaxBlock = 1 << 20
	// waitsCacheBlocks bounds the blocks a sealed WAITS's reader keeps
	// opened: the top of a binary search of the runs (its first probes
	// are the same for every lookup: about two blocks each, the offset's
	// and the entry's), and the block of each of the walks (the
	// deadlines', the ready list's, a capture's of the entries), at 64
	// KiB of plaintext.
	waitsCacheBlocks = 16
	// waitsFenceDepth is how many of a search by run's first probes a
	// sealed table answers from the ids it keeps (WaitsTable.Find): at
	// most 1,023 ids, some 30 KiB, whatever the runs. Below it, at
	// 100,000 runs, a search's remaining probes span about 100 runs, an
	// entries' block and an offsets' one, where each of its 17 probes
	// would otherwise open two blocks, the cache too small for them.
	waitsFenceDepth = 10
)

// SealWaits seals table, WAITS version 2 of checkpoint generation gen,
// per block with the store's key: WAITS version 3.
func SealWaits(table []byte, s *record.Sealer, gen uint64) ([]byte, error) {
	bs, err := s.StoreBlockSealer(record.PlaceWaitsBlock, gen)
	if err != nil {
		return nil, fmt.Errorf("layout: seal %s: %w", WaitsName, err)
	}
	nblocks := (len(table) + WaitsBlock - 1) / WaitsBlock
	h := make([]byte, waitsHeader3, waitsHeader3+nblocks*record.SealedLen(WaitsBlock, bs.KeyNo()))
	le := binary.LittleEndian
	copy(h, waitsMagic)
	le.PutUint16(h[8:], waitsVersion3)
	le.PutUint32(h[12:], WaitsBlock)
	le.PutUint64(h[16:], uint64(len(table)))
	le.PutUint32(h[24:], uint32(nblocks))
	le.PutUint64(h[32:], bs.KeyNo())
	if _, err := rand.Read(h[40:56]); err != nil {
		return nil, fmt.Errorf("layout: seal %s: its id: %w", WaitsName, err)
	}
	le.PutUint64(h[56:], gen)
	out := h
	for k := 0; k < nblocks; k++ {
		if out, err = bs.Seal(out, table[k*WaitsBlock:min((k+1)*WaitsBlock, len(table))], h[:waitsHeader3], uint64(k)); err != nil {
			return nil, fmt.Errorf("layout: seal %s: block %d: %w", WaitsName, k, err)
		}
	}
	return out, nil
}

// OpenSealedWaits opens WAITS version 3 (named name in errors), size
// bytes read from f, of checkpoint generation gen, as the table it
// seals: it reads and checks the header and opens the first block (the
// table's header); each other block is read from f and opened when first
// read, and kept among the last few opened. Damage, a block moved or
// forged, a file cut short or of another checkpoint, is a
// *record.CorruptionError, from the read that meets it.
func OpenSealedWaits(name string, f io.ReaderAt, size int64, s *record.Sealer, gen uint64) (*WaitsTable, error) {
	sb, err := newSealedBlocks(name, f, size, s, gen)
	if err != nil {
		return nil, err
	}
	t := &WaitsTable{name: name, size: sb.length, sealed: sb}
	if sb.length < waitsHeader2+4 {
		return nil, record.Corruptf(name, "a sealed table of %d bytes", sb.length)
	}
	h, err := sb.read(0, waitsHeader2)
	if err != nil {
		return nil, err
	}
	if err := t.open(h); err != nil {
		return nil, err
	}
	return t, nil
}

// UnsealWaits returns the plaintext of b, WAITS of an encrypted store of
// checkpoint generation gen: version 3's table, every block opened, or
// what the seal of a file sealed whole holds (version 1 or 2). For verify
// and tests: the index reads version 3 in place (OpenSealedWaits).
func UnsealWaits(name string, b []byte, s *record.Sealer, gen uint64) ([]byte, error) {
	if WaitsVersion(b) != waitsVersion3 {
		plain, err := s.OpenStoreFile(b, record.PlaceWaits, gen)
		if err != nil {
			return nil, record.Corruptf(name, "does not open: %v", err)
		}
		return plain, nil
	}
	sb, err := newSealedBlocks(name, &byteReader{b}, int64(len(b)), s, gen)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, sb.length)
	for k := 0; k < sb.nblocks; k++ {
		if out, err = sb.openBlock(out, k); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type byteReader struct{ b []byte }

func (r *byteReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(r.b)) {
		return 0, io.EOF
	}
	n := copy(p, r.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// sealedBlocks reads the table of a sealed WAITS, block by block, through
// a cache of the last waitsCacheBlocks blocks opened. Not safe for
// concurrent use (its table's owner serializes the calls).
type sealedBlocks struct {
	name    string
	f       io.ReaderAt
	s       *record.Sealer
	gen     uint64
	header  [waitsHeader3]byte
	block   int // plaintext bytes per block
	length  int // the table's
	nblocks int
	sealed  int    // a whole block's sealed length
	buf     []byte // a sealed block, read (reused)
	tick    uint64
	cache   [waitsCacheBlocks]cachedBlock
	fence   map[int]string // run index -> id, of the first probes of searches (Find)
}

// cachedBlock is an opened block; its bytes are never reused (what a read
// returned may alias them), only dropped.
type cachedBlock struct {
	k    int // the block's index + 1 (0: an empty slot)
	used uint64
	b    []byte
}

func newSealedBlocks(name string, f io.ReaderAt, size int64, s *record.Sealer, gen uint64) (*sealedBlocks, error) {
	sb := &sealedBlocks{name: name, f: f, s: s, gen: gen}
	h := sb.header[:]
	if size < waitsHeader3 {
		return nil, record.Corruptf(name, "a sealed waits file of %d bytes, shorter than its header", size)
	}
	if n, err := f.ReadAt(h, 0); n != len(h) {
		return nil, record.Corruptf(name, "read its header: %v", err)
	}
	le := binary.LittleEndian
	switch {
	case string(h[:8]) != waitsMagic:
		return nil, record.Corruptf(name, "not a waits file (bad magic)")
	case le.Uint16(h[8:]) != waitsVersion3:
		return nil, record.Corruptf(name, "version %d, not 3 (sealed per block)", le.Uint16(h[8:]))
	case le.Uint16(h[10:]) != 0 || le.Uint32(h[28:]) != 0:
		return nil, record.Corruptf(name, "header: reserved bytes are not zero")
	case le.Uint64(h[56:]) != gen:
		return nil, record.Corruptf(name, "sealed for checkpoint %d, CHECKPOINT is %d", le.Uint64(h[56:]), gen)
	}
	block, length, nblocks, no := le.Uint32(h[12:]), le.Uint64(h[16:]), le.Uint32(h[24:]), le.Uint64(h[32:])
	if block < waitsMinBlock || block > waitsMaxBlock || length > 1<<40 || no > 1<<62 {
		return nil, record.Corruptf(name, "header: blocks of %d bytes, a table of %d, key %d: out of bounds", block, length, no)
	}
	if want := (length + uint64(block) - 1) / uint64(block); uint64(nblocks) != want {
		return nil, record.Corruptf(name, "header: %d blocks for a table of %d bytes in blocks of %d (want %d)", nblocks, length, block, want)
	}
	sb.block, sb.length, sb.nblocks = int(block), int(length), int(nblocks)
	sb.sealed = record.SealedLen(sb.block, no)
	var want int64 = waitsHeader3
	if nblocks > 0 {
		last := sb.length - (sb.nblocks-1)*sb.block
		want += int64(sb.nblocks-1)*int64(sb.sealed) + int64(record.SealedLen(last, no))
	}
	if size != want {
		return nil, record.Corruptf(name, "%d bytes, where its header says %d (cut short, or grown)", size, want)
	}
	sb.buf = make([]byte, sb.sealed)
	return sb, nil
}

// openBlock appends the plaintext of block k, read from the file and
// opened.
func (sb *sealedBlocks) openBlock(dst []byte, k int) ([]byte, error) {
	n := sb.sealed
	plain := sb.block
	if k == sb.nblocks-1 {
		plain = sb.length - k*sb.block
		n -= sb.block - plain
	}
	at := int64(waitsHeader3) + int64(k)*int64(sb.sealed)
	if m, err := sb.f.ReadAt(sb.buf[:n], at); m != n {
		return dst, record.Corruptf(sb.name, "block %d (bytes %d to %d): read: %v", k, at, at+int64(n), err)
	}
	if no, err := seal.KeyNo(sb.buf[:n]); err != nil || no != binary.LittleEndian.Uint64(sb.header[32:]) {
		return dst, record.Corruptf(sb.name, "block %d: not sealed with the header's key %d (%d, %v)", k, binary.LittleEndian.Uint64(sb.header[32:]), no, err)
	}
	out, err := sb.s.OpenStoreBlock(dst, sb.buf[:n], record.PlaceWaitsBlock, sb.gen, sb.header[:], uint64(k))
	if err != nil {
		return dst, &record.CorruptionError{File: sb.name, Offset: at, Reason: fmt.Sprintf("block %d does not open (changed, moved, or of another WAITS): %v", k, err), Err: err}
	}
	if len(out)-len(dst) != plain {
		return dst, record.Corruptf(sb.name, "block %d: %d bytes, not %d", k, len(out)-len(dst), plain)
	}
	return out, nil
}

// get returns block k's plaintext, from the cache or opened into it (the
// least recently used block dropped).
func (sb *sealedBlocks) get(k int) ([]byte, error) {
	sb.tick++
	lru := 0
	for i := range sb.cache {
		c := &sb.cache[i]
		if c.k == k+1 {
			c.used = sb.tick
			return c.b, nil
		}
		if c.used < sb.cache[lru].used {
			lru = i
		}
	}
	b, err := sb.openBlock(nil, k)
	if err != nil {
		return nil, err
	}
	sb.cache[lru] = cachedBlock{k: k + 1, used: sb.tick, b: b}
	return b, nil
}

// read returns the table's bytes from to to: a slice of the block that
// holds them, or a copy when they span several.
func (sb *sealedBlocks) read(from, to int) ([]byte, error) {
	if from < 0 || to < from || to > sb.length {
		return nil, record.Corruptf(sb.name, "a read of bytes %d to %d of a table of %d", from, to, sb.length)
	}
	k := from / sb.block
	if to <= (k+1)*sb.block {
		b, err := sb.get(k)
		if err != nil {
			return nil, err
		}
		lo, hi := from-k*sb.block, to-k*sb.block
		return b[lo:hi:hi], nil
	}
	out := make([]byte, 0, to-from)
	for ; k*sb.block < to; k++ {
		b, err := sb.get(k)
		if err != nil {
			return nil, err
		}
		lo, hi := max(from-k*sb.block, 0), min(to-k*sb.block, len(b))
		out = append(out, b[lo:hi]...)
	}
	return out, nil
}
