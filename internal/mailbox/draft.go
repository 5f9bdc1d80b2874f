package mailbox

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/record"
)

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

// Add is Send of the atom run's seq, which sends at most
// record.MaxMessagesPerAtom: past them it adds nothing and returns
// tooLarge, wrapped.
func (d *Draft) Add(run string, seq uint64, to string, payload []byte, tooLarge error) error {
	if len(d.sent) >= record.MaxMessagesPerAtom {
		return fmt.Errorf("%w: run %q seq %d: an atom sends at most %d messages", tooLarge, run, seq, record.MaxMessagesPerAtom)
	}
	d.Send(to, payload)
	return nil
}

// Receivable says why the atom run's seq may receive no more: it received
// record.MaxMessagesPerAtom (tooLarge, wrapped); or nil.
func (d *Draft) Receivable(run string, seq uint64, tooLarge error) error {
	if len(d.received) >= record.MaxMessagesPerAtom {
		return fmt.Errorf("%w: run %q seq %d: an atom receives at most %d messages", tooLarge, run, seq, record.MaxMessagesPerAtom)
	}
	return nil
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

// Atom is a running atom as Send and Next act for it (the engine's
// adapter over its atom).
type Atom interface {
	// ID returns the atom's run and seq.
	ID() (run string, seq uint64)
	// Draft returns the atom's Draft, guarded by its run's lock.
	Draft() *Draft
	// Lock takes the atom's run's lock, waiting until ctx ends, and says
	// why the atom sends and receives no more (the lock then not held),
	// or nil.
	Lock(ctx context.Context) error
	// Unlock releases the run's lock.
	Unlock()
	// Stopping returns a channel closed when the store closes, and the
	// error a receive waiting on it then returns.
	Stopping() (<-chan struct{}, error)
	// Peer returns how the store holds run to, for Takes: deleted, or
	// ended (its status; nil while it is active, or while the store has
	// no run to). Send calls it without the atom's run's lock.
	Peer(to string) (deleted bool, ended any, err error)
}

// Errors are the engine's sentinels the errors of Send and Next wrap.
type Errors struct {
	TooLarge error // a payload over record.MaxMessageSize, or a message past record.MaxMessagesPerAtom
	Deleted  error // Send: run to was deleted
	Ended    error // Send: run to ended
}

// Send is an atom's Send, in its order: the message's checks (CheckSend),
// whether run to takes messages (a.Peer, Takes), then, under the atom's
// run's lock (a.Lock), the message added to its Draft within
// record.MaxMessagesPerAtom (Draft.Add). payload is copied.
func Send(ctx context.Context, a Atom, to string, payload []byte, errs *Errors) error {
	run, seq := a.ID()
	if err := CheckSend(run, seq, to, len(payload), errs.TooLarge); err != nil {
		return err
	}
	deleted, ended, err := a.Peer(to)
	if err == nil {
		err = Takes(to, deleted, ended, errs.Deleted, errs.Ended)
	}
	if err != nil {
		return fmt.Errorf("engine: run %q seq %d: send to %q: %w", run, seq, to, err)
	}
	if err := a.Lock(ctx); err != nil {
		return err
	}
	defer a.Unlock()
	return a.Draft().Add(run, seq, to, payload, errs.TooLarge)
}

// Next is an atom's Receive (of sender from, or of any when from is ""):
// under its run's lock (a.Lock), within record.MaxMessagesPerAtom
// received (Draft.Receivable), Receive for its Draft; with wait it waits,
// until ctx ends or the store closes, for a message, and takes the lock
// again. ok is false only without wait, when there is none now.
func (b *Box) Next(ctx context.Context, a Atom, from string, wait bool, errs *Errors) (Message, bool, error) {
	run, seq := a.ID()
	for {
		if err := a.Lock(ctx); err != nil {
			return Message{}, false, err
		}
		d := a.Draft()
		if err := d.Receivable(run, seq, errs.TooLarge); err != nil {
			a.Unlock()
			return Message{}, false, err
		}
		m, ok, wake, err := b.Receive(run, from, d, wait)
		a.Unlock()
		switch {
		case err != nil:
			return Message{}, false, err
		case ok || !wait:
			return m, ok, nil
		}
		stop, stopErr := a.Stopping()
		select {
		case <-wake:
		case <-ctx.Done():
			return Message{}, false, ctx.Err()
		case <-stop:
			return Message{}, false, stopErr
		}
	}
}

// CheckSend says why run's seq cannot send a payload of n bytes to run
// to, or nil; tooLarge is the error a payload over record.MaxMessageSize
// wraps.
func CheckSend(run string, seq uint64, to string, n int, tooLarge error) error {
	if err := record.CheckRunID(to); err != nil {
		return fmt.Errorf("engine: run %q seq %d: send to %q: %w", run, seq, to, err)
	}
	if n > record.MaxMessageSize {
		return fmt.Errorf("%w: run %q seq %d: a payload of %d bytes to %q, the limit is %d (engine.MaxMessageSize)",
			tooLarge, run, seq, n, to, record.MaxMessageSize)
	}
	return nil
}

// Takes says why run to takes no message, or nil: deleted (errDeleted
// wrapped), or ended, its status (printed in errEnded's text; nil while
// it is active, or while the store has no run to, which a message may
// precede).
func Takes(to string, deleted bool, ended any, errDeleted, errEnded error) error {
	if deleted {
		return fmt.Errorf("%w: run %q", errDeleted, to)
	}
	if ended != nil {
		return fmt.Errorf("%w: run %q is %v: it takes no messages", errEnded, to, ended)
	}
	return nil
}
