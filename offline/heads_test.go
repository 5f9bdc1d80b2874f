package offline

import (
	"encoding/binary"
	"testing"

	"github.com/continuumdb/continuum/chain"
)

// TestHeadList: heads pushed across several chunks read back in order.
func TestHeadList(t *testing.T) {
	var l headList
	h := func(i uint64) (x chain.Hash) {
		binary.BigEndian.PutUint64(x[:], i+1)
		return x
	}
	const n = 3*headChunk + 17
	for i := range uint64(n) {
		l.push(h(i))
		if l.len() != i+1 || l.at(i) != h(i) {
			t.Fatalf("after push %d: len %d, at(%d) %x", i, l.len(), i, l.at(i))
		}
	}
	for i := range uint64(n) {
		if l.at(i) != h(i) {
			t.Fatalf("at(%d) = %x, want %x", i, l.at(i), h(i))
		}
	}
	if len(l.chunks) != 4 || cap(l.chunks[1]) != headChunk {
		t.Errorf("%d chunks (cap of the second %d), want 4 of %d", len(l.chunks), cap(l.chunks[1]), headChunk)
	}
}
