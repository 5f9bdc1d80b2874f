package snapshot

// The chunking of each run's last plain snapshot, kept so that the next
// snapshot of the run cuts and hashes only what changed.
//
// A snapshot of a plain frame is cut into content-defined chunks
// (ChunkBoundariesAt) and each chunk is hashed (ChunkHash), over the whole
// frame, every time: for a run whose frame grows (an agent's messages,
// appended to), each snapshot cut and hashed again the same chunks as the
// one before, and the cost of a snapshot grew with the run. A cut depends
// only on the bytes from its chunk's start to the cut, so a chunk of the
// last snapshot that the new frame repeats byte for byte from its
// stretch's start is cut the same; chunkFrameAfter takes its end and hash
// from the memo and cuts and hashes only the rest. Comparing the bytes
// costs a memcmp, a small part of cutting and hashing them; the result is
// chunkFrame's, exactly (TestChunkFrameAfter, FuzzChunkFrameAfter), so the
// memo changes no byte the store writes.

import (
	"bytes"
	"sync"
)

// The memo's bounds: frames shorter than chunkMemoMin are cut afresh (a
// few chunks; cutting them costs little), and the memo holds at most
// chunkMemoMax bytes of frames, dropping other runs' to take a new one.
// Variables for the tests.
var (
	chunkMemoMin = 64 << 10
	chunkMemoMax = 32 << 20
)

// chunkMemo is the chunking of a run's last plain snapshot: its frame (the
// caller's bytes, not a copy), the cuts it was put with, and chunkFrame's
// result for them.
type chunkMemo struct {
	raw  []byte
	cuts []int
	ends []int
	refs []ChunkRef
}

// size is what m holds in memory, about.
func (m *chunkMemo) size() int { return len(m.raw) + 8*(cap(m.cuts)+cap(m.ends)) + 40*cap(m.refs) }

// chunkMemos holds each run's chunkMemo (Store.memo).
type chunkMemos struct {
	mu    sync.Mutex
	m     map[string]*chunkMemo
	bytes int // the sizes of m's memos
}

// chunk returns chunkFrame(raw, cuts), computed after the run's memo if it
// has one, and keeps the result as the run's memo. The memo is taken out
// while it is used: a concurrent put of the same run cuts afresh.
func (c *chunkMemos) chunk(run string, raw []byte, cuts []int) (refs []ChunkRef, ends []int) {
	m := c.take(run)
	if m != nil {
		refs, ends = chunkFrameAfter(m, raw, cuts)
	} else {
		refs, ends = chunkFrame(raw, cuts)
	}
	if len(raw) < chunkMemoMin || len(raw) > chunkMemoMax {
		return refs, ends
	}
	if m == nil {
		m = &chunkMemo{}
	}
	// raw is the caller's, kept without a copy (PutSnapshot's contract:
	// the frame is not changed after); refs and ends are returned, and
	// the caller keeps refs (Batch's puts): the memo keeps its own copies.
	m.raw = raw
	m.cuts = append(m.cuts[:0], cuts...)
	m.ends = append(m.ends[:0], ends...)
	m.refs = append(m.refs[:0], refs...)
	c.keep(run, m)
	return refs, ends
}

func (c *chunkMemos) take(run string) *chunkMemo {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.m[run]
	if m != nil {
		delete(c.m, run)
		c.bytes -= m.size()
	}
	return m
}

// keep makes m run's memo, dropping others' (in map order) past
// chunkMemoMax.
func (c *chunkMemos) keep(run string, m *chunkMemo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[run]; old != nil {
		c.bytes -= old.size() // a concurrent put of the run kept one
	}
	for id, o := range c.m {
		if c.bytes+m.size() <= chunkMemoMax {
			break
		}
		delete(c.m, id)
		c.bytes -= o.size()
	}
	if c.m == nil {
		c.m = map[string]*chunkMemo{}
	}
	c.m[run] = m
	c.bytes += m.size()
}

// drop forgets run's memo (its snapshots are deleted).
func (c *chunkMemos) drop(run string) { c.take(run) }

// clear forgets every memo (Close).
func (c *chunkMemos) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m, c.bytes = nil, 0
}

// chunkFrameAfter returns chunkFrame(raw, cuts) given prev, the chunking
// of an earlier frame. Stretch by stretch (the bytes between two cuts
// ChunkBoundariesAt takes, cut on their own), a chunk of prev's stretch
// of the same index is taken as it is when raw's stretch repeats prev's,
// byte for byte, from the stretch's start to the chunk's end, and the
// chunk was not cut by the end of prev's stretch: then cutPoint, which
// reads only the bytes from the chunk's start to its cut, cuts it the
// same (a stretch of raw that ends there too ends the chunk there anyway). The rest of each stretch is cut and hashed as chunkFrame does.
func chunkFrameAfter(prev *chunkMemo, raw []byte, cuts []int) (refs []ChunkRef, ends []int) {
	pst := stretchEnds(len(prev.raw), prev.cuts)
	j := 0 // prev's first chunk of the stretch
	pstart, start := 0, 0
	for k, end := range stretchEnds(len(raw), cuts) {
		pos := start
		if k < len(pst) {
			pend := pst[k]
			same := start + commonPrefix(raw[start:end], prev.raw[pstart:pend])
			for ; j < len(prev.ends) && prev.ends[j] < pend; j++ {
				e := prev.ends[j] - pstart + start
				if e > same {
					break
				}
				refs = append(refs, prev.refs[j])
				ends = append(ends, e)
				pos = e
			}
			for j < len(prev.ends) && prev.ends[j] <= pend {
				j++
			}
			pstart = pend
		}
		for pos < end {
			n := cutPoint(raw[pos:end])
			refs = append(refs, ChunkRef{Hash: ChunkHash(raw[pos : pos+n]), Len: n})
			pos += n
			ends = append(ends, pos)
		}
		start = end
	}
	return refs, ends
}

// stretchEnds returns the ends of the stretches ChunkBoundariesAt cuts a
// frame of n bytes into at cuts: each cut after the one before and within
// the frame, then n.
func stretchEnds(n int, cuts []int) []int {
	var out []int
	start := 0
	for i := 0; i <= len(cuts); i++ {
		c := n
		if i < len(cuts) {
			c = cuts[i]
		}
		if c <= start || c > n {
			continue
		}
		out = append(out, c)
		start = c
	}
	return out
}

// commonPrefix returns how many bytes a and b share at their start.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	const block = 4 << 10
	i := 0
	for ; i+block <= n && bytes.Equal(a[i:i+block], b[i:i+block]); i += block {
	}
	for ; i < n && a[i] == b[i]; i++ {
	}
	return i
}
