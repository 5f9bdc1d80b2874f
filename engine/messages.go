package engine

// Messages between the runs of a store (docs/DESIGN.md, "Messages between
// runs"): the API over internal/mailbox, which holds the inbox;
// mailbox.LogSource reads the store for it (given at the replay:
// recovery.go), receiver is its Receiver.

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

// Send sends payload (copied) to run to as part of this atom: the message
// exists if and only if the atom commits, and run to sees it in its inbox
// from the moment Commit returns, after every message the same sender sent
// it before. Run to need not exist yet. Errors: ErrRunEnded and
// ErrRunDeleted (run to takes no message), ErrMessageTooLarge,
// ErrBranchMessage, ErrAtomDone.
func (a *Atom) Send(ctx context.Context, to string, payload []byte) error {
	r, db := a.run, a.run.db
	if err := db.checkOpen(); err != nil {
		return err
	}
	if err := mailbox.CheckSend(r.id, a.seq, to, len(payload), ErrMessageTooLarge); err != nil {
		return err
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
	return a.msgs.Add(r.id, a.seq, to, payload, ErrMessageTooLarge)
}

// receiverOpen says why run to takes no messages, or nil
// (mailbox.Takes).
func (db *DB) receiverOpen(to string) error {
	r, deleted, err := db.knownRun(to)
	if err != nil {
		return err
	}
	var ended any
	if r != nil {
		if s := r.Status(); s != StatusActive {
			ended = s
		}
	}
	return mailbox.Takes(to, deleted, ended, ErrRunDeleted, ErrRunEnded)
}

// knownRun returns run id, nil if the store holds none, and whether it
// was deleted. A run deleted before CHECKPOINT's replay position (or one
// the log holds and CHECKPOINT omits) is known once the log's table of
// runs is checked: it decides on that, not on CHECKPOINT's word.
func (db *DB) knownRun(id string) (r *Run, deleted bool, err error) {
	db.mu.Lock()
	r, deleted = db.runLocked(id), db.deletedLocked(id)
	db.mu.Unlock()
	if !deleted && r == nil && db.registryUnchecked() {
		if err := db.checkRegistry(); err != nil {
			return nil, false, err
		}
		return db.knownRun(id)
	}
	return r, deleted, nil
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
// until ctx ends: the oldest (by its sending atom's place in the log) not
// consumed yet nor received by this atom. It is consumed when this atom
// commits; after a Fail or a crash a later attempt receives it again.
func (a *Atom) Receive(ctx context.Context) (Message, error) {
	m, _, err := a.receive(ctx, "", true)
	return m, err
}

// ReceiveFrom is Receive of the messages of one sender, run from.
func (a *Atom) ReceiveFrom(ctx context.Context, from string) (Message, error) {
	if err := record.CheckRunID(from); err != nil {
		return Message{}, fmt.Errorf("engine: run %q seq %d: receive from %q: %w", a.run.id, a.seq, from, err)
	}
	m, _, err := a.receive(ctx, from, true)
	return m, err
}

// TryReceive is Receive without the wait: ok is false when the inbox has
// no message for the atom now.
func (a *Atom) TryReceive(ctx context.Context) (m Message, ok bool, err error) {
	return a.receive(ctx, "", false)
}

func (a *Atom) receive(ctx context.Context, from string, wait bool) (Message, bool, error) {
	m, ok, err := a.run.db.msgs.Next(ctx, (*receiver)(a), a.run.id, from, &a.msgs, wait)
	return Message(m), ok, err
}

// receiver is an atom as the mailbox receives for it.
type receiver Atom

func (x *receiver) Lock(ctx context.Context) error {
	a := (*Atom)(x)
	if err := a.run.db.checkOpen(); err != nil {
		return err
	}
	if err := a.run.lockIdle(ctx); err != nil {
		return err
	}
	err := a.runningLocked()
	if err == nil {
		err = a.msgs.Receivable(a.run.id, a.seq, ErrMessageTooLarge)
	}
	if err != nil {
		a.run.mu.Unlock()
	}
	return err
}

func (x *receiver) Unlock()                            { x.run.mu.Unlock() }
func (x *receiver) Stopping() (<-chan struct{}, error) { return x.run.db.bg.stop, ErrClosed }

// Inbox returns the messages sent to the run and not consumed yet, in the
// order Receive would return them, those the running atom received too.
// An ended run's inbox is empty.
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

// messageExts builds, in b's buffers, the extensions of an atom's record
// that carry what it sent and consumed; nil for none (a version 1 body).
func (b *encBuf) messageExts(sent []record.SentMessage, consumed []MessageID) []record.AtomExt {
	if len(sent) == 0 && len(consumed) == 0 {
		return nil
	}
	b.ext, b.exts = mailbox.AppendExts(b.ext[:0], b.exts[:0], sent, consumed)
	return b.exts
}
