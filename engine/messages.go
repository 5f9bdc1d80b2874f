package engine

// Messages between the runs of a store: the API (docs/DESIGN.md, "The
// engine's API", "Messages between runs"), over package internal/mailbox,
// which holds the inbox and reads the store for it (mailbox.LogSource,
// given at the replay: recovery.go).

import (
	"context"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/internal/mailbox"
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
// docs/DESIGN.md, "The engine's API", "Messages between runs"). A message to the sending run
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
	if n, _ := a.msgs.Counts(); n >= MaxMessagesPerAtom {
		return fmt.Errorf("%w: run %q seq %d: an atom sends at most %d messages", ErrMessageTooLarge, r.id, a.seq, MaxMessagesPerAtom)
	}
	a.msgs.Send(to, payload)
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
	if a.doneLocked() {
		return fmt.Errorf("%w: run %q seq %d", ErrAtomDone, a.run.id, a.seq)
	}
	return nil
}

// doneLocked says the atom committed, failed, or is no longer its run's
// running atom. The run's mu is held.
func (a *Atom) doneLocked() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.done || a.run.mu.atom != a
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
		if _, n := a.msgs.Counts(); n >= MaxMessagesPerAtom {
			r.mu.Unlock()
			return Message{}, fmt.Errorf("%w: run %q seq %d: an atom receives at most %d messages", ErrMessageTooLarge, r.id, a.seq, MaxMessagesPerAtom)
		}
		m, ok, wake, err := db.msgs.Receive(r.id, from, &a.msgs, !try)
		r.mu.Unlock()
		switch {
		case err != nil:
			return Message{}, err
		case ok:
			return Message(m), nil
		case try:
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

// Inbox returns the messages sent to the run and not consumed yet, in the
// order Receive would return them; a message received by the running
// atom is listed too (it is consumed only when that atom commits). An
// ended run's inbox is empty: nothing is delivered to it.
func (r *Run) Inbox(ctx context.Context) ([]Message, error) {
	if err := r.db.checkOpen(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ms, err := r.db.msgs.List(r.id)
	if err != nil {
		return nil, err
	}
	out := make([]Message, len(ms))
	for i, m := range ms {
		out[i] = Message(m)
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
	b.ext, b.exts = mailbox.AppendExts(b.ext[:0], b.exts[:0], sent, consumed)
	return b.exts
}
