package runstate

import (
	"testing"

	"github.com/continuumdb/continuum/frame"
)

func TestSizes(t *testing.T) {
	f := &frame.Frame{Memory: map[string][]byte{"k": []byte("value")}}
	var s Sizes
	enc, heap := int64(frame.EncodedFrameSize(f)), int64(frame.HeapSize(f))
	if got := s.Encoded(f, 1); got != enc {
		t.Fatalf("Encoded = %d, want %d", got, enc)
	}
	if got := s.Heap(f, 1); got != heap {
		t.Fatalf("Heap = %d, want %d", got, heap)
	}

	// Changed in place at the same seq: the measures are kept (the frame
	// of a run changes only with its seq).
	f.Memory["k2"] = make([]byte, 1000)
	if s.Encoded(f, 1) != enc || s.Heap(f, 1) != heap {
		t.Fatal("measured again at the same frame and seq")
	}
	// At the next seq, both are measured again.
	if got, want := s.Encoded(f, 2), int64(frame.EncodedFrameSize(f)); got != want {
		t.Fatalf("Encoded at seq 2 = %d, want %d", got, want)
	}
	if got, want := s.Heap(f, 2), int64(frame.HeapSize(f)); got != want {
		t.Fatalf("Heap at seq 2 = %d, want %d", got, want)
	}

	// A noted size is taken as it is.
	s.NoteEncoded(12345, f, 3)
	if got := s.Encoded(f, 3); got != 12345 {
		t.Fatalf("Encoded after NoteEncoded = %d", got)
	}
	// Another frame at the same seq: measured again.
	g := &frame.Frame{Memory: map[string][]byte{}}
	if got, want := s.Encoded(g, 3), int64(frame.EncodedFrameSize(g)); got != want {
		t.Fatalf("Encoded of another frame = %d, want %d", got, want)
	}

	// Drop lets go of the frames: nothing of f is kept.
	s.Drop()
	if s.boundFrame != nil || s.heapFrame != nil {
		t.Fatal("Drop kept a frame")
	}
	if got, want := s.Heap(f, 2), int64(frame.HeapSize(f)); got != want {
		t.Fatalf("Heap after Drop = %d, want %d", got, want)
	}
}
