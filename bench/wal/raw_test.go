package walbench

import (
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// raw is the minimal group-commit loop the wal is measured against: one
// goroutine takes everything pending, writes it with one pwrite into a
// zero-filled file and calls fdatasync once, then wakes the writers. No
// framing, no checksums, no segments.
type raw struct {
	f     *os.File
	mu    sync.Mutex
	queue []*rawReq // pending writes, taken whole by the loop
	wake  chan struct{}
	done  chan struct{}
	off   int64
	size  int64
	syncs atomic.Int64
}

type rawReq struct {
	rec  []byte
	err  error
	done chan struct{}
}

func openRaw(dir string, size int64) (*raw, error) {
	f, err := os.OpenFile(dir+"/raw.log", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	// Filled 64 KiB at a time, as the wal's segments are: each later
	// small write into a file filled 1 MiB at a time costs 2.5x the CPU
	// (BenchmarkOverwriteZeroFilled).
	zeros := make([]byte, 64<<10)
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if _, err := f.Write(zeros); err != nil {
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	r := &raw{f: f, wake: make(chan struct{}, 1), done: make(chan struct{}), size: size}
	go r.loop()
	return r, nil
}

func (r *raw) Append(rec []byte) error {
	q := &rawReq{rec: rec, done: make(chan struct{})}
	r.mu.Lock()
	r.queue = append(r.queue, q)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	<-q.done
	return q.err
}

func (r *raw) loop() {
	var buf []byte
	for {
		select {
		case <-r.wake:
		case <-r.done:
			return
		}
		r.mu.Lock()
		batch := r.queue
		r.queue = nil
		r.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		buf = buf[:0]
		for _, q := range batch {
			buf = append(buf, q.rec...)
		}
		if r.off+int64(len(buf)) > r.size {
			r.off = 0 // wrap: the file stays zero-filled-then-overwritten
		}
		_, err := r.f.WriteAt(buf, r.off)
		if err == nil {
			err = syscall.Fdatasync(int(r.f.Fd()))
			r.syncs.Add(1)
		}
		r.off += int64(len(buf))
		for _, q := range batch {
			q.err = err
			close(q.done)
		}
	}
}

func (r *raw) Syncs() int64 { return r.syncs.Load() }

func (r *raw) Close() error {
	close(r.done)
	return r.f.Close()
}
