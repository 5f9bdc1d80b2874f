package snapshot

import (
	"encoding/binary"
	"slices"
	"testing"
)

// FuzzChunkBoundariesAt: for any frame and any cuts (in order or not,
// inside the frame or not), the chunks cover the frame exactly, in order,
// none empty nor longer than ChunkMaxSize; every cut taken (one after the
// cut before it, within the frame) ends a chunk; and between the cuts the
// chunks are ChunkBoundaries' of that stretch alone, so none but a
// stretch's last is shorter than ChunkMinSize.
func FuzzChunkBoundariesAt(f *testing.F) {
	f.Add(uint64(1), uint32(300<<10), []byte{})
	f.Add(uint64(2), uint32(100<<10), []byte{0xb8, 0x0b, 0, 0, 0, 0x20, 0x03, 0})
	f.Add(uint64(3), uint32(20), []byte{5, 0, 0, 0, 5, 0, 0, 0, 30, 0, 0, 0})
	f.Fuzz(func(t *testing.T, seed uint64, size uint32, cutBytes []byte) {
		n := int(size % (1 << 20))
		raw := randomFrame(seed, n)
		var cuts []int
		for i := 0; i+4 <= len(cutBytes); i += 4 {
			cuts = append(cuts, int(int32(binary.LittleEndian.Uint32(cutBytes[i:])))%(n+2))
		}
		ends := ChunkBoundariesAt(raw, cuts)
		// The cuts taken, by the rule the function documents.
		var taken []int
		prev := 0
		for _, c := range cuts {
			if c > prev && c <= n {
				taken = append(taken, c)
				prev = c
			}
		}
		if n == 0 {
			if len(ends) != 0 {
				t.Fatalf("an empty frame cut at %v", ends)
			}
			return
		}
		start := 0
		for i, e := range ends {
			if e <= start || e-start > ChunkMaxSize {
				t.Fatalf("chunk %d is bytes %d to %d", i, start, e)
			}
			start = e
		}
		if start != n {
			t.Fatalf("the chunks end at %d of %d bytes", start, n)
		}
		var want []int
		from := 0
		for _, c := range append(taken, n) {
			if c == from {
				continue // a cut at the frame's end
			}
			for _, e := range ChunkBoundaries(raw[from:c]) {
				want = append(want, from+e)
			}
			from = c
		}
		if !equalInts(ends, want) {
			t.Fatalf("cuts %v (taken %v): chunks end at %v, want %v", cuts, taken, ends, want)
		}
	})
}

// FuzzChunkFrameAfter: a frame cut after the memo of an earlier one (the
// same frame with bytes appended, inserted at, changed at or cut at a
// position, and its cuts moved) gets chunkFrame's chunks exactly.
func FuzzChunkFrameAfter(f *testing.F) {
	f.Add(uint64(1), uint32(600<<10), uint32(100<<10), uint32(200<<10), uint8(0), []byte{0xe8, 0x03, 0, 0, 0, 0, 0x0e, 0})
	f.Add(uint64(2), uint32(300<<10), uint32(5), uint32(70<<10), uint8(2), []byte{})
	f.Fuzz(func(t *testing.T, seed uint64, size, grow, at uint32, edit uint8, cutBytes []byte) {
		n := int(size % (2 << 20))
		prev := randomFrame(seed, n)
		var cuts []int
		for i := 0; i+4 <= len(cutBytes); i += 4 {
			cuts = append(cuts, int(int32(binary.LittleEndian.Uint32(cutBytes[i:])))%(n+2))
		}
		more := randomFrame(seed+1, int(grow%(512<<10)))
		p := int(at) % (n + 1)
		var raw []byte
		switch edit % 4 {
		case 0:
			raw = append(append([]byte(nil), prev...), more...)
		case 1:
			raw = append(append(append([]byte(nil), prev[:p]...), more...), prev[p:]...)
		case 2:
			raw = append([]byte(nil), prev...)
			if p < n {
				raw[p]++
			}
		case 3:
			raw = prev[:p]
		}
		newCuts := make([]int, len(cuts))
		for i, c := range cuts {
			newCuts[i] = c
			if edit%4 <= 1 && c >= p {
				newCuts[i] += len(more)
			}
		}
		refs, ends := chunkFrame(prev, cuts)
		m := &chunkMemo{raw: prev, cuts: cuts, ends: ends, refs: refs}
		gotRefs, gotEnds := chunkFrameAfter(m, raw, newCuts)
		wantRefs, wantEnds := chunkFrame(raw, newCuts)
		if !slices.Equal(gotEnds, wantEnds) || !slices.Equal(gotRefs, wantRefs) {
			t.Fatalf("edit %d at %d: ends %v, want %v", edit%4, p, gotEnds, wantEnds)
		}
	})
}
