package frame

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/continuumdb/continuum/internal/agenttext"
)

// samples returns n encoded deltas of realistic agent text.
func samples(seed int64, n int) [][]byte {
	g := newGen(seed)
	f := &Frame{}
	var out [][]byte
	for len(out) < n {
		d := g.delta(f)
		if err := f.Apply(d); err != nil {
			panic(err)
		}
		out = append(out, AppendDelta(nil, d))
	}
	return out
}

// trainedDict is trained once per test binary: training is the slow part.
var trainedDict = sync.OnceValues(func() ([]byte, error) {
	return TrainDict(samples(100, 400), 16<<10)
})

func trainedDicts(t testing.TB) *Dicts {
	t.Helper()
	dict, err := trainedDict()
	if err != nil {
		t.Fatal(err)
	}
	ds := NewDicts()
	if err := ds.Add(1, dict); err != nil {
		t.Fatal(err)
	}
	return ds
}

func TestCompressRoundTrip(t *testing.T) {
	ds := trainedDicts(t)
	raw := []byte("raw content dictionary: deploy the service to us-east-1 and check the bucket")
	if err := ds.Add(2, raw); err != nil {
		t.Fatal(err)
	}
	c := NewCompressor(ds)
	g := agenttext.New(testSeed(t))
	inputs := [][]byte{nil, {}, []byte("x"), []byte(g.Message(47)), []byte(g.Message(48)), []byte(g.Message(600)),
		g.ToolResult(2000), []byte(g.Message(200000))}
	if !testing.Short() {
		inputs = append(inputs, bytes.Repeat([]byte("ab"), 1<<20), []byte(g.Message(3<<20)))
	}
	inputs = append(inputs, samples(7, 10)...)
	for i, in := range inputs {
		for _, id := range []uint32{0, 1, 2, 99} {
			check := func(name string, rec []byte) {
				t.Helper()
				out, err := c.Decompress([]byte("pre"), rec)
				if err != nil {
					t.Fatalf("input %d (%d B), dict %d, %s: %v", i, len(in), id, name, err)
				}
				if !bytes.Equal(out[3:], in) || string(out[:3]) != "pre" {
					t.Fatalf("input %d (%d B), dict %d, %s: round trip differs", i, len(in), id, name)
				}
			}
			rec := c.Compress(nil, in, id)
			check("auto", rec)
			if codec, _, _ := PeekCodec(rec); codec == CodecNone && len(rec) != len(in)+2 {
				t.Fatalf("raw record has %d bytes for %d", len(rec), len(in))
			}
			if len(rec) > len(in)+2 {
				t.Fatalf("input %d: compressed %d bytes into %d", i, len(in), len(rec))
			}
			for _, codec := range []Codec{CodecNone, CodecS2, CodecZstd} {
				check(codec.String(), c.CompressWith([]byte{}, in, codec, id))
			}
		}
	}
}

func TestCompressPolicy(t *testing.T) {
	ds := trainedDicts(t)
	c := NewCompressor(ds)
	g := agenttext.New(5)
	tests := []struct {
		name   string
		in     []byte
		dict   uint32
		codec  Codec
		dictID uint32
	}{
		{"tiny stays raw", []byte("hello"), 1, CodecNone, 0},
		{"random stays raw", pseudoRandom(4096), 0, CodecNone, 0},
		{"small record s2 with dict", []byte(g.Message(600)), 1, CodecS2, 1},
		{"small record s2 without dict", []byte(g.Message(2000)), 0, CodecS2, 0},
		{"unknown dict falls back to none", []byte(g.Message(2000)), 42, CodecS2, 0},
		{"snapshot-sized zstd with dict", []byte(g.Message(100 << 10)), 1, CodecZstd, 1},
		{"snapshot-sized zstd without dict", []byte(g.Message(100 << 10)), 0, CodecZstd, 0},
	}
	if !testing.Short() {
		tests = append(tests, struct {
			name   string
			in     []byte
			dict   uint32
			codec  Codec
			dictID uint32
		}{"huge compressible uses s2", []byte(g.Message(2 << 20)), 0, CodecS2, 0})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := c.Compress(nil, tc.in, tc.dict)
			codec, id, err := PeekCodec(rec)
			if err != nil {
				t.Fatal(err)
			}
			if codec != tc.codec || id != tc.dictID {
				t.Fatalf("got %s dict %d, want %s dict %d (%d -> %d bytes)", codec, id, tc.codec, tc.dictID, len(tc.in), len(rec))
			}
		})
	}
}

// TestDictShrinksDeltas checks the point of dictionaries on real-looking
// deltas: with a trained dictionary the total is clearly smaller.
func TestDictShrinksDeltas(t *testing.T) {
	ds := trainedDicts(t)
	c := NewCompressor(ds)
	var raw, plain, dict int
	for _, s := range samples(8, 200) { // other seed than training
		raw += len(s)
		plain += len(c.Compress(nil, s, 0))
		dict += len(c.Compress(nil, s, 1))
	}
	t.Logf("200 deltas: raw %d B, auto %d B (%.2fx), auto+dict %d B (%.2fx)", raw, plain, float64(raw)/float64(plain), dict, float64(raw)/float64(dict))
	if float64(dict) > 0.75*float64(plain) {
		t.Fatalf("dictionary saves too little: %d vs %d bytes", dict, plain)
	}
}

func pseudoRandom(n int) []byte {
	b := make([]byte, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

func TestDicts(t *testing.T) {
	var zero Dicts
	if _, ok := zero.Get(1); ok || len(zero.IDs()) != 0 {
		t.Fatal("zero Dicts is not empty")
	}
	if err := zero.Add(9, []byte("0123456789abcdefghij")); err != nil {
		t.Fatalf("zero Dicts Add: %v", err)
	}
	ds := NewDicts()
	raw := []byte("0123456789abcdefghij")
	if err := ds.Add(0, raw); !errors.Is(err, ErrDict) {
		t.Fatalf("id 0: %v", err)
	}
	if err := ds.Add(3, []byte("short")); !errors.Is(err, ErrDict) {
		t.Fatalf("short raw dict: %v", err)
	}
	if err := ds.Add(4, append([]byte{0x37, 0xa4, 0x30, 0xec}, make([]byte, 40)...)); !errors.Is(err, ErrDict) {
		t.Fatalf("malformed zstd dict: %v", err)
	}
	if err := ds.Add(5, []byte{0x37, 0xa4, 0x30, 0xec, 1}); !errors.Is(err, ErrDict) {
		t.Fatalf("truncated zstd dict: %v", err)
	}
	if err := ds.Add(1, raw); err != nil {
		t.Fatal(err)
	}
	if err := ds.Add(1, raw); err != nil {
		t.Fatalf("re-adding the same bytes: %v", err)
	}
	if err := ds.Add(1, []byte("0123456789abcdefghiX")); !errors.Is(err, ErrDict) {
		t.Fatalf("re-binding id 1: %v", err)
	}
	got, ok := ds.Get(1)
	if !ok || !bytes.Equal(got, raw) {
		t.Fatalf("Get(1) = %q, %v", got, ok)
	}
	raw[0] = 'X' // Add copied
	if got, _ := ds.Get(1); got[0] != '0' {
		t.Fatal("Dicts kept the caller's slice")
	}
	if _, ok := ds.Get(2); ok {
		t.Fatal("Get of an unknown id")
	}
	if ids := ds.IDs(); len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("IDs = %v", ids)
	}
}

func TestTrainDictErrors(t *testing.T) {
	if _, err := TrainDict(nil, 16<<10); !errors.Is(err, ErrTooFewSamples) {
		t.Fatalf("no samples: %v", err)
	}
	if _, err := TrainDict(samples(1, 3), 16<<10); !errors.Is(err, ErrTooFewSamples) {
		t.Fatalf("3 samples: %v", err)
	}
	if _, err := TrainDict(samples(1, 100), 10); err == nil {
		t.Fatal("tiny max size accepted")
	}
	var zeros [][]byte
	for i := 0; i < 20; i++ {
		zeros = append(zeros, make([]byte, 200))
	}
	if d, err := TrainDict(zeros, 4096); err == nil {
		t.Fatalf("trained a %d-byte dictionary from zeros", len(d))
	}
}

// TestUnknownDictReadable: a record compressed with dictionary 5 needs 5;
// once registered (as after a restart) it reads.
func TestUnknownDictOnRead(t *testing.T) {
	ds := trainedDicts(t)
	in := samples(3, 1)[0]
	rec := NewCompressor(ds).Compress(nil, in, 1)
	other := NewCompressor(NewDicts())
	if _, err := other.Decompress(nil, rec); !errors.Is(err, ErrUnknownDict) {
		t.Fatalf("err = %v, want ErrUnknownDict", err)
	}
	d, _ := ds.Get(1)
	ds2 := NewDicts()
	if err := ds2.Add(1, d); err != nil {
		t.Fatal(err)
	}
	out, err := NewCompressor(ds2).Decompress(nil, rec)
	if err != nil || !bytes.Equal(out, in) {
		t.Fatalf("after registering: %v", err)
	}
}

func TestCompressConcurrent(t *testing.T) {
	ds := trainedDicts(t)
	c := NewCompressor(ds)
	recs := samples(11, 64)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	iters := 200
	if testing.Short() {
		iters = 40
	}
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf, out []byte
			for i := 0; i < iters; i++ {
				in := recs[(i+w)%len(recs)]
				buf = c.Compress(buf[:0], in, uint32(i%2))
				var err error
				out, err = c.Decompress(out[:0], buf)
				if err != nil || !bytes.Equal(out, in) {
					errs <- errors.New("concurrent round trip failed")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestCompressHotPathAllocs(t *testing.T) {
	ds := trainedDicts(t)
	c := NewCompressor(ds)
	in := samples(12, 1)[0]
	buf := make([]byte, 0, 4096)
	out := make([]byte, 0, 4096)
	c.Compress(buf, in, 1) // warm the pools
	allocs := testing.AllocsPerRun(200, func() {
		rec := c.Compress(buf[:0], in, 1)
		if _, err := c.Decompress(out[:0], rec); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Fatalf("Compress+Decompress with reused buffers: %.1f allocations", allocs)
	}
}

func TestClaimedLen(t *testing.T) {
	c := NewCompressor(NewDicts())
	src := bytes.Repeat([]byte("claimed "), 100)
	for _, codec := range []Codec{CodecNone, CodecS2, CodecZstd} {
		rec := c.CompressWith(nil, src, codec, 0)
		n, known, err := ClaimedLen(rec)
		if err != nil || known != (codec != CodecZstd) || known && n != len(src) {
			t.Fatalf("%v: ClaimedLen = %d, %v, %v; want %d", codec, n, known, err, len(src))
		}
	}
	if _, _, err := ClaimedLen([]byte{byte(CodecS2), 0, 0xff}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a bad s2 length: %v", err)
	}
	if _, _, err := ClaimedLen(nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("empty: %v", err)
	}
}
