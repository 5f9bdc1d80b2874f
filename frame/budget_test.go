package frame_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/klauspost/compress/s2"
)

// TestBudget checks that a budget lets through records within Base plus
// Ratio times their compressed size, refuses the record that would exceed
// it before decompressing it, and judges the records after a refusal on
// their own; and that Charge counts a record without decompressing it.
func TestBudget(t *testing.T) {
	c := frame.NewCompressor(nil)
	// 1 MiB from a few dozen bytes: past MaxRatio, which Compress keeps.
	bomb := append([]byte{byte(frame.CodecS2), 0}, s2.Encode(nil, bytes.Repeat([]byte{'A'}, 1<<20))...)
	plain := c.Compress(nil, []byte("a record that does not compress much, not at all"), 0)
	if len(bomb) > 1<<12 {
		t.Fatalf("the bomb compressed to %d bytes", len(bomb))
	}
	b := &frame.Budget{Ratio: 4, Base: 3 << 20}
	bc := c.WithBudget(b)
	for i := 0; i < 3; i++ {
		if _, err := bc.Decompress(nil, bomb); err != nil {
			t.Fatalf("bomb %d within the base: %v", i, err)
		}
	}
	out, err := bc.Decompress(nil, bomb)
	if !errors.Is(err, frame.ErrBudget) || len(out) != 0 {
		t.Fatalf("fourth bomb: %d bytes, %v; want ErrBudget and nothing decompressed", len(out), err)
	}
	if _, err := bc.Decompress(nil, plain); err != nil {
		t.Fatalf("a plain record after a refusal: %v", err)
	}
	in, got := b.Used()
	if want := int64(3<<20 + len("a record that does not compress much, not at all")); got != want || in != int64(3*len(bomb)+len(plain)) {
		t.Fatalf("Used = %d in, %d out; want %d in, %d out", in, got, 3*len(bomb)+len(plain), want)
	}
	if err := bc.Charge(bomb); !errors.Is(err, frame.ErrBudget) {
		t.Fatalf("Charge of a bomb past the budget: %v", err)
	}
	// The compressor it came from has no budget.
	if _, err := c.Decompress(nil, bomb); err != nil {
		t.Fatalf("without a budget: %v", err)
	}
	if err := c.Charge(bomb); err != nil {
		t.Fatalf("Charge without a budget: %v", err)
	}
}
