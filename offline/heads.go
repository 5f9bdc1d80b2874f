package offline

import "github.com/continuumdb/continuum/chain"

// headList holds a run's stored heads in seq order: what verify looks up
// by seq (a fork's point, a deletion's final head, an erase-key record's
// head, a rollback's target). It grows by chunks of headChunk, not by
// doubling one slice: one slice for a run of a million atoms is 32 MB
// copied at each doubling (2% of verify's CPU on a store of long runs).
// The first chunk grows as a slice does, so that a short run holds only
// what it needs.
type headList struct {
	chunks [][]chain.Hash
	n      uint64
}

const headChunk = 4096

// len is the number of heads held.
func (l *headList) len() uint64 { return l.n }

// at returns head i (0 ≤ i < len).
func (l *headList) at(i uint64) chain.Hash { return l.chunks[i/headChunk][i%headChunk] }

// push appends h.
func (l *headList) push(h chain.Hash) {
	k := l.n / headChunk
	if k == uint64(len(l.chunks)) {
		var c []chain.Hash
		if k > 0 {
			c = make([]chain.Hash, 0, headChunk)
		}
		l.chunks = append(l.chunks, c)
	}
	l.chunks[k] = append(l.chunks[k], h)
	l.n++
}
