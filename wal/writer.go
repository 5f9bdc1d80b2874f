package wal

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The writer: appends are queued to the one goroutine that owns the active
// segment (run), which writes everything pending with one write and one
// fdatasync (group commit), rotates full segments, and makes a write or
// sync failure sticky (I8). The package documentation's "Crash safety"
// says what each step guarantees.

// Waiter is the handle of an asynchronous append.
type Waiter struct {
	recs [][]byte
	span int64
	pos  []Pos
	err  error
	done chan struct{}
	// rec and at back recs and pos for an append of one record (Append):
	// the common case takes no allocation for either.
	rec [1][]byte
	at  [1]Pos
	// pooled marks an Append's own waiter, from appendWaiters: its done
	// has room for one signal, which finish sends instead of closing done,
	// and Append, its one reader, receives it and puts the waiter back.
	pooled bool
}

// appendWaiters recycles Append's waiters and their channels: two
// allocations fewer per record. A waiter goes back only after its signal
// was received (the owner and any writer are done with it); one whose
// Append stopped waiting (its ctx ended) is left to the collector.
var appendWaiters = sync.Pool{New: func() any {
	return &Waiter{done: make(chan struct{}, 1), pooled: true}
}}

// Wait blocks until the records are durable, the append failed, or ctx is
// done. A ctx that ends first returns ctx.Err() but does not cancel the
// append: the records may still become durable.
func (w *Waiter) Wait(ctx context.Context) ([]Pos, error) {
	select {
	case <-w.done:
		return w.pos, w.err
	default:
	}
	select {
	case <-w.done:
		return w.pos, w.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Done is closed when the append completed (durable or failed).
func (w *Waiter) Done() <-chan struct{} { return w.done }

func (w *Waiter) finish(err error) {
	if err != nil {
		w.pos = nil
	}
	w.err = err
	w.recs, w.rec[0] = nil, nil
	w.signal()
}

// signal completes w: closes done, or sends its one signal if pooled.
func (w *Waiter) signal() {
	if w.pooled {
		w.done <- struct{}{}
		return
	}
	close(w.done)
}

// setActive installs f as the new, empty active segment id of capacity
// size (owner or Open only).
func (l *Log) setActive(f vfs.File, id uint64, size int64) {
	l.w.f, l.w.seg, l.w.segID = f, id, segIDBytes(id)
	l.w.off, l.w.synced, l.w.cap = SegmentHeaderSize, SegmentHeaderSize, size
	l.w.spareAt = size / 2
	d := Pos{id, SegmentHeaderSize}
	l.durable.Store(&d)
	l.segs.Lock()
	l.segs.list = append(l.segs.list, SegmentInfo{ID: id, First: d, Size: size})
	l.segs.Unlock()
}

// maybePrepareSpare starts zero-filling the next segment (twice the active
// one's capacity, up to the segment size) in the background once the
// active one is half full (a resumed one: once half the room it had at
// Open is used) and no spare exists or is being made (owner only).
// Preparing it lazily keeps the zero-fill away from an Open and from the
// first commits after it.
func (l *Log) maybePrepareSpare() {
	if l.w.preparing || l.w.haveSpare || l.w.off < l.w.spareAt {
		return
	}
	l.w.preparing = true
	size := l.capFor(l.w.cap, 0)
	go func() {
		err := l.prepareSpare(size)
		if err != nil {
			l.stats.spareFailures.Add(1)
		}
		l.w.spare <- err
	}()
}

// AppendAsync enqueues recs as one all-or-nothing batch and returns at once.
// recs must not be modified until the Waiter is done.
func (l *Log) AppendAsync(recs ...[]byte) *Waiter {
	return l.enqueue(&Waiter{recs: recs, done: make(chan struct{})}, true)
}

// enqueue checks w's records and queues them, waking the owner goroutine
// if wake is set.
func (l *Log) enqueue(w *Waiter, wake bool) *Waiter {
	recs := w.recs
	if l.readOnly {
		w.finish(ErrReadOnly)
		return w
	}
	for i, r := range recs {
		if len(r) > MaxRecordSize {
			w.finish(fmt.Errorf("%w: record %d is %d bytes, the maximum is %d", ErrTooLarge, i, len(r), MaxRecordSize))
			return w
		}
		w.span += recordSpan(len(r))
	}
	if limit := l.segSize - SegmentHeaderSize - sealSpan; w.span > limit {
		w.finish(fmt.Errorf("%w: batch of %d records takes %d bytes, a segment holds %d", ErrTooLarge, len(recs), w.span, limit))
		return w
	}
	if len(recs) == 0 {
		w.pos = []Pos{}
		w.signal()
		return w
	}
	l.q.Lock()
	if l.q.closed {
		l.q.Unlock()
		w.finish(ErrClosed)
		return w
	}
	if err := l.q.err; err != nil {
		l.q.Unlock()
		w.finish(err)
		return w
	}
	l.q.pending = append(l.q.pending, w)
	l.q.Unlock()
	l.stats.appends.Add(1)
	if wake {
		l.signal()
	}
	return w
}

// signal tells the owner goroutine that something is pending.
func (l *Log) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Append writes one record and blocks until it is durable (or, with NoSync,
// written). ctx bounds the wait only: when ctx ends first the record may
// still become durable.
func (l *Log) Append(ctx context.Context, rec []byte) (Pos, error) {
	w := appendWaiters.Get().(*Waiter)
	w.rec[0] = rec
	w.recs = w.rec[:]
	// A caller whose wait cannot be cut short (ctx without Done, as the
	// engine's commit path passes) and that finds no group being written
	// writes the pending group itself, its record with it: the hand-off
	// to the owner goroutine and back, two goroutine wake-ups, is most of
	// what an append costs beyond its write. With a group being written
	// it leaves its record to the owner as any other append. Not with
	// MinSyncInterval, whose wait only the owner keeps. (A record that
	// enqueue refused leaves nothing pending: a writer then finds the
	// queue empty, or writes other appends' records.)
	lead := ctx.Done() == nil && l.minSync == 0
	l.enqueue(w, !lead)
	if lead {
		if l.wmu.TryLock() {
			// Whoever held wmu before either took w and completed it, or
			// left it pending: writePending writes it.
			l.writePending()
			l.wmu.Unlock()
		} else {
			l.signal()
		}
	}
	select {
	case <-w.done:
	default:
		select {
		case <-w.done:
		case <-ctx.Done():
			return Pos{}, ctx.Err() // w stays with the owner, not pooled again
		}
	}
	pos, err := w.at[0], w.err
	w.pos, w.err, w.span, w.at[0] = nil, nil, 0, Pos{}
	appendWaiters.Put(w)
	if err != nil {
		return Pos{}, err
	}
	return pos, nil
}

// AppendBatch writes recs as one batch, all or nothing across a crash, and
// blocks until it is durable. A batch never spans segments.
func (l *Log) AppendBatch(ctx context.Context, recs [][]byte) ([]Pos, error) {
	return l.AppendAsync(recs...).Wait(ctx)
}

// run is the owner goroutine: it writes what writers leave pending, and
// exits once the log is closed and nothing is pending (with wmu held, so
// that no Append is still writing).
func (l *Log) run() {
	defer close(l.ownerDone)
	for {
		<-l.wake
		if l.minSync > 0 {
			if d := time.Until(l.w.lastSync.Add(l.minSync)); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-l.closing:
					t.Stop()
				}
			}
		}
		l.wmu.Lock()
		if l.writePending() {
			l.q.Lock()
			empty := len(l.q.pending) == 0
			l.q.Unlock()
			if empty {
				l.wmu.Unlock()
				return
			}
			l.signal()
		}
		l.wmu.Unlock()
	}
}

// writePending takes every pending append and commits them as one group
// (wmu held). It reports whether the log is closed.
func (l *Log) writePending() (closed bool) {
	l.q.Lock()
	batch := l.q.pending
	closed = l.q.closed
	if len(batch) > 0 {
		// The last batch's array becomes the pending queue: never the
		// one just taken.
		l.q.pending = l.w.queue[:0]
	}
	l.q.Unlock()
	if len(batch) > 0 {
		l.commit(batch)
		clear(batch)
		l.w.queue = batch
	}
	return closed
}

func (l *Log) stickyErr() error {
	l.q.Lock()
	defer l.q.Unlock()
	return l.q.err
}

// fail records a sticky error (I8) and fails the given waiters with it.
func (l *Log) fail(err error, ws []*Waiter) {
	l.q.Lock()
	if l.q.err == nil {
		l.q.err = err
	} else {
		err = l.q.err
	}
	l.q.Unlock()
	for _, w := range ws {
		w.finish(err)
	}
}

// commit writes a group of pending appends with one write and one fdatasync
// per segment touched.
func (l *Log) commit(batch []*Waiter) {
	if err := l.stickyErr(); err != nil {
		l.fail(err, batch)
		return
	}
	buf := l.w.buf[:0]
	start := 0 // batch[start:i] are encoded in buf
	for i, w := range batch {
		if l.w.off+int64(len(buf))+w.span > l.w.cap-sealSpan {
			if len(buf) > 0 {
				if !l.flush(buf, batch[start:i]) {
					l.fail(l.stickyErr(), batch[i:])
					return
				}
				buf = buf[:0]
			}
			start = i
			if err := l.rotate(w.span); err != nil {
				l.fail(err, batch[i:])
				return
			}
		}
		if len(w.recs) == 1 {
			w.pos = w.at[:]
		} else {
			w.pos = make([]Pos, len(w.recs))
		}
		synced := uint32(l.w.synced)
		seed := segSeed(&l.w.segID)
		for j, r := range w.recs {
			w.pos[j] = Pos{l.w.seg, l.w.off + int64(len(buf))}
			typ := byte(recTypeMore)
			if j == len(w.recs)-1 {
				typ = recTypeLast
			}
			buf = appendRecordFrom(buf, seed, typ, synced, r)
		}
	}
	l.flush(buf, batch[start:])
	l.w.buf = buf[:0]
	l.maybePrepareSpare()
}

// flush writes buf at the active offset, syncs, publishes the new durable
// end and completes ws. It reports false after a (sticky) failure.
//
// Every write starts at the durable end (l.w.synced == l.w.off: Open and
// every flush leave it so), and none is larger than l.unsynced: a larger buf
// is written in pieces with an fdatasync after each, so that recovery finds
// every byte that was written but not made durable within l.unsynced of
// where its scan stops. The records keep the synced mark they were encoded
// with, which only understates what was durable.
func (l *Log) flush(buf []byte, ws []*Waiter) bool {
	mark := l.markSyncs()
	for rest := buf; len(rest) > 0; {
		n := int64(len(rest))
		if !l.noSync {
			n = min(n, l.unsynced)
		}
		if _, err := l.w.f.WriteAt(rest[:n], l.w.off); err != nil {
			l.fail(fmt.Errorf("wal: write segment %d (%s) at offset %d: %w", l.w.seg, l.path(segmentName(l.w.seg)), l.w.off, unwrapPathErr(err)), ws)
			return false
		}
		l.stats.writes.Add(1)
		l.stats.written.Add(n)
		l.w.off += n
		rest = rest[n:]
		if !l.noSync {
			if err := l.syncActive(); err != nil {
				l.fail(err, ws)
				return false
			}
		}
	}
	if l.replicate != nil {
		if err := l.replicateGroup(ws); err != nil {
			l.fail(err, ws)
			return false
		}
	}
	l.storeDurable(Pos{l.w.seg, l.w.off})
	var recs, bytes int64
	for _, w := range ws {
		recs += int64(len(w.recs))
		for _, r := range w.recs {
			bytes += int64(len(r))
		}
	}
	l.reportGroup(mark, len(ws), recs, bytes)
	// Counted before the appends return: a caller that reads Stats after
	// its append finds the append's records in it.
	l.stats.records.Add(recs)
	l.stats.bytes.Add(bytes)
	for _, w := range ws {
		w.finish(nil)
	}
	return true
}

// storeDurable publishes p as the durable end, from a block of Pos values
// (w.durables; wmu held).
func (l *Log) storeDurable(p Pos) {
	const block = 64
	if len(l.w.durables) == 0 {
		l.w.durables = make([]Pos, block)
	}
	d := &l.w.durables[0]
	l.w.durables = l.w.durables[1:]
	*d = p
	l.durable.Store(d)
}

// replicateGroup hands the records of ws, durable here, to
// Options.Replicate (owner only). Its error is final for the log (flush
// makes it sticky): the replica may hold records that the log cannot
// acknowledge, or lack records that are durable here.
func (l *Log) replicateGroup(ws []*Waiter) error {
	appends := make([][][]byte, len(ws))
	for i, w := range ws {
		appends[i] = w.recs
	}
	if err := l.replicate(appends); err != nil {
		return fmt.Errorf("wal: replicate a group of %d appends of segment %d (%s): %w", len(ws), l.w.seg, l.path(segmentName(l.w.seg)), err)
	}
	return nil
}

func (l *Log) syncActive() error {
	t0 := time.Now()
	err := l.w.f.SyncData()
	l.w.lastSync = time.Now()
	ns := l.w.lastSync.Sub(t0).Nanoseconds()
	l.stats.syncs.Add(1)
	l.stats.syncNanos.Add(ns)
	if ns > l.stats.maxSync.Load() {
		l.stats.maxSync.Store(ns)
	}
	if err != nil {
		return fmt.Errorf("wal: sync segment %d (%s): %w", l.w.seg, l.path(segmentName(l.w.seg)), unwrapPathErr(err))
	}
	l.w.synced = l.w.off
	return nil
}

// rotate seals the active segment and activates the next one, with room
// for a batch spanning need bytes.
func (l *Log) rotate(need int64) error {
	seal := appendRecord(nil, l.w.segID, recTypeSeal, uint32(l.w.synced), nil)
	if _, err := l.w.f.WriteAt(seal, l.w.off); err != nil {
		return fmt.Errorf("wal: seal segment %d (%s) at offset %d: %w", l.w.seg, l.path(segmentName(l.w.seg)), l.w.off, unwrapPathErr(err))
	}
	l.stats.written.Add(int64(len(seal)))
	sealAt := l.w.off
	l.w.off += int64(len(seal))
	if err := l.syncActive(); err != nil {
		return err
	}
	if err := l.w.f.Close(); err != nil {
		return fmt.Errorf("wal: close segment %d (%s): %w", l.w.seg, l.path(segmentName(l.w.seg)), unwrapPathErr(err))
	}
	l.w.f = nil
	if l.w.preparing {
		err := <-l.w.spare
		if err != nil {
			l.logger.Error("wal: preparing a spare segment failed; creating one on demand", "err", err)
		}
		l.w.preparing = false
		l.w.haveSpare = err == nil
	}
	size := l.capFor(l.w.cap, need)
	useSpare := false
	if l.w.haveSpare {
		// A spare too small for this batch stays for a later rotation.
		n, ok := l.spareSize()
		l.w.haveSpare = ok
		if useSpare = ok && n >= SegmentHeaderSize+need+sealSpan; useSpare {
			size = n
		}
	}
	next := l.w.seg + 1
	f, err := l.activate(next, size, useSpare, false)
	if err != nil {
		// Readers may still stop at the seal; nothing was acknowledged past it.
		d := Pos{l.w.seg, sealAt}
		l.durable.Store(&d)
		return err
	}
	l.segs.Lock()
	l.segs.list[len(l.segs.list)-1].Sealed = true
	l.segs.Unlock()
	l.stats.rotations.Add(1)
	if useSpare {
		l.w.haveSpare = false
	}
	l.setActive(f, next, size)
	return nil
}
