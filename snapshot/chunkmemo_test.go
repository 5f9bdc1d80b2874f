package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// memoOf is the memo chunkMemos.chunk keeps after cutting raw at cuts.
func memoOf(raw []byte, cuts []int) *chunkMemo {
	refs, ends := chunkFrame(raw, cuts)
	return &chunkMemo{raw: bytes.Clone(raw), cuts: slices.Clone(cuts), ends: ends, refs: refs}
}

// checkAfter fails unless chunkFrameAfter gives chunkFrame's chunks.
func checkAfter(t *testing.T, what string, prev *chunkMemo, raw []byte, cuts []int) {
	t.Helper()
	wantRefs, wantEnds := chunkFrame(raw, cuts)
	refs, ends := chunkFrameAfter(prev, raw, cuts)
	if !slices.Equal(ends, wantEnds) || !slices.Equal(refs, wantRefs) {
		t.Fatalf("%s: %d bytes cut at %v after %d bytes cut at %v: ends %v, want %v (refs equal: %v)",
			what, len(raw), cuts, len(prev.raw), prev.cuts, ends, wantEnds, slices.Equal(refs, wantRefs))
	}
}

// lowEntropy is a frame of repeated short patterns: few content cuts, so
// chunks end at ChunkMaxSize.
func lowEntropy(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, 0, n)
	for len(b) < n {
		p := bytes.Repeat([]byte{byte(r.Uint32())}, 1+r.IntN(3))
		for range r.IntN(50000) {
			b = append(b, p...)
		}
	}
	return b[:n]
}

// TestChunkFrameAfter: whatever the earlier frame and however the new one
// differs from it (appended to, a byte changed, cut short, bytes inserted
// before or among the chunks, the messages' stretch moved, nothing in
// common), the chunks are chunkFrame's.
func TestChunkFrameAfter(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 36))
	for i := range 60 {
		n := r.IntN(1500 << 10)
		var prev []byte
		if i%3 == 0 {
			prev = lowEntropy(uint64(i), n)
		} else {
			prev = randomFrame(uint64(i), n)
		}
		var cuts []int
		if n > 0 && i%2 == 0 {
			a := r.IntN(n)
			cuts = []int{a, a + r.IntN(n-a+1)}
		}
		m := memoOf(prev, cuts)
		checkAfter(t, "the same", m, prev, cuts)
		// Appended to: in the last stretch, and, with cuts, in the
		// messages' (the frame's end moves with them).
		more := randomFrame(uint64(i)+1000, r.IntN(300<<10))
		checkAfter(t, "appended", m, append(bytes.Clone(prev), more...), cuts)
		if len(cuts) == 2 {
			c := cuts[1]
			grown := slices.Concat(prev[:c], more, prev[c:])
			checkAfter(t, "messages appended", m, grown, []int{cuts[0], c + len(more)})
			// A longer header moves the messages' stretch.
			ins := randomFrame(uint64(i)+2000, 1+r.IntN(100))
			moved := slices.Concat(prev[:cuts[0]], ins, prev[cuts[0]:])
			checkAfter(t, "stretch moved", m, moved, []int{cuts[0] + len(ins), c + len(ins)})
		}
		if n > 0 {
			changed := bytes.Clone(prev)
			changed[r.IntN(n)] ^= 1 + byte(r.IntN(255))
			checkAfter(t, "a byte changed", m, changed, cuts)
			// The last byte of a chunk, and the first of the next.
			e := m.ends[r.IntN(len(m.ends))]
			for _, at := range []int{e - 1, e} {
				if at < n {
					changed := bytes.Clone(prev)
					changed[at] ^= 0xff
					checkAfter(t, "a chunk's last or next byte changed", m, changed, cuts)
				}
			}
			short := prev[:r.IntN(n)]
			checkAfter(t, "cut short", m, short, cuts)
			at := r.IntN(n)
			checkAfter(t, "bytes inserted", m, slices.Concat(prev[:at], more[:min(len(more), 100)], prev[at:]), cuts)
		}
		checkAfter(t, "other cuts", m, prev, []int{r.IntN(n + 1)})
		checkAfter(t, "nothing in common", m, randomFrame(uint64(i)+3000, r.IntN(800<<10)), cuts)
		checkAfter(t, "from empty", memoOf(nil, nil), prev, cuts)
		checkAfter(t, "to empty", m, nil, nil)
	}
}

// TestChunkFrameAfterReuses: the chunks an appended frame repeats are
// taken from the memo, not cut and hashed again: a memo whose hashes are
// marked shows them in the result, for every chunk but each stretch's
// last, and the appended bytes' chunks are hashed afresh.
func TestChunkFrameAfterReuses(t *testing.T) {
	prev := randomFrame(1, 1<<20)
	cuts := []int{1000, 900 << 10}
	m := memoOf(prev, cuts)
	if len(m.ends) < 8 {
		t.Fatalf("a 1 MiB frame in %d chunks", len(m.ends))
	}
	for i := range m.refs {
		binary.BigEndian.PutUint32(m.refs[i].Hash[:], 0xfeedf00d)
		m.refs[i].Hash[4] = byte(i)
	}
	grown := slices.Concat(prev[:cuts[1]], randomFrame(2, 200<<10), prev[cuts[1]:])
	refs, ends := chunkFrameAfter(m, grown, []int{cuts[0], cuts[1] + 200<<10})
	_, wantEnds := chunkFrame(grown, []int{cuts[0], cuts[1] + 200<<10})
	if !slices.Equal(ends, wantEnds) {
		t.Fatalf("ends %v, want %v", ends, wantEnds)
	}
	reused := 0
	for i, e := range m.ends {
		last := e == cuts[0] || e == cuts[1] || e == len(prev)
		if e > cuts[1] {
			break // the stretch after the messages moved: nothing of it is taken
		}
		marked := binary.BigEndian.Uint32(refs[i].Hash[:]) == 0xfeedf00d && refs[i].Hash[4] == byte(i)
		if marked == last {
			t.Fatalf("chunk %d (end %d, its stretch's last: %v) taken from the memo: %v", i, e, last, marked)
		}
		if marked {
			reused++
		}
	}
	if reused < len(m.ends)-4 {
		t.Fatalf("%d of %d chunks taken from the memo", reused, len(m.ends))
	}
}

// TestChunkMemoBounds: the memo keeps a run's frame of chunkMemoMin bytes
// or more, at most chunkMemoMax bytes in all, forgets a deleted run's and
// everything at Close; and a snapshot put with a memo reads back.
func TestChunkMemoBounds(t *testing.T) {
	defer func(lo, hi int) { chunkMemoMin, chunkMemoMax = lo, hi }(chunkMemoMin, chunkMemoMax)
	chunkMemoMin, chunkMemoMax = 64<<10, 1<<20
	st := openMem(t, vfs.NewMem())
	held := func(run string) bool {
		st.memo.mu.Lock()
		defer st.memo.mu.Unlock()
		return st.memo.m[run] != nil
	}
	small := randomFrame(1, 10<<10)
	putCommit(t, st, plainSnapshot("small", 1, small))
	if held("small") {
		t.Fatal("a 10 KiB frame is kept")
	}
	f := randomFrame(2, 300<<10)
	putCommit(t, st, plainSnapshot("a", 1, f))
	if !held("a") {
		t.Fatal("a 300 KiB frame is not kept")
	}
	f2 := append(bytes.Clone(f), randomFrame(3, 50<<10)...)
	putCommit(t, st, plainSnapshot("a", 2, f2))
	mustRead(t, st, "a", 2, f2)
	mustRead(t, st, "a", 1, f)
	for i, run := range []string{"b", "c", "d", "e"} {
		putCommit(t, st, plainSnapshot(run, 1, randomFrame(uint64(10+i), 300<<10)))
		if !held(run) {
			t.Fatalf("run %q's frame is not kept", run)
		}
		st.memo.mu.Lock()
		n, sum := st.memo.bytes, 0
		for _, m := range st.memo.m {
			sum += m.size()
		}
		st.memo.mu.Unlock()
		if n != sum || n > chunkMemoMax {
			t.Fatalf("the memo counts %d bytes, holds %d, at most %d", n, sum, chunkMemoMax)
		}
	}
	if err := st.DeleteRun("e"); err != nil {
		t.Fatal(err)
	}
	if held("e") {
		t.Fatal("a deleted run's frame is kept")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st.memo.m != nil || st.memo.bytes != 0 {
		t.Fatalf("after Close the memo holds %d runs, %d bytes", len(st.memo.m), st.memo.bytes)
	}
}

// BenchmarkPutGrowingFrame: a run's snapshot of a frame of 1, 4 or 16 MiB
// that has grown by a quarter since its last snapshot, put and
// committed, with the memo of the last one (memo) and without (cut
// afresh: the memo bounded to nothing), in alternated rounds
// (-count). CPU per snapshot is the figure (the store is in memory).
func BenchmarkPutGrowingFrame(b *testing.B) {
	for _, mib := range []int{1, 4, 16} {
		base := randomFrame(uint64(mib), mib<<20)
		for _, memo := range []bool{true, false} {
			name := fmt.Sprintf("%dMiB/nomemo", mib)
			if memo {
				name = fmt.Sprintf("%dMiB/memo", mib)
			}
			b.Run(name, func(b *testing.B) {
				defer func(hi int) { chunkMemoMax = hi }(chunkMemoMax)
				if !memo {
					chunkMemoMax = 0
				}
				st, err := Open(b.TempDir(), &Options{FS: vfs.NewMem(), Logger: discardLogger()})
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				frames := make([][]byte, 2)
				for i := range frames {
					frames[i] = slices.Concat(base, randomFrame(uint64(100+i), growth(mib)))
				}
				put := func(seq uint64, f []byte) {
					bt := st.NewBatch()
					s := plainSnapshot("run", seq, f)
					s.Cuts = []int{100, len(f) - 200}
					if err := bt.PutSnapshot(s); err != nil {
						b.Fatal(err)
					}
					if err := bt.Commit(false); err != nil {
						b.Fatal(err)
					}
				}
				put(1, base)
				b.SetBytes(int64(len(base)))
				b.ResetTimer()
				for i := range b.N {
					put(uint64(i+2), frames[i%2])
				}
			})
		}
	}
}

// growth is what a frame of mib MiB grows by between two snapshots in the
// benchmark: the engine waits for a quarter of the frame
// (checkpoint.SnapshotDue).
func growth(mib int) int { return mib << 20 / 4 }
