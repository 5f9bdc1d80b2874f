package mailbox

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Source is what the Box reads of the store; the package doc says what
// each method promises.
type Source interface {
	InboxFile(gen uint64) (name string, b []byte, err error)
	Messages(a *record.Record) ([]record.SentMessage, []record.MessageID, error)
	Scan(to wal.Pos, fn func(*record.Record) error) error
	Rebuilding(why string)
}

// Message is a message of an inbox, its payload a copy of the caller's.
type Message struct {
	ID      record.MessageID
	To      string
	Payload []byte
}

// Draft is what one atom sends and receives before it commits. Guarded
// by the atom's run's lock (the engine's Send and Receive take it as Do
// does, so that a Commit in flight is waited for).
type Draft struct {
	sent     []record.SentMessage
	received []*pending // claimed by this Draft, in the order received
}

// Send adds a message to run to; payload is copied.
func (d *Draft) Send(to string, payload []byte) {
	d.sent = append(d.sent, record.SentMessage{To: to, Payload: clone(payload)})
}

// Counts returns how many messages the Draft sent and received.
func (d *Draft) Counts() (sent, received int) { return len(d.sent), len(d.received) }

// Record returns what the atom's record carries: the messages it sent
// (the Draft's, capacity capped: read only) and the ids it consumes (a
// new slice); nil for none.
func (d *Draft) Record() (sent []record.SentMessage, consumed []record.MessageID) {
	if n := len(d.sent); n > 0 {
		sent = d.sent[:n:n]
	}
	if len(d.received) > 0 {
		consumed = make([]record.MessageID, len(d.received))
		for i, p := range d.received {
			consumed[i] = p.id
		}
	}
	return sent, consumed
}

// pending is a message in an inbox, not consumed yet.
type pending struct {
	id      record.MessageID
	to      string
	at      wal.Pos // the sending atom's record: the order across senders
	payload []byte  // never changed; copied out
	claim   *Draft  // the running atom that received it; nil: none
}

// queue is what one sender sent one receiver, not consumed yet.
type queue struct {
	cursor  record.MessageID // the last consumed (Seq 0: none); From unused
	pending []*pending       // ascending ids, all after cursor; claims are a prefix
}

// event is a log record that changes the inbox, replayed at Open or
// published before the inbox was loaded; applied in order by load.
type event struct {
	kind record.Kind // KindAtom, KindEnd or a deletion
	run  string
	seq  uint64
	at   wal.Pos
	// body is the atom's compressed body (replayed atoms; shared with the
	// run's pending atoms, never changed); decoded is set instead for an
	// atom published live, with its messages.
	body     []byte
	decoded  bool
	sent     []record.SentMessage
	consumed []record.MessageID
	// reflected: an atom or end CHECKPOINT's row already covers (an
	// atom's seq at or below its last seq, the end it lists); applied
	// only when INBOX cannot be used. An atom's body is then read from
	// the log at at.
	reflected bool
}

// Box is the store's inbox. Its zero value is ready for Reset.
type Box struct {
	mu  sync.Mutex
	src Source // set by Reset
	// gen and replay are those of the CHECKPOINT Open used (gen 0: none,
	// or ignored): the INBOX that goes with it.
	gen    uint64
	replay wal.Pos
	loaded bool
	err    error   // load failed: sticky, every use returns it
	tail   []event // until loaded
	// rebuilt says why INBOX was not used and the inbox was rebuilt from
	// the log ("" if it was not).
	rebuilt string

	boxes   map[string]map[string]*queue // receiver -> sender -> queue
	ended   map[string]bool              // runs that ended or were deleted: no more deliveries
	deleted map[string]bool              // runs deleted: their messages are withdrawn
	wake    map[string]chan struct{}     // receiver -> closed when a message arrives
}

// Reset prepares the inbox for a replay from the CHECKPOINT cp (nil: the
// whole log) at from, reading the store through src.
func (b *Box) Reset(src Source, cp *layout.Checkpoint, from wal.Pos) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.src, b.gen, b.replay, b.tail, b.loaded = src, 0, from, nil, false
	if cp != nil {
		b.gen = cp.Gen
	}
}

// Replayed notes record rec of the tail replayed at Open (an atom, an end
// or a deletion; reflected: CHECKPOINT's row covers it). body is an
// atom's compressed body, never changed, or nil for a reflected atom
// (read from the log if a rebuild needs it).
func (b *Box) Replayed(rec *record.Record, body []byte, reflected bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tail = append(b.tail, event{kind: rec.Kind, run: rec.Run, seq: rec.Seq, at: rec.Pos, body: body, reflected: reflected})
}

// Publish applies what atom seq of run, durable at at, sent and consumed.
// The Box keeps sent's payloads. The caller holds the run's lock.
func (b *Box) Publish(run string, seq uint64, at wal.Pos, sent []record.SentMessage, consumed []record.MessageID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.loaded && b.err == nil {
		b.tail = append(b.tail, event{kind: record.KindAtom, run: run, seq: seq, at: at, decoded: true, sent: sent, consumed: consumed})
		return
	}
	b.applyLocked(run, seq, at, sent, consumed)
}

// Gone applies the end (k = KindEnd) or deletion (KindDelete, KindErase)
// of run: nothing is delivered to it any more, and a deleted run's
// messages not consumed are withdrawn.
func (b *Box) Gone(k record.Kind, run string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.loaded && b.err == nil {
		b.tail = append(b.tail, event{kind: k, run: run})
		return
	}
	b.goneLocked(k, run)
}

// Load builds the inbox if it is not built yet, and returns the sticky
// error of a load that failed.
func (b *Box) Load() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loadLocked()
}

// Receive claims for d, a running atom of run to, the first message to to
// that no Draft claimed (of sender from, or of any when from is ""): the
// one whose sending atom is first in the log. With none, ok is false and,
// if wait, wake is a channel closed when a message may have arrived. The
// caller holds the run's lock.
func (b *Box) Receive(to, from string, d *Draft, wait bool) (m Message, ok bool, wake <-chan struct{}, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.loadLocked(); err != nil {
		return Message{}, false, nil, err
	}
	if p := b.nextLocked(to, from); p != nil {
		p.claim = d
		d.received = append(d.received, p)
		return Message{ID: p.id, To: p.to, Payload: clone(p.payload)}, true, nil, nil
	}
	if !wait {
		return Message{}, false, nil, nil
	}
	ch := b.wake[to]
	if ch == nil {
		ch = make(chan struct{})
		b.wake[to] = ch
	}
	return Message{}, false, ch, nil
}

func (b *Box) nextLocked(to, from string) *pending {
	var best *pending
	for sender, q := range b.boxes[to] {
		if from != "" && sender != from {
			continue
		}
		for _, p := range q.pending {
			if p.claim == nil {
				if best == nil || p.at.Less(best.at) || p.at == best.at && p.id.Index < best.id.Index {
					best = p
				}
				break
			}
		}
	}
	return best
}

// Consumable says why atom seq of run cannot consume what d received, or
// nil: each sender's messages are consumed in the order sent, so those d
// received of a sender must be the first ones of that sender's queue
// still there. One atom runs at a time per run, so this holds by
// construction; the check keeps a commit from ever writing a consumption
// out of order. The caller holds the run's lock.
func (b *Box) Consumable(run string, seq uint64, d *Draft) error {
	if len(d.received) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	next := map[string]int{} // per sender, the place in its queue of the next received
	for _, p := range d.received {
		q := b.boxes[run][p.id.From]
		i := next[p.id.From]
		if q == nil || i >= len(q.pending) || q.pending[i] != p {
			return fmt.Errorf("engine: run %q seq %d: message %v can no longer be consumed by this atom: "+
				"the sender's earlier messages are not consumed, or it was consumed or withdrawn since it was received", run, seq, p.id)
		}
		next[p.id.From] = i + 1
	}
	return nil
}

// Release gives back the messages d, a failed atom of run, received, and
// empties d. The caller holds the run's lock.
func (b *Box) Release(run string, d *Draft) {
	if len(d.received) == 0 {
		return
	}
	b.mu.Lock()
	for _, p := range d.received {
		if p.claim == d {
			p.claim = nil
		}
	}
	if ch := b.wake[run]; ch != nil {
		close(ch)
		delete(b.wake, run)
	}
	b.mu.Unlock()
	d.received = nil
}

// List returns the messages sent to run to and not consumed yet, in the
// order Receive would return them, claimed ones too; payloads copied.
func (b *Box) List(to string) ([]Message, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.loadLocked(); err != nil {
		return nil, err
	}
	var ps []*pending
	for _, q := range b.boxes[to] {
		ps = append(ps, q.pending...)
	}
	slices.SortFunc(ps, func(a, b *pending) int {
		switch {
		case a.at.Less(b.at):
			return -1
		case b.at.Less(a.at):
			return 1
		}
		return int(a.id.Index) - int(b.id.Index)
	})
	out := make([]Message, len(ps))
	for i, p := range ps {
		out[i] = Message{ID: p.id, To: p.to, Payload: clone(p.payload)}
	}
	return out, nil
}

// Capture returns INBOX for the checkpoint of generation gen at replay
// position replay. The engine calls it after every run is captured, so
// that it reflects at least what their rows do.
func (b *Box) Capture(gen uint64, replay wal.Pos) (*layout.Inbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.loadLocked(); err != nil {
		return nil, err
	}
	in := &layout.Inbox{Gen: gen, Replay: replay}
	for id := range b.ended {
		in.Ended = append(in.Ended, id)
	}
	for id := range b.deleted {
		in.Deleted = append(in.Deleted, id)
	}
	slices.Sort(in.Ended)
	slices.Sort(in.Deleted)
	for to, box := range b.boxes {
		for from, q := range box {
			qf := layout.InboxQueue{To: to, From: from, CursorSeq: q.cursor.Seq, CursorIndex: q.cursor.Index}
			for _, p := range q.pending {
				qf.Pending = append(qf.Pending, layout.InboxMessage{Seq: p.id.Seq, Index: p.id.Index, At: p.at, Payload: p.payload})
			}
			in.Queues = append(in.Queues, qf)
		}
	}
	slices.SortFunc(in.Queues, func(a, b layout.InboxQueue) int {
		if c := strings.Compare(a.To, b.To); c != 0 {
			return c
		}
		return strings.Compare(a.From, b.From)
	})
	return in, nil
}

// Written records that the checkpoint of gen at replay wrote INBOX: what
// it names is what the next Open of that generation uses.
func (b *Box) Written(gen uint64, replay wal.Pos) {
	b.mu.Lock()
	b.gen, b.replay = gen, replay
	b.mu.Unlock()
}

// Rebuilt says why INBOX was not used, once the inbox is loaded ("": it
// was, or there was none to use).
func (b *Box) Rebuilt() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rebuilt
}

func (b *Box) init() {
	b.boxes = map[string]map[string]*queue{}
	b.ended = map[string]bool{}
	b.deleted = map[string]bool{}
	b.wake = map[string]chan struct{}{}
}

func (b *Box) queueLocked(to, from string) *queue {
	box := b.boxes[to]
	if box == nil {
		box = map[string]*queue{}
		b.boxes[to] = box
	}
	q := box[from]
	if q == nil {
		q = &queue{}
		box[from] = q
	}
	return q
}

// applyLocked applies a committed atom's messages, idempotently (the
// package doc, "Guarantees").
func (b *Box) applyLocked(run string, seq uint64, at wal.Pos, sent []record.SentMessage, consumed []record.MessageID) {
	for i, s := range sent {
		if b.ended[s.To] || b.deleted[run] {
			continue
		}
		id := record.MessageID{From: run, Seq: seq, Index: uint32(i)}
		q := b.queueLocked(s.To, run)
		if !q.cursor.Less(id) {
			continue
		}
		if n := len(q.pending); n > 0 && !q.pending[n-1].id.Less(id) {
			continue
		}
		q.pending = append(q.pending, &pending{id: id, to: s.To, at: at, payload: s.Payload})
		if ch := b.wake[s.To]; ch != nil {
			close(ch)
			delete(b.wake, s.To)
		}
	}
	for _, id := range consumed {
		q := b.queueLocked(run, id.From)
		if q.cursor.Less(id) {
			q.cursor = record.MessageID{Seq: id.Seq, Index: id.Index}
		}
		k := 0
		for k < len(q.pending) && !q.cursor.Less(q.pending[k].id) {
			k++
		}
		clear(q.pending[:k])
		q.pending = q.pending[k:]
	}
}

func (b *Box) goneLocked(k record.Kind, run string) {
	b.ended[run] = true
	delete(b.boxes, run)
	if k.Deletes() {
		b.deleted[run] = true
		for _, box := range b.boxes {
			if q := box[run]; q != nil {
				clear(q.pending)
				q.pending = nil
			}
		}
	}
	if ch := b.wake[run]; ch != nil {
		close(ch)
		delete(b.wake, run)
	}
}

// loadLocked builds the inbox once, on first use: from INBOX when it is
// the one CHECKPOINT's generation wrote, else from the log before the
// replay position; then the events of the tail.
func (b *Box) loadLocked() error {
	if b.loaded || b.err != nil {
		return b.err
	}
	b.init()
	rebuild := false
	if b.gen != 0 {
		if why := b.loadFileLocked(); why != "" {
			b.init()
			b.rebuilt = why
			rebuild = true
			b.src.Rebuilding(why)
			if err := b.src.Scan(b.replay, b.scannedLocked); err != nil {
				b.err = err
				return err
			}
		}
	}
	for i := range b.tail {
		e := &b.tail[i]
		if e.reflected && !rebuild {
			continue
		}
		if err := b.applyEventLocked(e); err != nil {
			b.err = err
			return err
		}
	}
	b.tail, b.loaded = nil, true
	return nil
}

// loadFileLocked reads INBOX into the inbox, or says why it cannot.
func (b *Box) loadFileLocked() string {
	name, data, err := b.src.InboxFile(b.gen)
	if layout.NotExist(err) {
		return "it is missing"
	}
	if err != nil {
		return err.Error()
	}
	in, err := layout.ParseInbox(name, data)
	if err != nil {
		return err.Error()
	}
	if in.Gen != b.gen || in.Replay != b.replay {
		return fmt.Sprintf("it was written by checkpoint %d at %v, CHECKPOINT is %d at %v", in.Gen, in.Replay, b.gen, b.replay)
	}
	for _, id := range in.Ended {
		b.ended[id] = true
	}
	for _, id := range in.Deleted {
		b.deleted[id] = true
	}
	for _, qf := range in.Queues {
		if b.boxes[qf.To][qf.From] != nil {
			return fmt.Sprintf("it lists the queue of %q to %q twice", qf.From, qf.To)
		}
		q := b.queueLocked(qf.To, qf.From)
		q.cursor = record.MessageID{Seq: qf.CursorSeq, Index: qf.CursorIndex}
		for _, p := range qf.Pending {
			q.pending = append(q.pending, &pending{id: record.MessageID{From: qf.From, Seq: p.Seq, Index: p.Index},
				to: qf.To, at: p.At, payload: clone(p.Payload)})
		}
	}
	return ""
}

// scannedLocked applies one record of a rebuild's scan of the log.
func (b *Box) scannedLocked(r *record.Record) error {
	if r.Kind != record.KindAtom {
		b.goneLocked(r.Kind, r.Run)
		return nil
	}
	return b.atomLocked(r)
}

// applyEventLocked applies one event of the tail.
func (b *Box) applyEventLocked(e *event) error {
	switch {
	case e.kind != record.KindAtom:
		b.goneLocked(e.kind, e.run)
		return nil
	case e.decoded:
		b.applyLocked(e.run, e.seq, e.at, e.sent, e.consumed)
		return nil
	}
	return b.atomLocked(&record.Record{Kind: record.KindAtom, Run: e.run, Seq: e.seq, Pos: e.at, Body: e.body})
}

// atomLocked reads the messages of atom record a through the Source and
// applies them.
func (b *Box) atomLocked(a *record.Record) error {
	sent, consumed, err := b.src.Messages(a)
	if err != nil {
		return err
	}
	if sent != nil || consumed != nil {
		b.applyLocked(a.Run, a.Seq, a.Pos, sent, consumed)
	}
	return nil
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }
