package engine

// The inbox of messages between runs (engine/doc.go, "Messages between
// runs"): an atom's Send rides in its own record (the ExtTagSent
// extension), a Receive's consumption in the consuming atom's record
// (ExtTagConsumed). The inbox is derived: the messages the log's committed
// atoms sent, minus those the receivers' committed atoms consumed, minus
// those to runs that ended. It is kept in memory (mailboxes), persisted by
// the engine checkpoint (INBOX, layout/inbox.go) and rebuilt after a
// restart from INBOX and the log's tail, or from the log when INBOX does
// not match CHECKPOINT.

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// atomMessages is what an atom sends and receives before it commits.
// Guarded by the atom's run's mu (Send and Receive take it with lockIdle,
// as Do does, so that a Commit in flight is waited for).
type atomMessages struct {
	sent     []record.SentMessage
	received []*pendingMessage // claimed by the atom, in the order received
}

// pendingMessage is a message in an inbox, not consumed yet.
type pendingMessage struct {
	id      MessageID
	to      string
	at      wal.Pos // the sending atom's record: the order across senders
	payload []byte  // never changed; copied out
	claim   *Atom   // the running atom that received it; nil: none
}

// msgQueue is what one sender sent one receiver, not consumed yet.
type msgQueue struct {
	cursor  MessageID         // the last consumed (Seq 0: none); From unused
	pending []*pendingMessage // ascending ids, all after cursor; claims are a prefix
}

// msgEvent is a log record that changes the inbox, replayed at Open or
// published before the inbox was loaded; applied in order by load.
type msgEvent struct {
	kind record.Kind // KindAtom, KindEnd or KindDelete
	run  string
	seq  uint64
	at   wal.Pos
	// body is the atom's compressed body (replayed atoms; shared with the
	// run's pending atoms, never changed); decoded is set instead for an
	// atom published live, with its messages.
	body     []byte
	decoded  bool
	sent     []record.SentMessage
	consumed []MessageID
	// reflected: an atom or end CHECKPOINT's row already covers (an
	// atom's seq at or below its last seq, the end it lists); applied
	// only when INBOX cannot be used. An atom's body is then read from
	// the log at at.
	reflected bool
}

// mailboxes is the store's inbox. Lock order: a Run's mu, then mailboxes'
// mu, then an Atom's mu.
type mailboxes struct {
	mu sync.Mutex
	// gen and replay are those of the CHECKPOINT Open used (gen 0: none,
	// or ignored): the INBOX that goes with it.
	gen    uint64
	replay wal.Pos
	loaded bool
	err    error      // load failed: sticky, every use returns it
	tail   []msgEvent // until loaded
	// rebuilt says why INBOX was not used and the inbox was rebuilt from
	// the log ("" if it was not).
	rebuilt string

	boxes   map[string]map[string]*msgQueue // receiver -> sender -> queue
	ended   map[string]bool                 // runs that ended or were deleted: no more deliveries
	deleted map[string]bool                 // runs deleted: their messages are withdrawn
	wake    map[string]chan struct{}        // receiver -> closed when a message arrives
}

// resetMessages prepares the inbox for a replay from the CHECKPOINT cp
// (nil: the whole log) at from.
func (db *DB) resetMessages(cp *layout.Checkpoint, from wal.Pos) {
	m := &db.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen, m.replay, m.tail, m.loaded = 0, from, nil, false
	if cp != nil {
		m.gen = cp.Gen
	}
}

// replayedMessageEvent notes record rec of the tail replayed at Open (an
// atom, an end or a deletion; reflected: CHECKPOINT's row covers it).
// body is an atom's compressed body, the run's own copy, or nil for a
// reflected atom (read from the log if a rebuild needs it).
func (db *DB) replayedMessageEvent(rec *record.Record, body []byte, reflected bool) {
	m := &db.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tail = append(m.tail, msgEvent{kind: rec.Kind, run: rec.Run, seq: rec.Seq, at: rec.Pos, body: body, reflected: reflected})
}

// publishMessages applies what a committed atom of run sent and consumed.
// The caller holds the run's mu (publishLocked).
func (db *DB) publishMessages(run string, seq uint64, at wal.Pos, sent []record.SentMessage, consumed []MessageID) {
	m := &db.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.loaded && m.err == nil {
		m.tail = append(m.tail, msgEvent{kind: record.KindAtom, run: run, seq: seq, at: at, decoded: true, sent: sent, consumed: consumed})
		return
	}
	m.applyLocked(run, seq, at, sent, consumed)
}

// publishRunGone applies the end (k = KindEnd) or deletion (KindDelete,
// KindErase) of
// run: nothing is delivered to it any more, and a deleted run's messages
// not consumed are withdrawn.
func (db *DB) publishRunGone(k record.Kind, run string) {
	m := &db.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.loaded && m.err == nil {
		m.tail = append(m.tail, msgEvent{kind: k, run: run})
		return
	}
	m.goneLocked(k, run)
}

func (m *mailboxes) init() {
	m.boxes = map[string]map[string]*msgQueue{}
	m.ended = map[string]bool{}
	m.deleted = map[string]bool{}
	m.wake = map[string]chan struct{}{}
}

func (m *mailboxes) queueLocked(to, from string) *msgQueue {
	box := m.boxes[to]
	if box == nil {
		box = map[string]*msgQueue{}
		m.boxes[to] = box
	}
	q := box[from]
	if q == nil {
		q = &msgQueue{}
		box[from] = q
	}
	return q
}

// applyLocked applies a committed atom's messages. It is idempotent: a
// message at or before its queue's cursor, or already queued, is not
// queued again, and a cursor only moves forward; so the log's tail may be
// applied over an INBOX that already reflects part of it.
func (m *mailboxes) applyLocked(run string, seq uint64, at wal.Pos, sent []record.SentMessage, consumed []MessageID) {
	for i, s := range sent {
		if m.ended[s.To] || m.deleted[run] {
			continue
		}
		id := MessageID{From: run, Seq: seq, Index: uint32(i)}
		q := m.queueLocked(s.To, run)
		if !q.cursor.Less(id) {
			continue
		}
		if n := len(q.pending); n > 0 && !q.pending[n-1].id.Less(id) {
			continue
		}
		q.pending = append(q.pending, &pendingMessage{id: id, to: s.To, at: at, payload: s.Payload})
		if ch := m.wake[s.To]; ch != nil {
			close(ch)
			delete(m.wake, s.To)
		}
	}
	for _, id := range consumed {
		q := m.queueLocked(run, id.From)
		if q.cursor.Less(id) {
			q.cursor = MessageID{Seq: id.Seq, Index: id.Index}
		}
		k := 0
		for k < len(q.pending) && !q.cursor.Less(q.pending[k].id) {
			k++
		}
		clear(q.pending[:k])
		q.pending = q.pending[k:]
	}
}

func (m *mailboxes) goneLocked(k record.Kind, run string) {
	m.ended[run] = true
	delete(m.boxes, run)
	if k.Deletes() {
		m.deleted[run] = true
		for _, box := range m.boxes {
			if q := box[run]; q != nil {
				clear(q.pending)
				q.pending = nil
			}
		}
	}
	if ch := m.wake[run]; ch != nil {
		close(ch)
		delete(m.wake, run)
	}
}

// loadLocked builds the inbox once, on first use: from INBOX when it is
// the one CHECKPOINT's generation wrote, else from the log before the
// replay position; then the events of the tail.
func (db *DB) loadMessagesLocked() error {
	m := &db.msgs
	if m.loaded || m.err != nil {
		return m.err
	}
	m.init()
	rebuild := false
	if m.gen != 0 {
		why := db.loadInboxFileLocked()
		if why != "" {
			m.init()
			m.rebuilt = why
			rebuild = true
			db.logger.Warn("engine: INBOX is not usable; the inbox is rebuilt from the log", "file", db.path(layout.InboxName), "reason", why)
			if err := db.scanMessagesLocked(m.replay); err != nil {
				m.err = err
				return err
			}
		}
	}
	for _, e := range m.tail {
		if e.reflected && !rebuild {
			continue
		}
		if err := db.applyEventLocked(&e); err != nil {
			m.err = err
			return err
		}
	}
	m.tail, m.loaded = nil, true
	return nil
}

// loadInboxFileLocked reads INBOX into the inbox, or says why it cannot.
func (db *DB) loadInboxFileLocked() string {
	m := &db.msgs
	name := db.path(layout.InboxName)
	b, err := layout.ReadFile(db.fs, name)
	if layout.NotExist(err) {
		return "it is missing"
	}
	if err != nil {
		return err.Error()
	}
	if db.sealer != nil {
		if b, err = db.sealer.OpenStoreFile(b, record.PlaceInbox, m.gen); err != nil {
			return err.Error()
		}
	}
	in, err := layout.ParseInbox(name, b)
	if err != nil {
		return err.Error()
	}
	if in.Gen != m.gen || in.Replay != m.replay {
		return fmt.Sprintf("it was written by checkpoint %d at %v, CHECKPOINT is %d at %v", in.Gen, in.Replay, m.gen, m.replay)
	}
	for _, id := range in.Ended {
		m.ended[id] = true
	}
	for _, id := range in.Deleted {
		m.deleted[id] = true
	}
	for _, qf := range in.Queues {
		if m.boxes[qf.To][qf.From] != nil {
			return fmt.Sprintf("it lists the queue of %q to %q twice", qf.From, qf.To)
		}
		q := m.queueLocked(qf.To, qf.From)
		q.cursor = MessageID{Seq: qf.CursorSeq, Index: qf.CursorIndex}
		for _, p := range qf.Pending {
			q.pending = append(q.pending, &pendingMessage{id: MessageID{From: qf.From, Seq: p.Seq, Index: p.Index},
				to: qf.To, at: p.At, payload: cloneBytes(p.Payload)})
		}
	}
	return ""
}

func cloneBytes(b []byte) []byte { return append([]byte(nil), b...) }

// applyEventLocked applies one event of the tail.
func (db *DB) applyEventLocked(e *msgEvent) error {
	m := &db.msgs
	if e.kind != record.KindAtom {
		m.goneLocked(e.kind, e.run)
		return nil
	}
	if e.decoded {
		m.applyLocked(e.run, e.seq, e.at, e.sent, e.consumed)
		return nil
	}
	body := e.body
	if body == nil {
		a, err := db.log.ReadAt(e.at)
		if err != nil {
			return fmt.Errorf("engine: inbox: read atom %d of run %q at %v: %w", e.seq, e.run, e.at, err)
		}
		var r record.Record
		if err := db.decoder(false).Decode(a, e.at, db.segmentFile(e.at.Segment), &r); err != nil {
			return err
		}
		if r.Erased {
			return nil // its run was erased: what it sent is withdrawn
		}
		body = r.Body
	}
	return db.applyAtomMessagesLocked(&record.Record{Kind: record.KindAtom, Run: e.run, Seq: e.seq, Pos: e.at, Body: body})
}

// applyAtomMessagesLocked decodes the messages of atom record a and
// applies them.
func (db *DB) applyAtomMessagesLocked(a *record.Record) error {
	_, body, err := db.decoder(false).DecodeAtom(nil, a, db.segmentFile(a.Pos.Segment))
	if err != nil {
		return err
	}
	sent, consumed, err := body.Messages()
	if err != nil {
		return &CorruptionError{File: db.segmentFile(a.Pos.Segment), Offset: a.Pos.Offset, Run: a.Run, Seq: a.Seq, Reason: err.Error(), Err: err}
	}
	if sent != nil || consumed != nil {
		// The payloads alias the decompressed body, which is this call's.
		db.msgs.applyLocked(a.Run, a.Seq, a.Pos, sent, consumed)
	}
	return nil
}

// scanMessagesLocked rebuilds the inbox from the log's atoms, ends and
// deletions before to (the tail after it is applied by the caller).
func (db *DB) scanMessagesLocked(to wal.Pos) error {
	dec := db.decoder(false)
	dec.Skip = func(k record.Kind, _ []byte) bool {
		return k != record.KindAtom && k != record.KindEnd && !k.Deletes()
	}
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		return fmt.Errorf("engine: inbox: read the log: %w", err)
	}
	defer c.Close()
	// Not interrupted by Close: its final checkpoint needs the inbox.
	for c.Next() {
		r := c.Record()
		if !r.Pos.Less(to) {
			break
		}
		if r.Kind == record.KindAtom {
			if r.Erased {
				continue // its run was erased: what it sent is withdrawn
			}
			if err := db.applyAtomMessagesLocked(r); err != nil {
				return err
			}
			continue
		}
		db.msgs.goneLocked(r.Kind, r.Run)
	}
	return c.Err()
}

// captureInbox returns INBOX for the checkpoint of generation gen at
// replay position replay. Called after every run is captured, so that it
// reflects at least what their rows do.
func (db *DB) captureInbox(gen uint64, replay wal.Pos) (*layout.Inbox, error) {
	m := &db.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := db.loadMessagesLocked(); err != nil {
		return nil, err
	}
	in := &layout.Inbox{Gen: gen, Replay: replay}
	for id := range m.ended {
		in.Ended = append(in.Ended, id)
	}
	for id := range m.deleted {
		in.Deleted = append(in.Deleted, id)
	}
	slices.Sort(in.Ended)
	slices.Sort(in.Deleted)
	for to, box := range m.boxes {
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
	// The engine is the one that made this INBOX; what it names is used by
	// the next Open of this generation.
	return in, nil
}

// noteInboxWritten records that the checkpoint of gen wrote INBOX.
func (db *DB) noteInboxWritten(gen uint64, replay wal.Pos) {
	m := &db.msgs
	m.mu.Lock()
	m.gen, m.replay = gen, replay
	m.mu.Unlock()
}

// messagesRebuilt says why INBOX was not used, once the inbox is loaded.
func (db *DB) messagesRebuilt() string {
	m := &db.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rebuilt
}
