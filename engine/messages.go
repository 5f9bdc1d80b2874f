package engine

// Messages between the runs of a store (docs/DESIGN.md, "Messages between
// runs"): the API over internal/mailbox, which holds the inbox;
// mailbox.LogSource reads the store for it (given at the replay:
// recovery.go), liveAtom is its Atom.

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
	if err := a.messaging(); err != nil {
		return err
	}
	return mailbox.Send(ctx, (*liveAtom)(a), to, payload, &msgErrs)
}

// msgErrs are the engine's sentinels the mailbox's conduct returns.
var msgErrs = mailbox.Errors{TooLarge: ErrMessageTooLarge, Deleted: ErrRunDeleted, Ended: ErrRunEnded}

// messaging says why the atom sends and receives no message at all: the
// store closed, or it is a branch's.
func (a *Atom) messaging() error {
	if err := a.run.db.checkOpen(); err != nil {
		return err
	}
	if a.branch != nil {
		return fmt.Errorf("%w: run %q branch %q", ErrBranchMessage, a.run.id, a.branch.Name)
	}
	return nil
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
	if err := a.messaging(); err != nil {
		return Message{}, false, err
	}
	m, ok, err := a.run.db.msgs.Next(ctx, (*liveAtom)(a), from, wait, &msgErrs)
	return Message(m), ok, err
}

// liveAtom is an atom in flight as internal/mailbox sends and receives
// for it (mailbox.Atom) and internal/stream appends for it (stream.Atom,
// streams.go), each call under its run's lock; the key the Streams keep
// its attempt under.
type liveAtom Atom

func (x *liveAtom) ID() (string, uint64)               { return x.run.id, x.seq }
func (x *liveAtom) Draft() *mailbox.Draft              { return &x.msgs }
func (x *liveAtom) Unlock()                            { x.run.mu.Unlock() }
func (x *liveAtom) Stopping() (<-chan struct{}, error) { return x.run.db.bg.stop, ErrClosed }

// Lock takes the run's lock once no write of it runs, and says why the
// atom acts no more (the lock then not held): the store closed, or the
// atom committed, failed, or is no longer its run's running atom.
func (x *liveAtom) Lock(ctx context.Context) error {
	a := (*Atom)(x)
	if err := a.run.db.checkOpen(); err != nil {
		return err
	}
	if err := a.run.lockIdle(ctx); err != nil {
		return err
	}
	a.mu.Lock()
	done := a.mu.done || a.run.mu.atom != a // it committed, failed, or another atom runs
	a.mu.Unlock()
	if done {
		a.run.mu.Unlock()
		return fmt.Errorf("%w: run %q seq %d", ErrAtomDone, a.run.id, a.seq)
	}
	return nil
}

// Peer is how the store holds run to (knownRun): deleted, or its status
// once it ended.
func (x *liveAtom) Peer(to string) (deleted bool, ended any, err error) {
	r, deleted, err := x.run.db.knownRun(to)
	if r != nil {
		if s := r.Status(); s != StatusActive {
			ended = s
		}
	}
	return deleted, ended, err
}

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
