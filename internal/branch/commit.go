package branch

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

// Atom is one branch's commit as Conduct and Fail drive it: the steps
// only the engine can take (the record encoded, sealed and appended, the
// log's outcome, the run's lock and state) and the run as its Set's Core.
// The methods ending in Locked are called with the run's lock held
// (Lock); the others without it.
type Atom[P any] interface {
	Core[P]
	// Encode returns n, the number of actions the atom holds now, and,
	// unless n is have (the number its body was last encoded with),
	// encodes and compresses the record's body with them (the body
	// depends neither on the seq nor on the record before it).
	Encode(have int) (n int, err error)
	// Lock takes the run's lock and returns the run's Set (nil when no
	// branch is in flight) and what Conduct reads of the run and the
	// atom under it; Unlock makes s the run's Set (nil: none) and
	// releases the lock.
	Lock() (*Set[P], Now)
	Unlock(s *Set[P])
	// CheckLocked builds the run's frame if it is not in memory, or
	// returns why the run takes no atom (deleted, its state untrusted).
	CheckLocked() error
	// TailLocked is the run's newest record: its last seq and head, and
	// the size bound of its frame (built: CheckLocked).
	TailLocked() Tail
	// CanApplyLocked checks the delta against the run's frame.
	CanApplyLocked() error
	// FrameBoundLocked returns the exact size of the run's frame after
	// the delta at seq, or the error of a frame past the limit.
	FrameBoundLocked(seq uint64) (int64, error)
	// AppendLocked links the record as seq after prev (the run's newest
	// record appended), appends it to the log's queue and marks the atom
	// done: the commit's payload and the record's head. An error is the
	// log's at once (the record refused, the log failed): nothing is
	// chained to the record.
	AppendLocked(seq uint64, prev chain.Hash, bound int64) (P, chain.Hash, error)
	// EndLocked marks the atom done without a commit, its branch over:
	// a Fail (fail, with the caller's reason) or a conflict (reason is
	// its error's text).
	EndLocked(reason string, fail bool)
	// Wait waits for the log's outcome on c's record: nil once it and
	// every directory of the store is durable, else the log's error.
	Wait(c *Commit[P]) error
	// FailLocked returns the error c fails with after Wait's err, the
	// log's failure recorded.
	FailLocked(c *Commit[P], err error) error
}

// Now is what Begin, Conduct and Fail read of the run and the atom under
// the run's lock (Atom.Lock).
type Now struct {
	State        // what Start checks
	Broken error // set once the run's state in memory is no longer trusted
	// Writing is set while a record of the run (a wait's, an event's, a
	// wake's) is being written: closed once it is, and a branch takes its
	// seq after it.
	Writing <-chan struct{}
	LastSeq uint64 // the run's last seq applied
	Actions int    // the actions the atom holds
	Done    bool   // the atom is done: committed, failed or over
}

// Begin begins branch name of a run, which declares reads (checked by
// Check), once no record of the run is being written (ctx ends the wait):
// the run checked (Start, then Atom.CheckLocked), its Set made if it has
// none (keeping at most window write sets), then Set.Open. a is an atom
// of no branch yet: only its Lock, Unlock, CheckLocked and TailLocked are
// called.
func Begin[P any](ctx context.Context, a Atom[P], name string, reads []record.StateKey, window int, errs Errors) (*Branch, error) {
	for {
		s, st := a.Lock()
		if st.Writing == nil {
			b, err := begin(a, &s, st, name, reads, window, errs)
			a.Unlock(s)
			return b, err
		}
		a.Unlock(s)
		select {
		case <-st.Writing:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// begin is Begin's step under the run's lock; *s is the run's Set.
func begin[P any](a Atom[P], s **Set[P], st Now, name string, reads []record.StateKey, window int, errs Errors) (*Branch, error) {
	if err := Start(st.State, errs); err != nil {
		return nil, err
	}
	if err := a.CheckLocked(); err != nil {
		return nil, err
	}
	if *s == nil {
		*s = NewSet[P](st.Run, a.TailLocked(), window)
	}
	return (*s).Open(name, st.LastSeq, reads, errs)
}

// Conduct commits branch b, whose delta writes writes and grows the frame
// by at most deltaBound bytes, and returns its commit once applied (or
// failed: its error). It encodes the record's body, then, under the run's
// lock, checks the atom (not done: errs.AtomDone), the run, the conflict
// rule (Set.Conflict: errs.Conflict, the branch over), the delta
// (errs.InvalidDelta) and the frame's size against limit (waiting for the
// commits queued before it when the bound passes it), appends the record
// linked to the run's newest one and enqueues it (Set.Enqueue), so the
// run's records enter the log in seq order. The branch is over from then
// on, as after a conflict. With the run's lock released it waits for the
// log, then publishes every durable commit in seq order (Set.Publish) or
// fails the commit and those after it (Set.Fail). ctx counts until the
// record is appended: from then on its outcome is the log's. The commit
// returned is nil if no record was appended.
func Conduct[P any](ctx context.Context, a Atom[P], b *Branch, writes []record.StateKey, deltaBound, limit int64, errs Errors) (*Commit[P], error) {
	var c *Commit[P]
	encoded := -1
	for c == nil {
		var err error
		if encoded, err = a.Encode(encoded); err != nil {
			return nil, err
		}
		var wait <-chan struct{}
		if c, wait, err = enqueue(a, b, encoded, writes, deltaBound, limit, errs); err != nil {
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
		s, st := a.Lock()
		switch {
		case c.Settled():
		case err != nil:
			s.Fail(c, a.FailLocked(c, err), a)
		default:
			s.Publish(a, st.LastSeq)
		}
		a.Unlock(s.kept())
	}
	<-c.Done()
	return c, c.Err()
}

// enqueue is Conduct's step under the run's lock: the commit enqueued; or
// a channel to wait on before trying again; or nothing, to encode again
// (the atom holds more actions than the encoded body's).
func enqueue[P any](a Atom[P], b *Branch, encoded int, writes []record.StateKey, deltaBound, limit int64, errs Errors) (*Commit[P], <-chan struct{}, error) {
	s, st := a.Lock()
	defer func() { a.Unlock(s.kept()) }()
	if st.Writing != nil {
		return nil, st.Writing, nil
	}
	if st.Done || s == nil || !s.Live(b) {
		return nil, nil, fmt.Errorf("%w: run %q branch %q", errs.AtomDone, b.Run, b.Name)
	}
	if st.Actions != encoded {
		return nil, nil, nil
	}
	if err := s.Failed(); err != nil {
		return nil, nil, err
	}
	if st.Broken != nil {
		return nil, nil, st.Broken
	}
	if err := a.CheckLocked(); err != nil {
		return nil, nil, err
	}
	if c := s.Conflict(b, writes); c != nil {
		err := errs.Conflict(b, c)
		s.End(b, st.LastSeq)
		a.EndLocked(err.Error(), false)
		return nil, nil, err
	}
	if err := a.CanApplyLocked(); err != nil {
		return nil, nil, fmt.Errorf("%w: run %q branch %q: %v", errs.InvalidDelta, b.Run, b.Name, err)
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
		var err error
		if bound, err = a.FrameBoundLocked(tail.Seq + 1); err != nil {
			return nil, nil, err
		}
	}
	p, head, err := a.AppendLocked(tail.Seq+1, tail.Head, bound)
	if err != nil {
		return nil, nil, err
	}
	return s.Enqueue(b, writes, head, bound, st.LastSeq, p), nil, nil
}

// Fail is a branch's Fail: its branch over without a seq or a record, its
// name free again (errs.AtomDone if the branch is not live).
func Fail[P any](a Atom[P], b *Branch, reason string, errs Errors) error {
	s, st := a.Lock()
	defer func() { a.Unlock(s.kept()) }()
	if s == nil || !s.Live(b) {
		return fmt.Errorf("%w: run %q branch %q", errs.AtomDone, b.Run, b.Name)
	}
	s.End(b, st.LastSeq)
	a.EndLocked(reason, true)
	return nil
}
