package frame

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// h builds a record from hex-ish pieces: strings are taken literally.
func rec(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch v := p.(type) {
		case byte:
			b = append(b, v)
		case int:
			b = append(b, byte(v))
		case string:
			b = append(b, v...)
		case []byte:
			b = append(b, v...)
		}
	}
	return b
}

func TestDecodeDeltaMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		is   error
		msg  string // substring of the error
	}{
		{"empty", nil, ErrCorrupt, "at offset 0: empty input"},
		{"frame tag", rec(0xF1, 0), ErrCorrupt, "not a delta tag"},
		{"bad version", rec(0xD5, 0), ErrVersion, "version 5 (this build reads versions 1 to 4)"},
		{"version 3 without replace_frame", rec(0xD3, 0), ErrCorrupt, "holds no replace_frame op"},
		{"replace_frame in version 2", rec(0xD2, 1, 14, 0), ErrCorrupt, "unknown op kind 14"},
		{"replace_frame of a damaged frame", rec(0xD3, 1, 14, 2, 0xF1, 0), ErrCorrupt, "replace_frame: "},
		{"version 0", rec(0xD0, 0), ErrVersion, "version 0"},
		{"truncated count", rec(0xD1), ErrCorrupt, "offset 1: truncated: want op count"},
		{"count beyond input", rec(0xD1, 5, 7), ErrCorrupt, "op count 5 exceeds"},
		{"huge count", rec(0xD1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), ErrCorrupt, "exceeds"},
		{"varint overflow", rec(0xD1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), ErrCorrupt, "overflows"},
		{"non-minimal count", rec(0xD1, 0x81, 0x00, 7), ErrCorrupt, "offset 1: non-minimal varint in op count"},
		{"non-minimal length", rec(0xD1, 1, 1, 0x82, 0x00, "go"), ErrCorrupt, "offset 3: non-minimal varint in objective length"},
		{"unknown op", rec(0xD1, 1, 99), ErrCorrupt, "offset 2: unknown op kind 99"},
		{"op zero", rec(0xD1, 1, 0), ErrCorrupt, "unknown op kind 0"},
		{"truncated string", rec(0xD1, 1, 1, 10, "abc"), ErrCorrupt, "offset 3: objective length 10 exceeds the remaining 3 bytes"},
		{"oversized length", rec(0xD1, 1, 4, 1, "k", 0xff, 0xff, 0xff, 0xff, 0x0f, "v"), ErrCorrupt, "memory value length 4294967295 exceeds"},
		{"bad status", rec(0xD1, 1, 3, 2, "s1", 5), ErrCorrupt, "offset 6: unknown subgoal status 5"},
		{"bad role", rec(0xD1, 1, 8, 4, 0), ErrCorrupt, "unknown message role 4"},
		{"reserved head bits", rec(0xD1, 1, 8, 0x41, 0), ErrCorrupt, "reserved bits"},
		{"tool flag with empty tool", rec(0xD1, 1, 8, 0x11, 0, 0), ErrCorrupt, "message tool flagged present but empty"},
		{"trailing bytes", rec(0xD1, 1, 7, 0), ErrCorrupt, "offset 3: 1 trailing bytes"},
		{"op fields missing", rec(0xD1, 2, 7, 1), ErrCorrupt, "offset 4: truncated: want objective length"},
		{"truncated status", rec(0xD1, 1, 3, 1, "s"), ErrCorrupt, "want subgoal status"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DecodeDelta(tc.in)
			if err == nil {
				t.Fatalf("decoded %v", d)
			}
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v does not match %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not say %q", err, tc.msg)
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Record != "delta" {
				t.Fatalf("error %v is not a delta CorruptError", err)
			}
		})
	}
}

func TestDecodeFrameMalformed(t *testing.T) {
	empty := rec(0xF1, 0, 0, 0, 0, 0, 0) // objective, subgoals, memory, scratch, messages, pending
	if _, err := DecodeFrame(empty); err != nil {
		t.Fatalf("empty frame: %v", err)
	}
	tests := []struct {
		name string
		in   []byte
		is   error
		msg  string
	}{
		{"empty", nil, ErrCorrupt, "empty input"},
		{"delta tag", rec(0xD1, 0), ErrCorrupt, "not a frame tag"},
		{"bad version", rec(0xF7, 0, 0, 0, 0, 0, 0), ErrVersion, "version 7"},
		{"truncated", empty[:4], ErrCorrupt, "truncated"},
		{"subgoal count beyond input", rec(0xF1, 0, 9, 0, 0, 0), ErrCorrupt, "subgoal count 9 exceeds"},
		{"memory count beyond input", rec(0xF1, 0, 0, 200, 1, 0, 0, 0), ErrCorrupt, "memory entry count 200 exceeds"},
		{"message count beyond input", rec(0xF1, 0, 0, 0, 0, 0x80, 0x80, 0x01, 0), ErrCorrupt, "message count 16384 exceeds"},
		{"unsorted keys", rec(0xF1, 0, 0, 2, 1, "b", 0, 1, "a", 0, 0, 0, 0), ErrCorrupt, `memory key "a" not after "b"`},
		{"duplicate keys", rec(0xF1, 0, 0, 2, 1, "a", 0, 1, "a", 0, 0, 0, 0), ErrCorrupt, "sorted and unique"},
		{"bad status", rec(0xF1, 0, 1, 1, "s", 0, 8, 0, 0, 0, 0), ErrCorrupt, "unknown subgoal status 8 (subgoal 0)"},
		{"duplicate subgoal", rec(0xF1, 0, 2, 1, "s", 0, 0, 1, "s", 0, 0, 0, 0, 0, 0), ErrCorrupt, `repeats id "s"`},
		{"empty subgoal id", rec(0xF1, 0, 1, 0, 0, 0, 0, 0, 0, 0), ErrCorrupt, "empty id"},
		{"duplicate pending", rec(0xF1, 0, 0, 0, 0, 0, 2, 1, "c", 0, 0, 0, 1, "c", 0, 0, 0), ErrCorrupt, `repeats id "c"`},
		{"trailing", append(bytes.Clone(empty), 0), ErrCorrupt, "1 trailing bytes"},
		{"bad role", rec(0xF1, 0, 0, 0, 0, 1, 9, 0, 0), ErrCorrupt, "unknown message role 9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := DecodeFrame(tc.in)
			if err == nil {
				t.Fatalf("decoded %+v", f)
			}
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v does not match %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

// TestDecodeTruncations decodes every prefix of real records: each must
// fail cleanly (never panic, never succeed).
func TestDecodeTruncations(t *testing.T) {
	g := newGen(testSeed(t))
	f := g.frame(30)
	for _, fb := range [][]byte{AppendFrame(nil, f), AppendFrame(nil, withSealed(g, f))} {
		for i := 0; i < len(fb); i++ {
			if _, err := DecodeFrame(fb[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("frame prefix %d/%d: %v", i, len(fb), err)
			}
		}
	}
	for k := 0; k < 20; k++ {
		d := g.delta(f)
		if k%2 == 0 {
			d.SetSealed(g.id("sealed."), g.sealed())
		}
		db := AppendDelta(nil, d)
		for i := 0; i < len(db); i++ {
			if _, err := DecodeDelta(db[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("delta prefix %d/%d: %v", i, len(db), err)
			}
		}
	}
}

// TestDecodeBitFlips flips every bit of a record: decoding must not panic,
// and whatever it accepts must re-encode to the same bytes (the decoder
// accepts only canonical encodings).
func TestDecodeBitFlips(t *testing.T) {
	g := newGen(testSeed(t))
	n := 10
	if testing.Short() {
		n = 4
	}
	f := g.frame(n)
	for _, orig := range [][]byte{AppendFrame(nil, f), AppendDelta(nil, g.delta(f)),
		AppendFrame(nil, withSealed(g, f)), AppendDelta(nil, g.delta(f).SetSealed("k", g.sealed()))} {
		for i := 0; i < len(orig)*8; i++ {
			b := bytes.Clone(orig)
			b[i/8] ^= 1 << (i % 8)
			if b[0]&0xf0 == tagFrame&0xf0 {
				if got, err := DecodeFrame(b); err == nil && !bytes.Equal(AppendFrame(nil, got), b) {
					t.Fatalf("frame bit %d: accepted a non-canonical encoding", i)
				}
			} else if got, err := DecodeDelta(b); err == nil && !bytes.Equal(AppendDelta(nil, got), b) {
				t.Fatalf("delta bit %d: accepted a non-canonical encoding", i)
			}
		}
	}
}

func TestDecompressMalformed(t *testing.T) {
	ds := trainedDicts(t)
	c := NewCompressor(ds)
	in := samples(4, 1)[0]
	zrec := c.CompressWith(nil, in, CodecZstd, 0)
	zdict := c.CompressWith(nil, in, CodecZstd, 1)
	srec := c.CompressWith(nil, in, CodecS2, 0)
	tests := []struct {
		name string
		in   []byte
		is   error
		msg  string
	}{
		{"empty", nil, ErrCorrupt, "empty input"},
		{"no dict id", []byte{2}, ErrCorrupt, "bad dictionary id varint"},
		{"dict id overflow", []byte{2, 0xff, 0xff, 0xff, 0xff, 0x7f}, ErrCorrupt, "bad dictionary id"},
		{"bad codec", []byte{9, 0, 1, 2, 3}, ErrUnknownCodec, "codec 9"},
		{"bad codec with dict", []byte{9, 1, 1, 2, 3}, ErrUnknownCodec, "codec 9"},
		{"unknown dict", rec(2, 77, zrec[2:]), ErrUnknownDict, "id 77"},
		{"raw with dict", []byte{0, 1, 'x'}, ErrCorrupt, "raw record names dictionary 1"},
		{"truncated zstd", zrec[:len(zrec)-3], ErrCorrupt, "zstd payload"},
		{"zstd header only", zrec[:4], ErrCorrupt, "zstd frame header"},
		{"zstd dict mismatch", rec(2, 1, zrec[2:]), ErrCorrupt, "zstd frame names dictionary 0, record names 1"},
		{"zstd dict stripped", rec(2, 0, zdict[2:]), ErrCorrupt, "zstd frame names dictionary 1, record names 0"},
		{"zstd huge claim", rec(2, 0, 0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x01, 0, 0), ErrTooLarge, "claims"},
		{"truncated s2", srec[:len(srec)-5], ErrCorrupt, "s2 payload"},
		{"s2 huge claim", rec(1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0), ErrTooLarge, "s2 block claims"},
		{"s2 bad length", rec(1, 0, 0xff), ErrCorrupt, "s2 block length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.Decompress(nil, tc.in)
			if err == nil {
				t.Fatalf("decompressed %d bytes", len(out))
			}
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v does not match %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

// withSealed returns a copy of f that holds sealed values, under keys not
// in its Memory.
func withSealed(g *gen, f *Frame) *Frame {
	c := f.Clone()
	c.Sealed = map[string][]byte{}
	for i := 0; i < 3; i++ {
		c.Sealed[g.id("sealed.")] = g.sealed()
	}
	return c
}
