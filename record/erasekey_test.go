package record

import (
	"errors"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/wal"
)

// TestEraseKeyMalformed: an erase-key record that breaks a rule of its
// format is corrupt, and says which rule.
func TestEraseKeyMalformed(t *testing.T) {
	h1, h2 := chain.Hash{1}, chain.Hash{2}
	note := func(seq uint64, head chain.Hash, final bool) []byte { return delNote("r1", seq, head, final) }
	for _, c := range []struct {
		name string
		raw  []byte
		want string
	}{
		{"no key nos", AppendEraseKey(nil, "r1", 4, h1, h2, 1, "k", nil, "why", note(4, h2, false)), "0 data keys"},
		{"nos not ascending", AppendEraseKey(nil, "r1", 4, h1, h2, 1, "k", []uint64{5, 5}, "why", note(4, h2, false)), "not ascending"},
		{"empty key", AppendEraseKey(nil, "r1", 4, h1, h2, 1, "", []uint64{5}, "why", note(4, h2, false)), "empty memory key"},
		{"final note", AppendEraseKey(nil, "r1", 4, h1, h2, 1, "k", []uint64{5}, "why", note(4, h2, true)), "not the erasure's"},
		{"note of another link", AppendEraseKey(nil, "r1", 4, h1, h2, 1, "k", []uint64{5}, "why", note(4, h1, false)), "not the erasure's"},
		{"note of another seq", AppendEraseKey(nil, "r1", 4, h1, h2, 1, "k", []uint64{5}, "why", note(3, h2, false)), "not the erasure's"},
		{"key too long", AppendEraseKey(nil, "r1", 4, h1, h2, 1, strings.Repeat("k", MaxMemoryKeyLen+1), []uint64{5}, "why", note(4, h2, false)), "memory key"},
		{"truncated", AppendEraseKey(nil, "r1", 4, h1, h2, 1, "k", []uint64{5}, "why", nil)[:60], ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r Record
			err := (&Decoder{}).Decode(c.raw, wal.Pos{Segment: 1}, "seg", &r)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("decode: %v, want a corruption saying %q", err, c.want)
			}
		})
	}
}
