package stream

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Status is how an attempt of an atom ended, as the log says so far.
type Status uint8

// The statuses of an attempt.
const (
	Open      Status = 1 // running, or stopped and not yet known to have failed
	Committed Status = 2 // the atom record of this attempt is in the log
	Failed    Status = 3 // a fail record of the atom follows this attempt
	Abandoned Status = 4 // a later attempt of the same seq ran, or the run ended: it did not commit
)

func (s Status) String() string {
	switch s {
	case Open:
		return "open"
	case Committed:
		return "committed"
	case Failed:
		return "failed"
	case Abandoned:
		return "abandoned"
	}
	return fmt.Sprintf("status-%d", uint8(s))
}

// Source is what the Index reads of the log (doc.go).
type Source interface {
	Scan(fn func(*record.Record) error) (wal.Pos, error)
	Data(pos wal.Pos) ([]byte, error)
}

// Chunk is one chunk of a stream.
type Chunk struct {
	Offset  uint64
	Seq     uint64 // the atom that appended it
	Attempt uint64 // that atom's attempt, from 1
	Status  Status // the attempt's, when read
	Data    []byte // the caller's
}

// Batch is what one Read returns.
type Batch struct {
	Chunks []Chunk
	// Next is the offset to read from next: the offset after the last
	// chunk returned, or from if there was none.
	Next uint64
	// Ended says the stream will never grow: the run ended, and Next is
	// past its last chunk (also when the batch holds the last chunks).
	Ended bool
	// Wake, when Chunks is empty and Ended false, is closed when the
	// stream may have grown or a status moved: read again.
	Wake <-chan struct{}
}

// Info describes one stream of a run.
type Info struct {
	Name   string
	Chunks uint64 // durable chunks: the next offset a reader waits for
}

// ErrStopped is what Wait returns when its stop channel is closed.
var ErrStopped = errors.New("stream: stopped")

// Index is the streams of a store's runs (doc.go).
type Index struct {
	src Source

	mu struct {
		sync.Mutex
		loaded  bool
		err     error   // a load failure, sticky
		through wal.Pos // the log position the load scan read up to: events at or after it are new
		runs    map[string]*runState
		// born is closed, and replaced, when a run gets its first chunk:
		// what a reader of a run without one waits for.
		born chan struct{}
	}
}

// runState is one run's streams and attempts; guarded by Index.mu.
type runState struct {
	streams map[string]*streamState
	// seqs holds the attempts of the seqs that have chunks: status[i] is
	// attempt i+1's (Status 0: that attempt appended no chunk).
	seqs  map[uint64][]Status
	ended bool
	// wake is closed, and replaced, on every change a reader may wait for:
	// a chunk appended, a status moved, the run's end.
	wake chan struct{}
}

type streamState struct {
	entries []entry
	// visible counts the entries from the first whose append completed:
	// they, and only they, are read.
	visible int
}

// entry is one chunk: where it is in the log once durable, and until then
// the append's Waiter (nil once visible).
type entry struct {
	seq, attempt uint64
	pos          wal.Pos
	w            *wal.Waiter
}

// New returns an Index over src, not loaded.
func New(src Source) *Index {
	x := &Index{src: src}
	x.mu.runs = map[string]*runState{}
	x.mu.born = make(chan struct{})
	return x
}

// Load builds the index from the log, once; a failure is sticky.
func (x *Index) Load() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.loadLocked()
}

func (x *Index) loadLocked() error {
	if x.mu.loaded {
		return x.mu.err
	}
	x.mu.loaded = true
	through, err := x.src.Scan(func(r *record.Record) error {
		if why := x.applyLocked(r); why != "" {
			return &record.CorruptionError{Offset: r.Pos.Offset, Run: r.Run, Seq: r.Seq, Reason: fmt.Sprintf("%v: %s", r.Pos, why)}
		}
		return nil
	})
	if err != nil {
		x.mu.runs = map[string]*runState{}
		x.mu.err = fmt.Errorf("stream: load the streams from the log: %w", err)
		return x.mu.err
	}
	x.mu.through = through
	return nil
}

// applyLocked applies one record of the log, in order (the load's scan).
func (x *Index) applyLocked(r *record.Record) string {
	switch r.Kind {
	case record.KindStreamChunk:
		rs := x.runLocked(r.Run)
		st := rs.streamLocked(r.Stream)
		if r.Offset != uint64(len(st.entries)) {
			return fmt.Sprintf("chunk at offset %d of stream %q, the stream has %d before it", r.Offset, r.Stream, len(st.entries))
		}
		rs.attemptLocked(r.Seq, r.Attempt)
		st.entries = append(st.entries, entry{seq: r.Seq, attempt: r.Attempt, pos: r.Pos})
		st.visible = len(st.entries)
	case record.KindStreamAbandon:
		if rs := x.mu.runs[r.Run]; rs != nil {
			rs.settleLocked(r.Seq, r.Attempt, Abandoned)
		}
	case record.KindAtom:
		if rs := x.mu.runs[r.Run]; rs != nil {
			rs.commitLocked(r.Seq, 0)
		}
	case record.KindFail:
		if rs := x.mu.runs[r.Run]; rs != nil {
			rs.settleLocked(r.Seq, 0, Failed)
		}
	case record.KindEnd:
		if rs := x.mu.runs[r.Run]; rs != nil {
			rs.endLocked()
		}
	case record.KindDelete, record.KindErase:
		x.deleteLocked(r.Run)
	}
	return ""
}

func (x *Index) runLocked(run string) *runState {
	rs := x.mu.runs[run]
	if rs == nil {
		rs = &runState{streams: map[string]*streamState{}, seqs: map[uint64][]Status{}, wake: make(chan struct{})}
		x.mu.runs[run] = rs
		close(x.mu.born)
		x.mu.born = make(chan struct{})
	}
	return rs
}

func (rs *runState) streamLocked(name string) *streamState {
	st := rs.streams[name]
	if st == nil {
		st = &streamState{}
		rs.streams[name] = st
	}
	return st
}

// wakeLocked wakes the run's readers.
func (rs *runState) wakeLocked() {
	close(rs.wake)
	rs.wake = make(chan struct{})
}

// attemptLocked notes a chunk of attempt a of seq: a later attempt
// abandons the open earlier ones.
func (rs *runState) attemptLocked(seq, a uint64) {
	st := rs.seqs[seq]
	for i := range st {
		if uint64(i+1) < a && st[i] == Open {
			st[i] = Abandoned
		}
	}
	for uint64(len(st)) < a {
		st = append(st, 0)
	}
	if st[a-1] == 0 {
		st[a-1] = Open
	}
	rs.seqs[seq] = st
}

// settleLocked moves the open attempts of seq up to upTo (0: all) to s.
func (rs *runState) settleLocked(seq, upTo uint64, s Status) {
	st := rs.seqs[seq]
	moved := false
	for i := range st {
		if st[i] == Open && (upTo == 0 || uint64(i+1) <= upTo) {
			st[i], moved = s, true
		}
	}
	if moved {
		rs.wakeLocked()
	}
}

// commitLocked marks the atom at seq committed by attempt a (0: the last
// attempt that appended, if it is still open; the others abandoned).
func (rs *runState) commitLocked(seq, a uint64) {
	st := rs.seqs[seq]
	if len(st) == 0 {
		return
	}
	if a == 0 {
		a = uint64(len(st))
	}
	for i := range st {
		switch {
		case st[i] != Open:
		case uint64(i+1) == a:
			st[i] = Committed
		default:
			st[i] = Abandoned
		}
	}
	rs.wakeLocked()
}

func (rs *runState) endLocked() {
	for _, st := range rs.seqs {
		for i := range st {
			if st[i] == Open {
				st[i] = Abandoned
			}
		}
	}
	rs.ended = true
	rs.wakeLocked()
}

func (x *Index) deleteLocked(run string) {
	if rs := x.mu.runs[run]; rs != nil {
		delete(x.mu.runs, run)
		rs.wakeLocked()
	}
}

// NextAttempt returns the attempt number of the atom of run at seq that
// appends its first chunk now: one past the last attempt of seq that
// appended any.
func (x *Index) NextAttempt(run string, seq uint64) (uint64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.loadLocked(); err != nil {
		return 0, err
	}
	if rs := x.mu.runs[run]; rs != nil {
		return uint64(len(rs.seqs[seq])) + 1, nil
	}
	return 1, nil
}

// Append assigns the next offset of stream name of run to a chunk of
// attempt a of the atom at seq and calls write with it, under the Index's
// lock, so that offsets follow the log's order: write encodes the record
// and enqueues it (wal.Log.AppendAsync), and returns its Waiter. The
// chunk is read once the Waiter is done without error.
func (x *Index) Append(run, name string, seq, a uint64, write func(offset uint64) (*wal.Waiter, error)) (uint64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.loadLocked(); err != nil {
		return 0, err
	}
	rs := x.runLocked(run)
	st := rs.streamLocked(name)
	off := uint64(len(st.entries))
	w, err := write(off)
	if err != nil {
		if len(st.entries) == 0 {
			delete(rs.streams, name)
		}
		return 0, err
	}
	rs.attemptLocked(seq, a)
	st.entries = append(st.entries, entry{seq: seq, attempt: a, w: w})
	rs.wakeLocked()
	return off, nil
}

// Abandoning says whether the atom of run at seq, about to commit without
// having appended a chunk, must first write an abandon record, and up to
// which attempt: when an earlier attempt of seq appended chunks and is
// still open (it crashed). It loads the index if it must.
func (x *Index) Abandoning(run string, seq uint64) (uint64, bool, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.loadLocked(); err != nil {
		return 0, false, err
	}
	rs := x.mu.runs[run]
	if rs == nil {
		return 0, false, nil
	}
	st := rs.seqs[seq]
	for i := range st {
		if st[i] == Open {
			return uint64(len(st)), true, nil
		}
	}
	return 0, false, nil
}

// LastWaiter returns the Waiter of the last chunk appended to stream name
// of run if it is not durable yet, else nil.
func (x *Index) LastWaiter(run, name string) *wal.Waiter {
	x.mu.Lock()
	defer x.mu.Unlock()
	if rs := x.mu.runs[run]; rs != nil {
		if st := rs.streams[name]; st != nil && len(st.entries) > 0 {
			return st.entries[len(st.entries)-1].w
		}
	}
	return nil
}

// Abandoned applies an abandon record of attempts up to a of seq.
func (x *Index) Abandoned(run string, seq, a uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if rs := x.mu.runs[run]; rs != nil && x.mu.loaded {
		rs.settleLocked(seq, a, Abandoned)
	}
}

// Committed applies the atom of run at seq, committed by attempt a (0:
// it appended no chunk), whose record is durable at pos.
func (x *Index) Committed(run string, seq, a uint64, pos wal.Pos) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.mu.loaded || pos.Less(x.mu.through) {
		return // the load reads it, or read it
	}
	rs := x.mu.runs[run]
	if rs == nil {
		return
	}
	if a == 0 {
		// Appended nothing: its earlier attempts were abandoned (the
		// abandon record, or a fail record, says so before it).
		rs.settleLocked(seq, 0, Abandoned)
		return
	}
	rs.commitLocked(seq, a)
}

// Failed applies the fail record of the atom of run at seq.
func (x *Index) Failed(run string, seq uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if rs := x.mu.runs[run]; rs != nil && x.mu.loaded {
		rs.settleLocked(seq, 0, Failed)
	}
}

// Gone applies the end (k = KindEnd) or deletion (KindDelete, KindErase)
// of run, once its record is durable.
func (x *Index) Gone(k record.Kind, run string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.mu.loaded {
		return
	}
	if k.Deletes() {
		x.deleteLocked(run)
	} else if rs := x.mu.runs[run]; rs != nil {
		rs.endLocked()
	}
}

// Status returns the status of attempt a of the atom of run at seq (0: it
// appended no chunk the index knows of).
func (x *Index) Status(run string, seq, a uint64) Status {
	x.mu.Lock()
	defer x.mu.Unlock()
	if rs := x.mu.runs[run]; rs != nil && a >= 1 && a <= uint64(len(rs.seqs[seq])) {
		return rs.seqs[seq][a-1]
	}
	return 0
}

// Streams lists the streams of run, by name.
func (x *Index) Streams(run string) ([]Info, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.loadLocked(); err != nil {
		return nil, err
	}
	rs := x.mu.runs[run]
	if rs == nil {
		return nil, nil
	}
	out := make([]Info, 0, len(rs.streams))
	for name, st := range rs.streams {
		if err := st.advance(); err != nil {
			return nil, err
		}
		if st.visible > 0 {
			out = append(out, Info{Name: name, Chunks: uint64(st.visible)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// advance moves visible past the entries whose append completed.
func (st *streamState) advance() error {
	for st.visible < len(st.entries) {
		e := &st.entries[st.visible]
		select {
		case <-e.w.Done():
		default:
			return nil
		}
		ps, err := e.w.Wait(context.Background())
		if err != nil {
			return fmt.Errorf("stream: the append of chunk %d failed: %w", st.visible, err)
		}
		e.pos, e.w = ps[0], nil
		st.visible++
	}
	return nil
}

// Read returns the durable chunks of stream name of run from offset
// from: at most max of them (at least one if any) and, past the first,
// at most maxBytes of data. It does not wait: a Batch without chunks has
// Wake set, unless the stream ended. A stream never appended to reads as
// empty, and so does a run the index does not know (the engine tells a
// deleted run from one that never streamed).
func (x *Index) Read(run, name string, from uint64, max, maxBytes int) (Batch, error) {
	type ref struct {
		e      entry
		status Status
	}
	var refs []ref
	b := Batch{Next: from}
	x.mu.Lock()
	if err := x.loadLocked(); err != nil {
		x.mu.Unlock()
		return b, err
	}
	rs := x.mu.runs[run]
	if rs == nil {
		b.Wake = x.mu.born
		x.mu.Unlock()
		return b, nil
	}
	st := rs.streams[name]
	if st != nil {
		if err := st.advance(); err != nil {
			x.mu.Unlock()
			return b, err
		}
		for i := from; i < uint64(st.visible) && len(refs) < max; i++ {
			e := st.entries[i]
			refs = append(refs, ref{e, rs.seqs[e.seq][e.attempt-1]})
		}
	}
	visible := uint64(0)
	var pending <-chan struct{}
	if st != nil {
		visible = uint64(st.visible)
		if st.visible < len(st.entries) {
			pending = st.entries[st.visible].w.Done()
		}
	}
	ended := rs.ended && pending == nil
	if len(refs) == 0 {
		switch {
		case ended && from >= visible:
			b.Ended = true
		case pending != nil && from == visible:
			b.Wake = pending
		default:
			b.Wake = rs.wake
		}
	}
	x.mu.Unlock()
	size := 0
	for i, r := range refs {
		if i > 0 && size+1 > maxBytes {
			break
		}
		data, err := x.src.Data(r.e.pos)
		if err != nil {
			if len(b.Chunks) > 0 {
				return b, nil // the next read reports it
			}
			return b, fmt.Errorf("stream: run %q stream %q offset %d: %w", run, name, from+uint64(i), err)
		}
		if i > 0 && size+len(data) > maxBytes {
			break
		}
		size += len(data)
		b.Chunks = append(b.Chunks, Chunk{Offset: from + uint64(i), Seq: r.e.seq, Attempt: r.e.attempt, Status: r.status, Data: data})
		b.Next = from + uint64(i) + 1
	}
	if len(b.Chunks) > 0 && ended && b.Next >= visible {
		b.Ended = true // the last chunks of an ended run
	}
	return b, nil
}

// Wait is Read that waits, until ctx ends or stop is closed, for at least
// one chunk or the stream's end.
func (x *Index) Wait(ctx context.Context, stop <-chan struct{}, run, name string, from uint64, max, maxBytes int) (Batch, error) {
	for {
		b, err := x.Read(run, name, from, max, maxBytes)
		if err != nil || len(b.Chunks) > 0 || b.Ended {
			return b, err
		}
		select {
		case <-b.Wake:
		case <-ctx.Done():
			return b, ctx.Err()
		case <-stop:
			return b, ErrStopped
		}
	}
}
