package fuzz

import (
	"bytes"
	"errors"
	"testing"

	"github.com/continuumdb/continuum/snapshot"
)

// chunkSeedFrames are raw frames of several sizes: one chunk, several, the
// edges of the chunker's bounds.
func chunkSeedFrames() [][]byte {
	var out [][]byte
	for _, n := range []int{1, 100, snapshot.ChunkMinSize, 3 * snapshot.ChunkAvgSize} {
		b := make([]byte, n)
		x := uint32(n)
		for i := range b {
			x = x*1664525 + 1013904223
			b[i] = byte(x >> 24)
		}
		out = append(out, b)
	}
	return out
}

// FuzzChunkedSnapshotDecode feeds arbitrary keys and values to the chunked
// (version 2) snapshot value decoder: it must never panic, must reject with
// ErrCorrupt, and whatever it accepts must re-encode to exactly the same
// value.
func FuzzChunkedSnapshotDecode(f *testing.F) {
	for i, s := range snapshotSeeds() {
		raw := chunkSeedFrames()[i%4]
		var refs []snapshot.ChunkRef
		start := 0
		for _, end := range snapshot.ChunkBoundaries(raw) {
			var r snapshot.ChunkRef
			r.Len = end - start
			r.Hash[0], r.Hash[15] = byte(start), byte(end)
			refs = append(refs, r)
			start = end
		}
		key := snapshot.AppendSnapshotKey(nil, s.RunID, s.Seq)
		val := snapshot.AppendChunkedSnapshot(nil, s, refs)
		f.Add(key, val)
		f.Add(key, val[:len(val)/2])
		flipped := bytes.Clone(val)
		flipped[len(flipped)/2] ^= 0x10
		f.Add(key, flipped)
	}
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, key, val []byte) {
		s, refs, err := snapshot.DecodeChunkedSnapshot(key, val)
		if err != nil {
			if !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if !s.Plain || s.Frame != nil {
			t.Fatalf("accepted value decodes to plain %v with %d frame bytes", s.Plain, len(s.Frame))
		}
		if got := snapshot.AppendSnapshotKey(nil, s.RunID, s.Seq); !bytes.Equal(got, key) {
			t.Fatalf("accepted key %x re-encodes as %x", key, got)
		}
		if got := snapshot.AppendChunkedSnapshot(nil, s, refs); !bytes.Equal(got, val) {
			t.Fatalf("accepted value re-encodes differently:\n got %x\nwant %x", got, val)
		}
	})
}

// FuzzChunkDecode feeds arbitrary keys, values and lengths to the chunk
// decoder: it must never panic, must reject with ErrCorrupt, and whatever
// it accepts must be the bytes the key's hash names.
func FuzzChunkDecode(f *testing.F) {
	for i, raw := range chunkSeedFrames() {
		if len(raw) > snapshot.ChunkMaxSize {
			continue
		}
		run := snapshotSeeds()[i].RunID
		val := snapshot.AppendChunk(nil, run, raw)
		refs := snapshotChunkRefs(raw)
		key := snapshot.AppendChunkKey(nil, run, refs[0].Hash)
		f.Add(key, val, len(raw))
		f.Add(key, val[:len(val)/2], len(raw))
		flipped := bytes.Clone(val)
		flipped[len(flipped)/2] ^= 0x10
		f.Add(key, flipped, len(raw))
	}
	f.Add([]byte{}, []byte{}, 0)
	f.Fuzz(func(t *testing.T, key, val []byte, n int) {
		if n < 0 || n > snapshot.ChunkMaxSize+1 {
			n = 1 + (n&0xffff)%(snapshot.ChunkMaxSize+1)
		}
		dst := make([]byte, n)
		err := snapshot.DecodeChunk(key, val, dst)
		if err != nil {
			if !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// Accepted: the bytes are those the key's hash names, and decoding
		// is a function of the value.
		h := snapshot.ChunkHash(dst)
		if !bytes.Equal(h[:], key[len(key)-snapshot.ChunkHashLen:]) {
			t.Fatalf("accepted chunk does not hash to its key %x", key)
		}
		again := make([]byte, n)
		if err := snapshot.DecodeChunk(key, val, again); err != nil || !bytes.Equal(again, dst) {
			t.Fatalf("decoding the accepted chunk again: %v", err)
		}
	})
}

// snapshotChunkRefs returns the chunk references of raw as the store cuts
// it, for the seeds: the hash of each chunk is not exported apart from them.
func snapshotChunkRefs(raw []byte) []snapshot.ChunkRef {
	var refs []snapshot.ChunkRef
	start := 0
	for _, end := range snapshot.ChunkBoundaries(raw) {
		refs = append(refs, snapshot.ChunkRef{Hash: snapshot.ChunkHash(raw[start:end]), Len: end - start})
		start = end
	}
	return refs
}
