package mailbox

import (
	"slices"
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
func clone(b []byte) []byte { return append([]byte(nil), b...) }
