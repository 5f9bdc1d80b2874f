// The Verifier's worker goroutines: the events routed to a run's worker,
// the batches that carry them, and the worker loop.

package chain

import "sync"

// Batching of events sent to a worker goroutine.
const (
	batchEvents = 512
	batchBytes  = 256 << 10
)

type op uint8

const (
	opRun op = iota
	opFork
	opRecord
	opAnchor
	opFail
)

// event is one input routed to a run's worker.
type event struct {
	op      op
	src     anchorSrc
	trusted bool // anchor: signature verified (or trusted state)
	final   bool
	sigs    bool // checkpoint anchor: the record carries a signature (checked or not)
	kind    Kind // opFail
	run     string
	seq     uint64
	hash    Hash // record: stored head; anchor: committed head
	nonce   Nonce
	parent  string // opFork: the parent run
	off     int    // record payload: batch.arena[off:end]
	end     int
	loc     string
	detail  string
}

// batch is a slice of events and the payload bytes they refer to. The
// dispatcher owns it until it is sent; then the worker owns it until it
// puts it back in the pool.
type batch struct {
	evs   []event
	arena []byte
	// ack, if set, marks a barrier: the worker closes it once it has
	// handled every batch sent before (see sync).
	ack chan struct{}
}

var batchPool = sync.Pool{New: func() any {
	return &batch{evs: make([]event, 0, batchEvents), arena: make([]byte, 0, batchBytes)}
}}

// worker verifies the runs routed to it, in order.
type worker struct {
	v    *Verifier
	runs map[string]*runState // owned by the worker's goroutine (or the caller when !async, or between sync and the next send)
	in   chan *batch
	done chan struct{}
	cur  *batch // owned by the dispatcher
}

func (w *worker) getBatch() *batch {
	b := batchPool.Get().(*batch)
	b.evs, b.arena = b.evs[:0], b.arena[:0]
	return b
}

func (w *worker) send(ev event) {
	if !w.v.async {
		w.handle(&ev, nil)
		return
	}
	w.cur.evs = append(w.cur.evs, ev)
	if len(w.cur.evs) >= batchEvents {
		w.flush()
	}
}

func (w *worker) sendPayload(ev event, payload []byte) {
	if len(payload) > batchBytes {
		// A large payload (up to 64 MiB) is not copied into a batch, where
		// several could wait in the channel at once: once the worker has
		// handled all it was sent, the caller hashes it itself.
		w.flush()
		w.sync()
		w.handle(&ev, payload)
		return
	}
	b := w.cur
	ev.off = len(b.arena)
	b.arena = append(b.arena, payload...)
	ev.end = len(b.arena)
	b.evs = append(b.evs, ev)
	if len(b.evs) >= batchEvents || len(b.arena) >= batchBytes {
		w.flush()
	}
}

func (w *worker) flush() {
	if len(w.cur.evs) == 0 {
		return
	}
	w.in <- w.cur
	w.cur = w.getBatch()
}

// sync waits until the worker has handled every batch sent so far; until
// the next send, its runs belong to the caller.
func (w *worker) sync() {
	ack := make(chan struct{})
	w.in <- &batch{ack: ack}
	<-ack
}

func (w *worker) loop() {
	defer close(w.done)
	for b := range w.in {
		if b.ack != nil {
			close(b.ack)
			continue
		}
		for i := range b.evs {
			ev := &b.evs[i]
			var p []byte
			if ev.op == opRecord {
				p = b.arena[ev.off:ev.end]
			}
			w.handle(ev, p)
		}
		clear(b.evs) // drop string references before pooling
		if cap(b.arena) <= 2*batchBytes {
			batchPool.Put(b)
		}
	}
}

func (w *worker) run(id string) *runState {
	rs := w.runs[id]
	if rs == nil {
		rs = &runState{id: id, hasher: w.v.hasher, signedAll: true, policy: &w.v.policy, verifying: w.v.pub != nil}
		w.runs[id] = rs
	}
	return rs
}

func (w *worker) handle(ev *event, payload []byte) {
	switch ev.op {
	case opRecord:
		w.run(ev.run).record(ev.seq, payload, ev.hash, func() string { return ev.loc })
	case opRun:
		rs := w.run(ev.run)
		rs.create(ev.nonce, ev.loc)
		if t := w.v.trusted; t != nil {
			if th, ok := t.Runs[ev.run]; ok {
				rs.anchor(anchor{seq: th.Seq, head: th.Head, src: srcTrusted, trusted: true, loc: "trusted state"})
			}
		}
	case opFork:
		rs := w.run(ev.run)
		rs.createFork(ev.nonce, ev.parent, ev.seq, ev.hash, ev.loc)
		if t := w.v.trusted; t != nil {
			if th, ok := t.Runs[ev.run]; ok {
				rs.anchor(anchor{seq: th.Seq, head: th.Head, src: srcTrusted, trusted: true, loc: "trusted state"})
			}
		}
	case opAnchor:
		rs := w.run(ev.run)
		if ev.src == srcCheckpoint {
			rs.checkpoints++
			if !ev.trusted {
				rs.signedAll = false
			}
			if ev.seq >= rs.lastCkpt {
				rs.lastCkpt, rs.lastCkptSigs = ev.seq, ev.sigs
			}
		}
		rs.anchor(anchor{seq: ev.seq, head: ev.hash, src: ev.src, trusted: ev.trusted, final: ev.final, loc: ev.loc})
	case opFail:
		rs := w.run(ev.run)
		rs.checkpoints++
		rs.signedAll = false
		rs.fail(Failure{Kind: ev.kind, Seq: ev.seq, Actual: ev.hash, Location: ev.loc, Detail: ev.detail})
	}
}
