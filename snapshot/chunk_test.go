package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/internal/goldenhex"
)

// randomFrame returns n bytes of incompressible noise from seed, standing in
// for a frame's raw encoding (compression cannot hide a missed sharing).
func randomFrame(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x636e6b))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func plainSnapshot(run string, seq uint64, raw []byte) *Snapshot {
	s := &Snapshot{RunID: run, Seq: seq, Frame: raw, Plain: true, Created: time.Unix(1700000000, int64(seq)).UTC()}
	s.Head[0], s.Head[31] = byte(seq), 0xaa
	return s
}

func putCommit(t *testing.T, st *Store, snaps ...*Snapshot) {
	t.Helper()
	b := st.NewBatch()
	for _, s := range snaps {
		if err := b.PutSnapshot(s); err != nil {
			t.Fatal(err)
		}
	}
	mustCommit(t, b, true)
}

// storedChunks returns the hashes of run's chunks in the store, and the
// bytes their keys and values take.
func storedChunks(t *testing.T, st *Store, run string) (map[[ChunkHashLen]byte]bool, int) {
	t.Helper()
	lo, hi := chunkBounds(run)
	it, err := st.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := map[[ChunkHashLen]byte]bool{}
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		r, h, err := parseChunkKey(it.Key())
		if err != nil || r != run {
			t.Fatalf("chunk key %x: run %q, %v", it.Key(), r, err)
		}
		out[h] = true
		n += len(it.Key()) + len(it.Value())
	}
	return out, n
}

func hashesOf(raw []byte) map[[ChunkHashLen]byte]bool {
	refs, _ := chunkFrame(raw, nil)
	out := map[[ChunkHashLen]byte]bool{}
	for _, r := range refs {
		out[r.Hash] = true
	}
	return out
}

func sameSet(a, b map[[ChunkHashLen]byte]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for h := range a {
		if !b[h] {
			return false
		}
	}
	return true
}

func mustRead(t *testing.T, st *Store, run string, seq uint64, want []byte) {
	t.Helper()
	got, err := st.AtOrBelow(run, seq)
	if err != nil {
		t.Fatalf("AtOrBelow(%q, %d): %v", run, seq, err)
	}
	if got.Seq != seq || !got.Plain || !bytes.Equal(got.Frame, want) {
		t.Fatalf("AtOrBelow(%q, %d) = seq %d, plain %v, %d bytes (equal %v), want seq %d plain, %d bytes",
			run, seq, got.Seq, got.Plain, len(got.Frame), bytes.Equal(got.Frame, want), seq, len(want))
	}
}

// TestChunkBoundaries checks the chunker's bounds, that it is a pure
// function of the bytes, and that appending to a frame keeps its chunks but
// the last.
func TestChunkBoundaries(t *testing.T) {
	raw := randomFrame(1, 4<<20)
	ends := ChunkBoundaries(raw)
	start := 0
	for i, e := range ends {
		n := e - start
		if n > ChunkMaxSize || (n < ChunkMinSize && i != len(ends)-1) {
			t.Fatalf("chunk %d is %d bytes, outside [%d, %d]", i, n, ChunkMinSize, ChunkMaxSize)
		}
		start = e
	}
	if start != len(raw) {
		t.Fatalf("chunks end at %d of %d bytes", start, len(raw))
	}
	avg := len(raw) / len(ends)
	if avg < ChunkAvgSize/2 || avg > ChunkAvgSize*2 {
		t.Errorf("average chunk of %d bytes, want about %d", avg, ChunkAvgSize)
	}
	t.Logf("%d chunks of %d bytes on average", len(ends), avg)
	// Pinned: the gear table and the cuts of this input (a change of
	// either loses the sharing with chunks already stored).
	if gear[0] != 0xe5a33c7f23726994 || gear[255] != 0x77308d8131f066fb {
		t.Errorf("gear table changed: [0]=%#x [255]=%#x", gear[0], gear[255])
	}
	if got := ends[:4]; !equalInts(got, []int{75501, 212187, 316677, 408796}) {
		t.Errorf("first cuts changed: %v", got)
	}
	if got := ChunkBoundaries(raw[:ChunkMinSize]); !equalInts(got, []int{ChunkMinSize}) {
		t.Errorf("a frame of the minimum size cuts at %v", got)
	}
	if got := ChunkBoundaries(nil); len(got) != 0 {
		t.Errorf("an empty frame cuts at %v", got)
	}
	// Appending: every chunk but the last stays.
	grown := append(bytes.Clone(raw), randomFrame(2, 100<<10)...)
	gends := ChunkBoundaries(grown)
	if !equalInts(gends[:len(ends)-1], ends[:len(ends)-1]) {
		t.Errorf("appending moved cuts before the last chunk")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestGoldenChunked pins the chunked snapshot value (version 2), the chunk
// key and the chunk value (format.go, frozen).
func TestGoldenChunked(t *testing.T) {
	s := &Snapshot{RunID: "r", Seq: 7, Plain: true, Created: time.Unix(1, 2).UTC()}
	for i := range s.Head {
		s.Head[i] = byte(i)
	}
	raw := []byte("frame")
	refs, _ := chunkFrame(raw, nil)
	wantVal := goldenhex.Decode(t, `
		43 53 4e 50              # magic "CSNP"
		02                       # value version 2: chunked
		00                       # flags (reserved)
		00 00 00 00 00 00 00 01  # created: 1 s since the Unix epoch
		00 00 00 02              # created: 2 ns
		00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f  # chain head at seq 7
		10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f
		00 00 00 05              # frame length 5
		00 00 00 01              # 1 chunk
		b8 4b bb f4 95 b3 f5 fe 35 08 53 04 d0 48 e3 37  # its hash: BLAKE3-256("frame")[:16]
		05                       # its raw length, uvarint
		e8 dd 29 d3              # CRC-32C of key || value so far
	`)
	key := AppendSnapshotKey(nil, "r", 7)
	if got := AppendChunkedSnapshot(nil, s, refs); !bytes.Equal(got, wantVal) {
		t.Fatalf("chunked snapshot value changed:\n got %x\nwant %x", got, wantVal)
	}
	back, brefs, err := DecodeChunkedSnapshot(key, wantVal)
	if err != nil || back.RunID != "r" || back.Seq != 7 || !back.Plain || back.Head != s.Head || !back.Created.Equal(s.Created) ||
		len(brefs) != 1 || brefs[0] != refs[0] || back.Frame != nil {
		t.Fatalf("golden value decodes to %+v %v, %v", back, brefs, err)
	}
	if _, err := DecodeSnapshot(key, wantVal); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "chunked") {
		t.Errorf("the version 1 decoder on a chunked value: %v", err)
	}

	wantKey := goldenhex.Decode(t, `
		63                       # 'c': the chunk keyspace
		01 72                    # run id: uvarint length 1, "r"
		b8 4b bb f4 95 b3 f5 fe 35 08 53 04 d0 48 e3 37  # the chunk's hash
	`)
	wantChunk := goldenhex.Decode(t, `
		43 53 43 4b              # magic "CSCK"
		01                       # chunk version 1
		00                       # flags (reserved)
		00 00 00 05              # raw length 5
		05 10 66 72 61 6d 65     # s2 block: uvarint length 5, literal "frame"
		a9 ed fd 3f              # CRC-32C of key || value so far
	`)
	if got := AppendChunkKey(nil, "r", refs[0].Hash); !bytes.Equal(got, wantKey) {
		t.Fatalf("chunk key changed:\n got %x\nwant %x", got, wantKey)
	}
	if got := AppendChunk(nil, "r", raw); !bytes.Equal(got, wantChunk) {
		t.Fatalf("chunk value changed:\n got %x\nwant %x", got, wantChunk)
	}
	dst := make([]byte, 5)
	if err := DecodeChunk(wantKey, wantChunk, dst); err != nil || string(dst) != "frame" {
		t.Fatalf("golden chunk decodes to %q, %v", dst, err)
	}
	// The checksum covers the key: the chunk under another run is damage.
	if err := DecodeChunk(AppendChunkKey(nil, "q", refs[0].Hash), wantChunk, dst); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a chunk moved to another run: %v", err)
	}
}

// TestDecodeChunkMalformed feeds damaged chunk values to DecodeChunk.
func TestDecodeChunkMalformed(t *testing.T) {
	raw := randomFrame(3, 1000)
	key := AppendChunkKey(nil, "run-1", ChunkHash(raw))
	good := AppendChunk(nil, "run-1", raw)
	reseal := func(k, v []byte) []byte {
		body := v[:len(v)-4]
		return binary.BigEndian.AppendUint32(bytes.Clone(body), crc32c.Update(crc32c.Checksum(k), body))
	}
	other := randomFrame(4, 1000)
	cases := []struct {
		name     string
		key, val []byte
		n        int
		want     string
	}{
		{"short", key, good[:8], 1000, "shorter"},
		{"bit flip", key, func() []byte { v := bytes.Clone(good); v[20] ^= 1; return v }(), 1000, "checksum"},
		{"wrong length asked", key, good, 999, "its snapshot says 999"},
		{"too long asked", key, good, ChunkMaxSize + 1, "not 1 to"},
		{"claimed length", key, func() []byte { v := bytes.Clone(good); binary.BigEndian.PutUint32(v[6:], 999); return reseal(key, v) }(), 1000, "its snapshot says 1000"},
		{"other bytes under the key", key, reseal(key, AppendChunk(nil, "run-1", other)), 1000, "do not hash"},
		{"bad block", key, func() []byte { v := bytes.Clone(good); v[11] ^= 0xff; return reseal(key, v) }(), 1000, ""},
		{"version", key, func() []byte { v := bytes.Clone(good); v[4] = 2; return reseal(key, v) }(), 1000, "unknown chunk version"},
		{"bad key", []byte("c"), good, 1000, "run id length"},
	}
	for _, c := range cases {
		err := DecodeChunk(c.key, c.val, make([]byte, c.n))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrCorrupt saying %q", c.name, err, c.want)
		}
	}
}

// TestChunkedSharing: two snapshots of a growing frame share their chunks;
// deleting either keeps the other readable and removes exactly the chunks
// only it held; DeleteRun removes the rest.
func TestChunkedSharing(t *testing.T) {
	f1 := randomFrame(5, 1<<20)
	f2 := append(bytes.Clone(f1), randomFrame(6, 40<<10)...)
	for _, del := range []uint64{1, 2} {
		st := openMem(t, vfs.NewMem())
		putCommit(t, st, plainSnapshot("run", 1, f1))
		putCommit(t, st, plainSnapshot("run", 2, f2), plainSnapshot("other", 1, f1))
		_, n := storedChunks(t, st, "run")
		if float64(n) >= 1.3*float64(len(f2)) {
			t.Fatalf("two snapshots of %d and %d bytes store %d bytes of chunks, not under 1.3x one frame", len(f1), len(f2), n)
		}
		t.Logf("snapshots of %d and %d bytes: %d bytes of chunks", len(f1), len(f2), n)
		mustRead(t, st, "run", 1, f1)
		mustRead(t, st, "run", 2, f2)

		dead := st.deadBytes.Load()
		b := st.NewBatch()
		if err := b.DeleteSnapshot("run", del); err != nil {
			t.Fatal(err)
		}
		mustCommit(t, b, true)
		keep, keepSeq := f2, uint64(2)
		if del == 2 {
			keep, keepSeq = f1, 1
		}
		mustRead(t, st, "run", keepSeq, keep)
		have, after := storedChunks(t, st, "run")
		if !sameSet(have, hashesOf(keep)) {
			t.Errorf("after deleting seq %d: %d chunks stored, the kept frame has %d", del, len(have), len(hashesOf(keep)))
		}
		if del == 2 && st.deadBytes.Load()-dead < int64(n-after) {
			t.Errorf("dead bytes grew by %d, the chunks deleted took %d", st.deadBytes.Load()-dead, n-after)
		}
		if n := st.Stats().Snapshots; n != 2 {
			t.Errorf("Stats.Snapshots = %d, want 2 (chunks are not snapshots)", n)
		}
		if err := st.DeleteRun("run"); err != nil {
			t.Fatal(err)
		}
		if have, _ := storedChunks(t, st, "run"); len(have) != 0 {
			t.Errorf("DeleteRun left %d chunks", len(have))
		}
		if have, _ := storedChunks(t, st, "other"); !sameSet(have, hashesOf(f1)) {
			t.Errorf("DeleteRun(run) touched the chunks of run other")
		}
		mustRead(t, st, "other", 1, f1)
	}
}

// TestChunkedReplaceAndMix: a put replacing a snapshot removes the chunks
// only the old one held; version 1 values (opaque frames) and chunked ones
// live side by side in a run.
func TestChunkedReplaceAndMix(t *testing.T) {
	st := openMem(t, vfs.NewMem())
	f1, f2 := randomFrame(7, 300<<10), randomFrame(8, 200<<10)
	v1 := testSnapshot("run", 1)
	putCommit(t, st, v1, plainSnapshot("run", 2, f1))
	putCommit(t, st, plainSnapshot("run", 2, f2))
	mustRead(t, st, "run", 2, f2)
	if have, _ := storedChunks(t, st, "run"); !sameSet(have, hashesOf(f2)) {
		t.Errorf("after a replacement: %d chunks, want the new frame's %d", len(have), len(hashesOf(f2)))
	}
	got, err := st.AtOrBelow("run", 1)
	if err != nil || got.Plain || !bytes.Equal(got.Frame, v1.Frame) {
		t.Fatalf("the version 1 snapshot reads back as %+v, %v", got, err)
	}
	// Put twice in one batch: the first put's chunks do not stay behind.
	b := st.NewBatch()
	for _, f := range [][]byte{f1, f2[:100<<10]} {
		if err := b.PutSnapshot(plainSnapshot("run", 3, f)); err != nil {
			t.Fatal(err)
		}
	}
	mustCommit(t, b, true)
	want := hashesOf(f2)
	for h := range hashesOf(f2[:100<<10]) {
		want[h] = true
	}
	if have, _ := storedChunks(t, st, "run"); !sameSet(have, want) {
		t.Errorf("after a put replaced in its batch: %d chunks, want %d", len(have), len(want))
	}
	var seen []uint64
	if err := st.EachSnapshot(func(run string, seq uint64, s *Snapshot, err error) error {
		if err != nil || s.Plain != (seq != 1) {
			t.Errorf("EachSnapshot: run %q seq %d: %+v, %v", run, seq, s, err)
		}
		seen = append(seen, seq)
		return nil
	}); err != nil || len(seen) != 3 {
		t.Errorf("EachSnapshot saw %v, %v", seen, err)
	}
	// An empty plain frame is a snapshot without chunks.
	putCommit(t, st, plainSnapshot("run", 4, nil))
	if got, err := st.Latest("run"); err != nil || !got.Plain || len(got.Frame) != 0 {
		t.Errorf("an empty plain frame reads back as %+v, %v", got, err)
	}
}

// TestChunkPinnedByOpenBatch: a chunk a batch being built reuses is not
// removed by a commit that deletes the last other snapshot holding it.
func TestChunkPinnedByOpenBatch(t *testing.T) {
	st := openMem(t, vfs.NewMem())
	f1 := randomFrame(9, 500<<10)
	putCommit(t, st, plainSnapshot("run", 1, f1))
	a := st.NewBatch()
	if err := a.PutSnapshot(plainSnapshot("run", 2, f1)); err != nil {
		t.Fatal(err)
	}
	b := st.NewBatch()
	if err := b.DeleteSnapshot("run", 1); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, b, true)
	mustCommit(t, a, true)
	mustRead(t, st, "run", 2, f1)
	// Unpinned once committed: deleting the snapshot now removes them.
	b = st.NewBatch()
	if err := b.DeleteSnapshot("run", 2); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, b, true)
	if have, _ := storedChunks(t, st, "run"); len(have) != 0 {
		t.Errorf("%d chunks left after the last snapshot went", len(have))
	}
	if len(st.pins.m) != 0 {
		t.Errorf("%d pins left", len(st.pins.m))
	}
}

// TestChunkDamage: a damaged, missing or wrong chunk makes the snapshot
// read as ErrCorrupt naming the run, seq and chunk (and the store fails, as
// for any damage: the engine serves from the log and rebuilds it).
func TestChunkDamage(t *testing.T) {
	f := randomFrame(10, 400<<10)
	refs, ends := chunkFrame(f, nil)
	if len(refs) < 3 {
		t.Fatalf("%d chunks", len(refs))
	}
	victim := AppendChunkKey(nil, "run", refs[1].Hash)
	cases := map[string]func(b *pebble.Batch, val []byte){
		"damaged": func(b *pebble.Batch, val []byte) {
			val[len(val)/2] ^= 0x40
			b.Set(victim, val, nil)
		},
		"missing": func(b *pebble.Batch, _ []byte) { b.Delete(victim, nil) },
		"wrong hash": func(b *pebble.Batch, _ []byte) {
			// Another chunk's bytes of the same length, under this key,
			// with a checksum right for it.
			other := bytes.Clone(f[ends[0]:ends[1]])
			other[0] ^= 1
			v := AppendChunk(nil, "run", other)
			body := v[:len(v)-4]
			b.Set(victim, binary.BigEndian.AppendUint32(bytes.Clone(body), crc32c.Update(crc32c.Checksum(victim), body)), nil)
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			st := openMem(t, vfs.NewMem())
			putCommit(t, st, plainSnapshot("run", 5, f))
			val, closer, err := st.db.Get(victim)
			if err != nil {
				t.Fatal(err)
			}
			val = bytes.Clone(val)
			closer.Close()
			pb := st.db.NewBatch()
			damage(pb, val)
			if err := pb.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			_, err = st.AtOrBelow("run", 9)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `run "run" seq 5`) || !strings.Contains(err.Error(), "chunk 1 of") {
				t.Fatalf("AtOrBelow over a %s chunk: %v, want ErrCorrupt naming run, seq and chunk", name, err)
			}
			t.Log(err)
		})
	}
}

// TestChunkedReadsDuringDeletes: a read of a snapshot that a concurrent
// commit deletes, with the chunks only it held, reads the snapshot whole
// (value and chunks from one view), never a missing chunk.
func TestChunkedReadsDuringDeletes(t *testing.T) {
	st := openMem(t, vfs.NewMem())
	base := randomFrame(11, 200<<10)
	frameAt := func(seq uint64) []byte {
		return append(bytes.Clone(base), randomFrame(seq, 40<<10)...)
	}
	putCommit(t, st, plainSnapshot("run", 1, frameAt(1)))
	done := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for {
			select {
			case <-done:
				return
			default:
			}
			s, err := st.Latest("run")
			if err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(s.Frame, frameAt(s.Seq)) {
				errs <- errors.New("a snapshot read back other bytes")
				return
			}
		}
	}()
	for seq := uint64(2); seq <= 40; seq++ {
		b := st.NewBatch()
		if err := b.PutSnapshot(plainSnapshot("run", seq, frameAt(seq))); err != nil {
			t.Fatal(err)
		}
		if err := b.DeleteSnapshot("run", seq-1); err != nil {
			t.Fatal(err)
		}
		mustCommit(t, b, false)
	}
	close(done)
	if err := <-errs; err != nil {
		t.Fatalf("read during deletes: %v", err)
	}
	if have, _ := storedChunks(t, st, "run"); !sameSet(have, hashesOf(frameAt(40))) {
		t.Errorf("%d chunks left, want the last frame's %d", len(have), len(hashesOf(frameAt(40))))
	}
}

// TestChunkBoundariesAt checks the writer's cuts: without them the chunks
// are ChunkBoundaries'; with them no chunk spans a cut, the stretches
// between cuts are chunked as if alone, cuts out of order or out of raw are
// ignored, and the cuts given are not changed.
func TestChunkBoundariesAt(t *testing.T) {
	raw := randomFrame(7, 600<<10)
	if got, want := ChunkBoundariesAt(raw, nil), ChunkBoundaries(raw); !equalInts(got, want) {
		t.Fatalf("no cuts: %v, want ChunkBoundaries' %v", got, want)
	}
	if got := ChunkBoundariesAt(nil, []int{0, 5}); len(got) != 0 {
		t.Fatalf("an empty frame cuts at %v", got)
	}
	cuts := []int{3000, 200 << 10, 590 << 10}
	keep := slices.Clone(cuts)
	ends := ChunkBoundariesAt(raw, cuts)
	if !equalInts(cuts, keep) {
		t.Fatalf("cuts changed to %v", cuts)
	}
	for _, c := range cuts {
		if !slices.Contains(ends, c) {
			t.Errorf("no chunk ends at the cut %d: %v", c, ends)
		}
	}
	// Each stretch is chunked on its own.
	var want []int
	start := 0
	for _, c := range append(slices.Clone(cuts), len(raw)) {
		for _, e := range ChunkBoundaries(raw[start:c]) {
			want = append(want, start+e)
		}
		start = c
	}
	if !equalInts(ends, want) {
		t.Errorf("cut at %v: %v, want %v", cuts, ends, want)
	}
	// Invalid cuts are ignored: a repeat, one going back, zero, negative,
	// past the end, len(raw) itself (a cut there changes nothing).
	odd := []int{-4, 0, 3000, 3000, 1000, 200 << 10, len(raw) + 1, 590 << 10, len(raw)}
	if got := ChunkBoundariesAt(raw, odd); !equalInts(got, want) {
		t.Errorf("cut at %v: %v, want %v", odd, got, want)
	}
	if got := ChunkBoundariesAt(raw, []int{len(raw) + 10}); !equalInts(got, ChunkBoundaries(raw)) {
		t.Errorf("a cut past the end changed the chunks: %v", got)
	}
}

// TestChunkCutsShare is what the cuts are for: a frame whose head (a
// stand-in for memory) is rewritten at every snapshot while its body (the
// messages) only grows. Without cuts, the head shares its chunk (at least
// ChunkMinSize bytes) with the body's first bytes, which are stored again
// at every snapshot; cut at the body's start, only the head's few bytes
// are. Each snapshot reads back exactly, and a read's Cuts are nil.
func TestChunkCutsShare(t *testing.T) {
	const snaps = 12
	stored := map[bool]int{}
	for _, cut := range []bool{false, true} {
		st := openMem(t, vfs.NewMem())
		body := randomFrame(8, 300<<10)
		frames := make([][]byte, 0, snaps)
		for i := range snaps {
			head := randomFrame(100+uint64(i), 3000)
			raw := append(head, body...)
			s := plainSnapshot("run", uint64(i+1), raw)
			if cut {
				s.Cuts = []int{len(head)}
			}
			putCommit(t, st, s)
			frames = append(frames, raw)
			body = append(body, randomFrame(200+uint64(i), 2<<10)...)
		}
		for i, raw := range frames {
			mustRead(t, st, "run", uint64(i+1), raw)
		}
		got, err := st.AtOrBelow("run", snaps)
		if err != nil {
			t.Fatal(err)
		}
		if got.Cuts != nil {
			t.Errorf("a read returned Cuts %v", got.Cuts)
		}
		_, stored[cut] = storedChunks(t, st, "run")
	}
	t.Logf("%d snapshots: %d bytes of chunks without cuts, %d with", snaps, stored[false], stored[true])
	// Each snapshot after the first stores its head's chunk again: with
	// the cut 3,000 bytes, without it at least ChunkMinSize.
	if saved := stored[false] - stored[true]; saved < (snaps-1)*(ChunkMinSize-3000) {
		t.Errorf("the cut saved %d bytes of chunks over %d snapshots, want at least %d", saved, snaps, (snaps-1)*(ChunkMinSize-3000))
	}
}
