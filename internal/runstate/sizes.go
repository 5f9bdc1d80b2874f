package runstate

import "github.com/continuumdb/continuum/frame"

// Sizes keeps two measures of a run's frame that cost a walk of the whole
// frame to take: its encoded size (frame.EncodedFrameSize, the bound the
// commit path checks a delta against) and its heap (frame.HeapSize, what
// the frame cache counts). Each is valid while the frame it was taken of
// is the run's frame and the run's last seq the one it was taken at; it is
// taken again otherwise. The engine holds one by value under the run's
// lock, and calls its methods with that lock held.
type Sizes struct {
	bound      int64
	boundFrame *frame.Frame
	boundSeq   uint64
	heap       int64
	heapFrame  *frame.Frame
	heapSeq    uint64
}

// Encoded is the encoded size of f, the run's frame at seq: measured
// again only once the frame or its seq changed since it last was (or was
// noted, NoteEncoded).
func (s *Sizes) Encoded(f *frame.Frame, seq uint64) int64 {
	if s.boundFrame != f || s.boundSeq != seq {
		s.bound = int64(frame.EncodedFrameSize(f))
		s.boundFrame, s.boundSeq = f, seq
	}
	return s.bound
}

// NoteEncoded records bound, the encoded size of f at seq, which the
// caller knows without measuring it (an atom's commit computed it).
func (s *Sizes) NoteEncoded(bound int64, f *frame.Frame, seq uint64) {
	s.bound, s.boundFrame, s.boundSeq = bound, f, seq
}

// Heap is the heap f, the run's frame at seq, holds (frame.HeapSize):
// measured again only once the frame or its seq changed since it last was.
func (s *Sizes) Heap(f *frame.Frame, seq uint64) int64 {
	if s.heapFrame != f || s.heapSeq != seq {
		s.heap = int64(frame.HeapSize(f))
		s.heapFrame, s.heapSeq = f, seq
	}
	return s.heap
}

// Drop lets go of the frame the measures were taken of, as the run drops
// it from memory: the next of each measures again.
func (s *Sizes) Drop() { s.boundFrame, s.heapFrame = nil, nil }
