package frame_test

import (
	"bytes"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/klauspost/compress/s2"
)

// FuzzBudgetDecompress: decompressing any records under a budget never
// panics, and never yields more bytes in all than the budget allows for
// the bytes given.
func FuzzBudgetDecompress(f *testing.F) {
	c := frame.NewCompressor(nil)
	f.Add(append([]byte{byte(frame.CodecS2), 0}, s2.Encode(nil, bytes.Repeat([]byte{'A'}, 1<<20))...), 3)
	f.Add(c.Compress(nil, bytes.Repeat([]byte{'A'}, 1<<20), 0), 3)
	f.Add(c.CompressWith(nil, bytes.Repeat([]byte("abc"), 5000), frame.CodecS2, 0), 2)
	f.Add([]byte{0, 0, 'x'}, 1)
	f.Fuzz(func(t *testing.T, rec []byte, times int) {
		b := &frame.Budget{Ratio: 8, Base: 64 << 10}
		bc := c.WithBudget(b)
		var in, out int64
		for i := 0; i < min(max(times, 1), 8); i++ {
			in += int64(len(rec))
			got, err := bc.Decompress(nil, rec)
			if err == nil {
				out += int64(len(got))
			}
			if out > b.Base+b.Ratio*in {
				t.Fatalf("%d bytes out of %d in, beyond the budget", out, in)
			}
		}
	})
}
