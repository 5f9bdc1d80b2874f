package engine

// Messages between the runs of a store: the API (engine/doc.go, "Messages
// between runs"). inbox.go holds the derived state it reads and writes.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/continuumdb/continuum/record"
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
	if a.branch != nil {
		return fmt.Errorf("%w: run %q branch %q", ErrBranchMessage, a.run.id, a.branch.Name)
	}
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

// consumableLocked says why the atom cannot consume what it received, or
// nil: each sender's messages are consumed in the order sent, so those it
// received of a sender must be the first ones of that sender's queue
// still there. One atom runs at a time per run, so this holds by
// construction; the check keeps a commit from ever writing a consumption
// out of order. The run's mu is held.
func (a *Atom) consumableLocked() error {
	if len(a.msgs.received) == 0 {
		return nil
	}
	m := &a.run.db.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	next := map[string]int{} // per sender, the place in its queue of the next received
	for _, p := range a.msgs.received {
		q := m.boxes[a.run.id][p.id.From]
		i := next[p.id.From]
		if q == nil || i >= len(q.pending) || q.pending[i] != p {
			return fmt.Errorf("engine: run %q seq %d: message %v can no longer be consumed by this atom: "+
				"the sender's earlier messages are not consumed, or it was consumed or withdrawn since it was received", a.run.id, a.seq, p.id)
		}
		next[p.id.From] = i + 1
	}
	return nil
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
