package engine

// Messages between the runs of a store (engine/doc.go, "Messages between
// runs"): an atom's Send rides in its own record (the ExtTagSent
// extension), a Receive's consumption in the consuming atom's record
// (ExtTagConsumed). The inbox is derived: the messages the log's committed
// atoms sent, minus those the receivers' committed atoms consumed, minus
// those to runs that ended. It is kept in memory (mailboxes), persisted by
// the engine checkpoint (INBOX, layout/inbox.go) and rebuilt after a
// restart from INBOX and the log's tail, or from the log when INBOX does
// not match CHECKPOINT.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// MessageID names a message: the run that sent it, the seq of the atom
// that sent it, and its place among that atom's messages (from 0). It is
// the log's: stable across restarts and copies of the store.
type MessageID = record.MessageID

// Message is a message between runs.
type Message struct {
	ID      MessageID
	To      string
	Payload []byte // the caller's
}

// From is the run that sent the message.
func (m Message) From() string { return m.ID.From }

// ErrMessageTooLarge is returned by Send for a payload over
// MaxMessageSize, or an atom's message past MaxMessagesPerAtom.
var ErrMessageTooLarge = errors.New("engine: message too large")

const (
	// MaxMessageSize bounds a message's payload, in bytes.
	MaxMessageSize = record.MaxMessageSize
	// MaxMessagesPerAtom bounds the messages one atom sends, and those it
	// receives.
	MaxMessagesPerAtom = record.MaxMessagesPerAtom
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
	// reflected: an atom CHECKPOINT's row already covers (seq at or below
	// its last seq); needed only when INBOX cannot be used. Its body is
	// read from the log at at.
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

// replayedAtom notes atom rec of the tail replayed at Open (reflected:
// CHECKPOINT's row covers it). body is the run's own copy of its
// compressed body, or nil for a reflected atom.
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

// publishRunGone applies the end (k = KindEnd) or deletion (KindDelete) of
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
	if k == record.KindDelete {
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
		return k != record.KindAtom && k != record.KindEnd && k != record.KindDelete
	}
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		return fmt.Errorf("engine: inbox: read the log: %w", err)
	}
	defer c.Close()
	for c.Next() {
		r := c.Record()
		if !r.Pos.Less(to) {
			break
		}
		if r.Kind == record.KindAtom {
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

// Send sends payload to run to, as part of this atom: the message exists
// if and only if the atom commits (it is in the atom's own record), and
// run to sees it in its inbox from the moment Commit returns, after every
// message the same sender sent it before. The payload is copied.
//
// The receiving run need not exist yet: the message waits for a run of
// that id. A run that has ended (or was deleted) takes no message: Send
// fails with an error matching ErrRunEnded (ErrRunDeleted). A run that
// ends after Send, before it consumed the message, never gets it (see
// engine/doc.go, "Messages between runs"). A message to the sending run
// itself is consumed by one of its later atoms.
func (a *Atom) Send(ctx context.Context, to string, payload []byte) error {
	r, db := a.run, a.run.db
	if err := db.checkOpen(); err != nil {
		return err
	}
	if err := record.CheckRunID(to); err != nil {
		return fmt.Errorf("engine: run %q seq %d: send to %q: %w", r.id, a.seq, to, err)
	}
	if len(payload) > MaxMessageSize {
		return fmt.Errorf("%w: run %q seq %d: a payload of %d bytes to %q, the limit is %d (engine.MaxMessageSize)",
			ErrMessageTooLarge, r.id, a.seq, len(payload), to, MaxMessageSize)
	}
	if err := db.receiverOpen(to); err != nil {
		return fmt.Errorf("engine: run %q seq %d: send to %q: %w", r.id, a.seq, to, err)
	}
	if err := r.lockIdle(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	if err := a.runningLocked(); err != nil {
		return err
	}
	if len(a.msgs.sent) >= MaxMessagesPerAtom {
		return fmt.Errorf("%w: run %q seq %d: an atom sends at most %d messages", ErrMessageTooLarge, r.id, a.seq, MaxMessagesPerAtom)
	}
	a.msgs.sent = append(a.msgs.sent, record.SentMessage{To: to, Payload: cloneBytes(payload)})
	return nil
}

// receiverOpen says why run to takes no messages, or nil.
func (db *DB) receiverOpen(to string) error {
	db.mu.Lock()
	deleted := db.deletedLocked(to)
	r := db.runLocked(to)
	db.mu.Unlock()
	if deleted {
		return fmt.Errorf("%w: run %q", ErrRunDeleted, to)
	}
	if r != nil {
		if s := r.Status(); s != StatusActive {
			return fmt.Errorf("%w: run %q is %v: it takes no messages", ErrRunEnded, to, s)
		}
	}
	return nil
}

// runningLocked says why the atom can no longer send or receive, or nil.
// The run's mu is held.
func (a *Atom) runningLocked() error {
	a.mu.Lock()
	done := a.mu.done || a.run.mu.atom != a
	a.mu.Unlock()
	if done {
		return fmt.Errorf("%w: run %q seq %d", ErrAtomDone, a.run.id, a.seq)
	}
	return nil
}

// Receive returns the next message of the run's inbox, waiting for one
// until ctx ends: the oldest one not consumed yet nor received by this
// atom, oldest by the log position of the atom that sent it (so each
// sender's in the order sent). The message is consumed when this atom
// commits, as part of its record: after a crash before that, or a Fail,
// it is in the inbox again, and a Receive of a later attempt gets it
// again. A run's messages are consumed once, in order per sender.
func (a *Atom) Receive(ctx context.Context) (Message, error) {
	return a.receive(ctx, "", false)
}

// ReceiveFrom is Receive of the messages of one sender, run from.
func (a *Atom) ReceiveFrom(ctx context.Context, from string) (Message, error) {
	if err := record.CheckRunID(from); err != nil {
		return Message{}, fmt.Errorf("engine: run %q seq %d: receive from %q: %w", a.run.id, a.seq, from, err)
	}
	return a.receive(ctx, from, false)
}

// TryReceive is Receive without the wait: ok is false when the inbox has
// no message for the atom now.
func (a *Atom) TryReceive(ctx context.Context) (m Message, ok bool, err error) {
	m, err = a.receive(ctx, "", true)
	if errors.Is(err, errNoMessage) {
		return Message{}, false, nil
	}
	return m, err == nil, err
}

var errNoMessage = errors.New("engine: no message")

func (a *Atom) receive(ctx context.Context, from string, try bool) (Message, error) {
	r, db := a.run, a.run.db
	for {
		if err := db.checkOpen(); err != nil {
			return Message{}, err
		}
		if err := r.lockIdle(ctx); err != nil {
			return Message{}, err
		}
		if err := a.runningLocked(); err != nil {
			r.mu.Unlock()
			return Message{}, err
		}
		if len(a.msgs.received) >= MaxMessagesPerAtom {
			r.mu.Unlock()
			return Message{}, fmt.Errorf("%w: run %q seq %d: an atom receives at most %d messages", ErrMessageTooLarge, r.id, a.seq, MaxMessagesPerAtom)
		}
		m := &db.msgs
		m.mu.Lock()
		if err := db.loadMessagesLocked(); err != nil {
			m.mu.Unlock()
			r.mu.Unlock()
			return Message{}, err
		}
		p := m.nextLocked(r.id, from)
		var wake chan struct{}
		if p != nil {
			p.claim = a
			a.msgs.received = append(a.msgs.received, p)
		} else if !try {
			if wake = m.wake[r.id]; wake == nil {
				wake = make(chan struct{})
				m.wake[r.id] = wake
			}
		}
		m.mu.Unlock()
		r.mu.Unlock()
		if p != nil {
			return Message{ID: p.id, To: p.to, Payload: cloneBytes(p.payload)}, nil
		}
		if try {
			return Message{}, errNoMessage
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		case <-db.bg.stop:
			return Message{}, ErrClosed
		}
	}
}

// nextLocked returns the first message to run to that no atom has
// received (from one sender, or from any: the one whose sending atom is
// first in the log), or nil.
func (m *mailboxes) nextLocked(to, from string) *pendingMessage {
	var best *pendingMessage
	for sender, q := range m.boxes[to] {
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

// releaseMessagesLocked gives back the messages a failed atom received.
// The run's mu is held.
func (a *Atom) releaseMessagesLocked() {
	if len(a.msgs.received) == 0 {
		return
	}
	m := &a.run.db.msgs
	m.mu.Lock()
	for _, p := range a.msgs.received {
		if p.claim == a {
			p.claim = nil
		}
	}
	if ch := m.wake[a.run.id]; ch != nil {
		close(ch)
		delete(m.wake, a.run.id)
	}
	m.mu.Unlock()
	a.msgs.received = nil
}

// Inbox returns the messages sent to the run and not consumed yet, in the
// order Receive would return them; a message received by the running
// atom is listed too (it is consumed only when that atom commits). An
// ended run's inbox is empty: nothing is delivered to it.
func (r *Run) Inbox(ctx context.Context) ([]Message, error) {
	db := r.db
	if err := db.checkOpen(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m := &db.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := db.loadMessagesLocked(); err != nil {
		return nil, err
	}
	var ps []*pendingMessage
	for _, q := range m.boxes[r.id] {
		ps = append(ps, q.pending...)
	}
	slices.SortFunc(ps, func(a, b *pendingMessage) int {
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
		out[i] = Message{ID: p.id, To: p.to, Payload: cloneBytes(p.payload)}
	}
	return out, nil
}

// messageExts builds the extensions of an atom's record that carry what
// it sent and consumed, in b's buffers; nil when there are none (the
// atom's body is then version 1, as before messages existed).
func (b *encBuf) messageExts(sent []record.SentMessage, consumed []MessageID) []record.AtomExt {
	if len(sent) == 0 && len(consumed) == 0 {
		return nil
	}
	ext := b.ext[:0]
	exts := b.exts[:0]
	if len(sent) > 0 {
		ext = record.AppendSent(ext, sent)
		exts = append(exts, record.AtomExt{Tag: record.ExtTagSent})
	}
	split := len(ext)
	if len(consumed) > 0 {
		ext = record.AppendConsumed(ext, consumed)
		exts = append(exts, record.AtomExt{Tag: record.ExtTagConsumed})
	}
	// The data slices are taken once ext no longer grows.
	i := 0
	if len(sent) > 0 {
		exts[0].Data = ext[:split]
		i = 1
	}
	if len(consumed) > 0 {
		exts[i].Data = ext[split:]
	}
	b.ext, b.exts = ext, exts
	return exts
}

