package frame

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/continuumdb/continuum/internal/agenttext"
	"github.com/klauspost/compress/s2"
)

// s2DictCases are the dictionaries encodeS2Dict is tested with: a trained
// one (zstd format, its content the s2 dictionary) and short raw ones.
func s2DictCases(t testing.TB) []*dictEntry {
	ds := trainedDicts(t)
	for id, raw := range map[uint32][]byte{
		2: []byte("raw content dictionary: deploy the service to us-east-1"),
		3: bytes.Repeat([]byte{'a'}, 16),
	} {
		if err := ds.Add(id, raw); err != nil {
			t.Fatal(err)
		}
	}
	var es []*dictEntry
	for _, id := range ds.IDs() {
		e := ds.entry(id)
		if err := e.init(); err != nil {
			t.Fatal(err)
		}
		if e.s2 == nil || e.s2t == nil {
			t.Fatalf("dictionary %d: no s2 dictionary", id)
		}
		es = append(es, e)
	}
	return es
}

// checkS2Dict encodes src with e's dictionary and decodes it with s2's
// own decoder.
func checkS2Dict(t testing.TB, e *dictEntry, src []byte) int {
	t.Helper()
	out := encodeS2Dict(nil, src, e.s2t)
	if bound := s2.MaxEncodedLen(len(src)); len(out) > bound {
		t.Fatalf("dict %d: %d bytes encode to %d, over s2's bound %d", e.id, len(src), len(out), bound)
	}
	got, err := e.s2.Decode(nil, out)
	if err != nil {
		t.Fatalf("dict %d: s2 cannot decode the block of %d bytes (%x...): %v", e.id, len(src), out[:min(len(out), 32)], err)
	}
	if !bytes.Equal(got, src) {
		t.Fatalf("dict %d: %d bytes decode to %d different bytes", e.id, len(src), len(got))
	}
	return len(out)
}

func TestEncodeS2DictRoundTrip(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	g := agenttext.New(seed)
	inputs := [][]byte{nil, {}, []byte("x"), []byte("0123456789abcdef"), bytes.Repeat([]byte{'a'}, 5000),
		bytes.Repeat([]byte("ab"), s2DictMaxSrc/2), pseudoRandom(4000), pseudoRandom(s2DictMaxSrc)}
	for _, n := range []int{15, 16, 17, 47, 48, 100, 600, 2000, 8000, 30000} {
		inputs = append(inputs, []byte(g.Message(n)), g.ToolResult(n))
	}
	inputs = append(inputs, samples(seed, 200)...)
	for range 200 { // pieces of the dictionary and of each other, at random offsets
		b := make([]byte, 0, 4096)
		for len(b) < 1+rng.Intn(4000) {
			switch rng.Intn(3) {
			case 0:
				b = append(b, byte(rng.Intn(256)))
			case 1:
				if len(b) > 0 {
					i := rng.Intn(len(b))
					b = append(b, b[i:i+rng.Intn(len(b)-i)]...)
				}
			case 2:
				m := []byte(g.Message(64))
				b = append(b, m[:rng.Intn(len(m))]...)
			}
		}
		inputs = append(inputs, b)
	}
	for _, e := range s2DictCases(t) {
		for _, src := range inputs {
			checkS2Dict(t, e, src)
			// Pieces of the dictionary itself: copies that end at its end.
			c := e.s2t.content
			i := rng.Intn(len(c))
			checkS2Dict(t, e, append(append([]byte(g.Message(20)), c[i:]...), c[:rng.Intn(len(c))]...))
		}
	}
}

// TestEncodeS2DictSize: on the records it is for, the encoder does no
// worse than s2's own dictionary encoder.
func TestEncodeS2DictSize(t *testing.T) {
	e := s2DictCases(t)[0]
	var ours, theirs int
	for _, src := range samples(testSeed(t), 500) {
		ours += checkS2Dict(t, e, src)
		theirs += len(e.s2.Encode(nil, src))
	}
	t.Logf("500 deltas: %d bytes with encodeS2Dict, %d with s2's Dict.Encode (%.3fx)", ours, theirs, float64(ours)/float64(theirs))
	if ours > theirs {
		t.Fatalf("encodeS2Dict wrote %d bytes where s2's encoder wrote %d", ours, theirs)
	}
}

func FuzzEncodeS2Dict(f *testing.F) {
	for _, s := range samples(1, 8) {
		f.Add(s)
	}
	f.Add([]byte("0123456789abcdef0123456789abcdef"))
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) > s2DictMaxSrc {
			return
		}
		for _, e := range s2DictCases(t) {
			checkS2Dict(t, e, src)
		}
	})
}

func BenchmarkEncodeS2Dict(b *testing.B) {
	e := s2DictCases(b)[0]
	recs := samples(1, 256)
	var n int
	for _, r := range recs {
		n += len(r)
	}
	buf := make([]byte, 0, 1<<16)
	b.Run("ours", func(b *testing.B) {
		b.SetBytes(int64(n / len(recs)))
		for i := range b.N {
			buf = encodeS2Dict(buf[:0], recs[i%len(recs)], e.s2t)
		}
	})
	b.Run("s2", func(b *testing.B) {
		b.SetBytes(int64(n / len(recs)))
		for i := range b.N {
			buf = e.s2.Encode(buf[:cap(buf)], recs[i%len(recs)])
		}
	})
}
