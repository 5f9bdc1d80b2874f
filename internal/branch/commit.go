package branch

import (
	"context"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

// Atom is one branch's commit as Conduct drives it: the engine's adapter
// over the atom, its run and the log, and the run as its Set's Core. The
// methods ending in Locked are called with the run's lock held (Lock);
// the others without it.
type Atom[P any] interface {
	Core[P]
	// Encode encodes and compresses the atom's record body (it depends
	// neither on the seq nor on the record before it) with the actions
	// the atom holds now, unless it did so already with as many.
	Encode() error
	// Lock takes the run's lock and returns the run's Set (nil when no
	// branch is in flight); Unlock drops the Set if it is Idle and
	// releases the lock.
	Lock() *Set[P]
	Unlock()
	// ReadyLocked returns a channel to wait on before the atom may take
	// a seq (a record of the run is being written under its write mark);
	// or stale, when the atom recorded an action since Encode; or the
	// error of an atom that is done (s nil, or the branch not Live).
	ReadyLocked(s *Set[P]) (wait <-chan struct{}, stale bool, err error)
	// CheckLocked checks the run (its state in memory sound, its frame
	// built), then c, the conflict rule's finding (nil: none; else its
	// error, the branch ended), then the delta against the run's frame.
	CheckLocked(c *Conflict) error
	// FrameBoundLocked returns the exact size of the run's frame after
	// the delta at seq, or the error of a frame past the limit.
	FrameBoundLocked(seq uint64) (int64, error)
	// AppendLocked links the record as seq after prev (the run's newest
	// record appended), appends it to the log's queue and marks the atom
	// done: the commit's payload and the record's head. An error is the
	// log's at once (the record refused, the log failed): nothing is
	// chained to the record.
	AppendLocked(seq uint64, prev chain.Hash, bound int64) (P, chain.Hash, error)
	// LastSeqLocked is the run's last seq applied.
	LastSeqLocked() uint64
	// Wait waits for the log's outcome on c's record: nil once it and
	// every directory of the store is durable, else the log's error.
	Wait(c *Commit[P]) error
	// FailLocked returns the error c fails with after Wait's err, the
	// log's failure recorded.
	FailLocked(c *Commit[P], err error) error
}

// Conduct commits branch b, whose delta writes writes and grows the frame
// by at most deltaBound bytes, and returns its commit once applied (or
// failed: its error). It encodes the record's body, then, under the run's
// lock, checks the run, the conflict rule (Set.Conflict) and the frame's
// size against limit (waiting for the commits queued before it when the
// bound passes it), appends the record linked to the run's newest one and
// enqueues it (Set.Enqueue), so the run's records enter the log in seq
// order. The branch is over from then on, as after a conflict. With the
// run's lock released it waits for the log, then publishes every durable
// commit in seq order (Set.Publish) or fails the commit and those after
// it (Set.Fail). ctx counts until the record is appended: from then on
// its outcome is the log's. The commit returned is nil if no record was
// appended.
func Conduct[P any](ctx context.Context, a Atom[P], b *Branch, writes []record.StateKey, deltaBound, limit int64) (*Commit[P], error) {
	var c *Commit[P]
	for c == nil {
		if err := a.Encode(); err != nil {
			return nil, err
		}
		var wait <-chan struct{}
		var err error
		if c, wait, err = enqueue(a, b, writes, deltaBound, limit); err != nil {
			return nil, err
		}
		if wait != nil {
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	err := a.Wait(c)
	select {
	case <-c.Done(): // applied (or failed) by the commit of a branch before it
	default:
		s := a.Lock()
		switch {
		case c.Settled():
		case err != nil:
			s.Fail(c, a.FailLocked(c, err), a)
		default:
			s.Publish(a, a.LastSeqLocked())
		}
		a.Unlock()
	}
	<-c.Done()
	return c, c.Err()
}

// enqueue is Conduct's step under the run's lock: the commit enqueued; or
// a channel to wait on before trying again; or nothing, to encode again.
func enqueue[P any](a Atom[P], b *Branch, writes []record.StateKey, deltaBound, limit int64) (*Commit[P], <-chan struct{}, error) {
	s := a.Lock()
	defer a.Unlock()
	wait, stale, err := a.ReadyLocked(s)
	if wait != nil || stale || err != nil {
		return nil, wait, err
	}
	if err := s.Failed(); err != nil {
		return nil, nil, err
	}
	if err := a.CheckLocked(s.Conflict(b, writes)); err != nil {
		return nil, nil, err
	}
	// The commits queued before it wrote none of what it writes (the
	// conflict rule), so it applies to the frame they leave as to the
	// frame published now; only its size waits for them.
	bound, wait := s.Bound(deltaBound, limit)
	if wait != nil {
		return nil, wait, nil
	}
	tail := s.Tail()
	if bound > limit {
		if bound, err = a.FrameBoundLocked(tail.Seq + 1); err != nil {
			return nil, nil, err
		}
	}
	p, head, err := a.AppendLocked(tail.Seq+1, tail.Head, bound)
	if err != nil {
		return nil, nil, err
	}
	return s.Enqueue(b, writes, head, bound, a.LastSeqLocked(), p), nil, nil
}
