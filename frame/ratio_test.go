package frame

import (
	"bytes"
	"errors"
	"testing"

	"github.com/klauspost/compress/s2"
)

// bombRecord is what a hostile writer stores: src in s2, whatever its
// ratio (the engine's Compress keeps MaxRatio).
func bombRecord(src []byte) []byte {
	return append([]byte{byte(CodecS2), 0}, s2.Encode(nil, src)...)
}

// TestCompressKeepsMaxRatio: whatever its input, codec and dictionary, a
// record the writer compresses decompresses to at most MaxRatio times its
// size and round-trips, so a reader's default budget with no base at all
// reads any number of them; the same bytes written as a bomb are refused.
func TestCompressKeepsMaxRatio(t *testing.T) {
	ds := trainedDicts(t)
	dictText := []byte("raw content dictionary: deploy the service to us-east-1 and check the bucket")
	if err := ds.Add(2, bytes.Repeat(dictText, 20)); err != nil {
		t.Fatal(err)
	}
	c := NewCompressor(ds)
	sizes := []int{48, 255, 256, 257, 4 << 10, 8<<10 - 1, 8 << 10, 100 << 10, 1<<20 - 1, 1 << 20, 3<<20 + 7}
	if !testing.Short() {
		sizes = append(sizes, 8<<20+3)
	}
	var inputs [][]byte
	for _, n := range sizes {
		inputs = append(inputs, bytes.Repeat([]byte{'A'}, n), bytes.Repeat(dictText, n/len(dictText)+1)[:n])
	}
	for i, in := range inputs {
		for _, id := range []uint32{0, 1, 2} {
			recs := map[string][]byte{"auto": c.Compress([]byte("hdr"), in, id)}
			for _, codec := range []Codec{CodecNone, CodecS2, CodecZstd} {
				recs[codec.String()] = c.CompressWith([]byte("hdr"), in, codec, id)
			}
			for name, rec := range recs {
				rec = rec[3:]
				if int64(len(rec))*MaxRatio < int64(len(in)) {
					t.Fatalf("input %d (%d B), dict %d, %s: %d bytes, past MaxRatio", i, len(in), id, name, len(rec))
				}
				b := &Budget{Ratio: DefaultBudgetRatio} // no base: the rule alone
				out, err := c.WithBudget(b).Decompress(nil, rec)
				if err != nil {
					t.Fatalf("input %d (%d B), dict %d, %s: %v", i, len(in), id, name, err)
				}
				if !bytes.Equal(out, in) {
					t.Fatalf("input %d (%d B), dict %d, %s: round trip differs", i, len(in), id, name)
				}
			}
		}
	}
	// The rule's cost: a 1 MiB run of one byte takes 4 KiB and a little.
	if n := len(c.Compress(nil, bytes.Repeat([]byte{'A'}, 1<<20), 0)); n > 4<<10+64 {
		t.Fatalf("1 MiB of one byte takes %d bytes", n)
	}
	// The same 1 MiB from a writer that ignores the rule.
	bomb := bombRecord(bytes.Repeat([]byte{'A'}, 1<<20))
	if _, err := c.WithBudget(&Budget{Ratio: DefaultBudgetRatio}).Decompress(nil, bomb); !errors.Is(err, ErrBudget) {
		t.Fatalf("a bomb of %d bytes: %v, want ErrBudget", len(bomb), err)
	}
}

// FuzzCompressRatio: for any input, repeated to any length, any codec and
// dictionary, what the writer compresses round-trips and keeps MaxRatio.
func FuzzCompressRatio(f *testing.F) {
	f.Add([]byte("A"), 1<<20, uint8(0), uint8(0))
	f.Add([]byte("tool output line: OK\n"), 300<<10, uint8(2), uint8(1))
	f.Add([]byte{0, 1, 2, 3}, 9000, uint8(1), uint8(2))
	dict := bytes.Repeat([]byte("raw content dictionary: deploy the service to us-east-1 and check the bucket"), 20)
	ds := NewDicts()
	if err := ds.Add(1, dict); err != nil {
		f.Fatal(err)
	}
	c := NewCompressor(ds)
	f.Fuzz(func(t *testing.T, unit []byte, n int, codec, id uint8) {
		if len(unit) == 0 {
			return
		}
		n = min(max(n, 0), 4<<20)
		in := bytes.Repeat(unit, n/len(unit)+1)[:n]
		var rec []byte
		if codec%4 == 3 {
			rec = c.Compress(nil, in, uint32(id%3))
		} else {
			rec = c.CompressWith(nil, in, Codec(codec%4), uint32(id%3))
		}
		if int64(len(rec))*MaxRatio < int64(len(in)) {
			t.Fatalf("%d bytes from %d, past MaxRatio", len(rec), len(in))
		}
		out, err := c.Decompress(nil, rec)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("round trip of %d bytes: %v", len(in), err)
		}
	})
}
