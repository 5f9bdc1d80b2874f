package wireframe

import (
	"io"
	"sync"
	"time"
)

// Writer writes frames to a connection, one write per burst: frames
// queued while a write is under way go out together in the next one. The
// goroutine that queues a frame on an idle Writer writes it at once (no
// timer) and then every frame queued meanwhile, so that a burst of answers
// or requests costs one system call rather than one each.
type Writer struct {
	w io.Writer
	// timeout is each write's deadline when w takes one (0: none).
	timeout time.Duration
	// written, if set, is told how many frames each write carried, after
	// it (the server releases their requests' slots).
	written func(frames int)

	mu struct {
		sync.Mutex
		buf   []byte // frames queued, not yet handed to w.Write
		k     int    // how many frames buf holds
		spare []byte // the buffer of the last write, reused
		// dones holds the done funcs of FrameThen's frames in buf (nil
		// when buf holds none); spareDones is the last write's, reused.
		dones, spareDones []func()
		busy              bool  // a goroutine is writing; it writes buf too before it returns
		err               error // sticky: the first write that failed
	}
}

// NewWriter returns a Writer to w; written may be nil.
func NewWriter(w io.Writer, timeout time.Duration, written func(frames int)) *Writer {
	return &Writer{w: w, timeout: timeout, written: written}
}

// Raw queues p as it is (the preface).
func (w *Writer) Raw(p []byte) error {
	w.mu.Lock()
	w.mu.buf = append(w.mu.buf, p...)
	return w.flushLocked(0)
}

// Frame queues the frame of id with head and body, and writes it unless
// another goroutine is writing (which then writes it next). It returns
// the error of the write that carried the frame when it was this call's,
// else the Writer's sticky error at the time of the call.
func (w *Writer) Frame(id uint32, head, body []byte) error {
	return w.FrameThen(id, head, body, nil)
}

// FrameThen is Frame, and calls done (when not nil) once the frame is
// written, or once it is dropped by a write that failed: when no byte of
// it is held any more.
func (w *Writer) FrameThen(id uint32, head, body []byte, done func()) error {
	w.mu.Lock()
	w.mu.buf = AppendFrame(w.mu.buf, id, head, body)
	if done != nil {
		w.mu.dones = append(w.mu.dones, done)
	}
	return w.flushLocked(1)
}

// finished calls the done funcs of frames written or dropped and gives
// their slice back for reuse (w.mu not held).
func (w *Writer) finished(dones []func()) {
	if len(dones) == 0 {
		return
	}
	for i, f := range dones {
		f()
		dones[i] = nil
	}
	w.mu.Lock()
	w.mu.spareDones = dones[:0]
	w.mu.Unlock()
}

type deadliner interface{ SetWriteDeadline(time.Time) error }

// flushLocked counts the k frames just queued and, unless another
// goroutine writes, writes until nothing is queued. It unlocks w.mu.
func (w *Writer) flushLocked(k int) error {
	w.mu.k += k
	if err := w.mu.err; err != nil {
		n, dones := w.mu.k, w.mu.dones
		w.mu.buf, w.mu.k, w.mu.dones = w.mu.buf[:0], 0, nil
		w.mu.Unlock()
		if w.written != nil && n > 0 {
			w.written(n) // frames never written: their slots are freed all the same
		}
		w.finished(dones)
		return err
	}
	if w.mu.busy {
		w.mu.Unlock()
		return nil
	}
	w.mu.busy = true
	for {
		out, n, dones := w.mu.buf, w.mu.k, w.mu.dones
		w.mu.buf, w.mu.k, w.mu.dones = w.mu.spare[:0], 0, w.mu.spareDones
		w.mu.spareDones = nil
		w.mu.Unlock()
		if d, ok := w.w.(deadliner); ok && w.timeout > 0 {
			d.SetWriteDeadline(time.Now().Add(w.timeout))
		}
		_, err := w.w.Write(out)
		if w.written != nil && n > 0 {
			w.written(n)
		}
		w.finished(dones)
		w.mu.Lock()
		if cap(out) <= 1<<20 { // a large burst's buffer is not kept
			w.mu.spare = out[:0]
		} else {
			w.mu.spare = nil
		}
		if err != nil && w.mu.err == nil {
			w.mu.err = err
		}
		if len(w.mu.buf) == 0 || w.mu.err != nil {
			if w.mu.err != nil && w.mu.k > 0 {
				n, dones := w.mu.k, w.mu.dones
				w.mu.buf, w.mu.k, w.mu.dones = w.mu.buf[:0], 0, nil
				w.mu.busy = false
				w.mu.Unlock()
				if w.written != nil {
					w.written(n) // frames never written: their slots are freed all the same
				}
				w.finished(dones)
				return err
			}
			w.mu.busy = false
			w.mu.Unlock()
			return err
		}
	}
}
