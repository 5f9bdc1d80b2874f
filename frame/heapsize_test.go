package frame

import (
	"runtime"
	"testing"
)

// TestHeapSizeTracksTheHeap: the estimate a frame cache counts stays
// within a factor of two of what decoded frames really hold, and counts
// what Apply's growth of a frame's slices adds.
func TestHeapSizeTracksTheHeap(t *testing.T) {
	if HeapSize(nil) != 0 {
		t.Fatalf("HeapSize(nil) = %d", HeapSize(nil))
	}
	g := newGen(testSeed(t))
	src := g.frame(40)
	enc := AppendFrame(nil, src)
	if got, min := HeapSize(src), EncodedFrameSize(src); got < min {
		t.Fatalf("HeapSize %d below the encoded size %d", got, min)
	}

	const n = 2000
	frames := make([]*Frame, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range frames {
		f, err := DecodeFrameOwned(append([]byte(nil), enc...))
		if err != nil {
			t.Fatal(err)
		}
		frames[i] = f
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := float64(after.HeapAlloc-before.HeapAlloc) / n
	est := float64(HeapSize(frames[0]))
	t.Logf("estimate %.0f held %.0f", est, held)
	if est < held/2 || est > held*2 {
		t.Fatalf("HeapSize %.0f B per decoded frame; the heap grew by %.0f B per frame", est, held)
	}

	// One message more: the slice of messages grows past its length.
	f := frames[0]
	was := HeapSize(f)
	if err := f.Apply(new(Delta).AppendMessage(Message{Role: RoleUser, Content: "one more"})); err != nil {
		t.Fatal(err)
	}
	grew := cap(f.Messages) - len(f.Messages) + 1 // the new array's room
	if got := HeapSize(f); grew > 1 && got < was+grew*80 {
		t.Fatalf("HeapSize %d after an append that grew the messages to cap %d (from %d at %d): want at least %d",
			got, cap(f.Messages), len(f.Messages)-1, was, was+grew*80)
	}
	runtime.KeepAlive(frames)
}
