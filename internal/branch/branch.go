package branch

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Branch is one branch of a run: what Run.Branch began. Run, Name, Base
// and Reads are immutable.
type Branch struct {
	Run   string // the run's id
	Name  string
	Base  uint64            // the run's last seq when the branch began: the state it reads
	Reads []record.StateKey // declared, sorted, unique; immutable
	// seq is the seq the branch committed at, 0 until then.
	seq atomic.Uint64
}

// Seq is the seq the branch committed at, 0 until its commit is applied.
// Safe for concurrent use.
func (b *Branch) Seq() uint64 { return b.seq.Load() }

// Ext is the extension of the branch's record that names its base, its
// name and its reads (record.ExtTagBase): the atom DAG's edge.
func (b *Branch) Ext() record.AtomExt {
	return record.AtomExt{Tag: record.ExtTagBase, Data: record.AppendBranchBase(nil, &record.BranchBase{Base: b.Base, Branch: b.Name, Reads: b.Reads})}
}

// Check checks the arguments of a branch of run: its name
// (record.CheckBranchName) and its declared reads (at most
// record.MaxBranchReads, each a valid key).
func Check(run, name string, reads []record.StateKey) error {
	if err := record.CheckBranchName(name); err != nil {
		return fmt.Errorf("engine: branch of run %q: %w", run, err)
	}
	if len(reads) > record.MaxBranchReads {
		return fmt.Errorf("engine: branch %q of run %q declares %d reads, at most %d", name, run, len(reads), record.MaxBranchReads)
	}
	for _, k := range reads {
		if err := k.Check(); err != nil {
			return fmt.Errorf("engine: branch %q of run %q: %w", name, run, err)
		}
	}
	return nil
}

// Tail is the run's newest record appended to the log: its seq and head,
// and the size bound of the run's frame after it.
type Tail struct {
	Seq   uint64
	Head  chain.Hash
	Bound int64
}

// Conflict is what the conflict rule found: the atom Seq after the
// branch's base wrote Key, which the branch writes or declared it reads;
// or, with Lost set, the branch's base is older than Seq, the oldest atom
// whose write set the Set still holds.
type Conflict struct {
	Seq  uint64
	Key  record.StateKey
	Lost bool
}

// Describe is the text of the error of branch name of run, based at
// base, that lost to c (engine.ConflictError's).
func (c Conflict) Describe(run, name string, base uint64) string {
	if c.Lost {
		return fmt.Sprintf("engine: conflict: run %q branch %q: its base seq %d is older than the atoms whose writes the run keeps (from seq %d, MaxBranchWindow); branch it again",
			run, name, base, c.Seq)
	}
	return fmt.Sprintf("engine: conflict: run %q branch %q (base seq %d): atom %d, committed after its base, wrote %s; branch it again",
		run, name, base, c.Seq, c.Key)
}

// Commit is one branch's commit from the moment its record is appended
// until it is applied or failed. Seq, Branch and Payload are immutable;
// Durable and Pos are the engine's (Core.Durable sets them), under the
// run's lock.
type Commit[P any] struct {
	Branch  *Branch
	Seq     uint64
	Payload P
	// Durable is set once the commit's record is durable, at Pos.
	Durable bool
	Pos     wal.Pos

	settled bool          // applied or failed; done is closed
	err     error         // set when settled, nil if applied
	done    chan struct{} // closed when settled
}

// Done is closed once the commit is applied or failed (Err says which).
// Safe for concurrent use.
func (c *Commit[P]) Done() <-chan struct{} { return c.done }

// Settled reports whether the commit is applied or failed.
func (c *Commit[P]) Settled() bool { return c.settled }

// Err is the commit's failure, nil if it was applied. Read it after Done
// is closed.
func (c *Commit[P]) Err() error { return c.err }

func (c *Commit[P]) settle(err error) {
	c.settled, c.err = true, err
	close(c.done)
}

// Core is the run's side of the commit pipeline, implemented by the engine
// over one run. The Set calls it with the run's lock held.
type Core[P any] interface {
	// Durable reports whether c's record is durable (then it sets
	// c.Durable and c.Pos): the log synced it, and every directory the
	// store made durable. It does not report a failure: the commit's own
	// goroutine does (Fail).
	Durable(c *Commit[P]) bool
	// Apply applies c, whose record and every record before it is
	// durable, to the run's state in memory (its frame, last seq, head);
	// an error means the state can no longer take it, and fails c and
	// every commit after it.
	Apply(c *Commit[P]) error
	// Release drops what the engine held for c until it settled (its hold
	// on the engine checkpoint's replay position), applied or failed.
	Release(c *Commit[P])
	// Committed is the work after c is applied and settled (snapshots,
	// chain checkpoints due), before the next commit is applied.
	Committed(c *Commit[P])
}

// atomWrites is an atom's write set.
type atomWrites struct {
	seq  uint64
	keys []record.StateKey // sorted, unique
}

// Set is a run's branches in flight and their commit pipeline. The run
// holds one from its first branch until none is in flight (Idle), so a run
// without branches keeps none of it. Not safe for concurrent use: the
// run's lock guards it.
type Set[P any] struct {
	run    string // the run's id
	window int    // the write sets kept at most (engine.MaxBranchWindow)
	// live holds the branches begun and not yet committing, by name.
	live map[string]*Branch
	// queue holds the commits whose record is appended and not yet
	// applied to the run's state, ascending by seq (lastSeq+1 ...).
	queue []*Commit[P]
	// tail is the run's newest record appended: the last of queue, or the
	// run's last seq and head when it is empty.
	tail Tail
	// writes holds the write sets of every atom after winBase up to
	// tail.Seq, ascending by seq: what a branch with base >= winBase is
	// checked against.
	winBase uint64
	writes  []atomWrites
	// failed is the log's error once a branch's record failed: the
	// records chained to it cannot be durable either.
	failed error
}

// NewSet returns the Set of run whose newest record is tail (its last
// seq, head and frame size bound), keeping at most window write sets.
func NewSet[P any](run string, tail Tail, window int) *Set[P] {
	return &Set[P]{run: run, live: map[string]*Branch{}, tail: tail, winBase: tail.Seq, window: window}
}

// Open is Begin for Run.Branch: the Set's Failed error, or
// errs.AtomInProgress if a branch of that name is in flight.
func (s *Set[P]) Open(name string, base uint64, reads []record.StateKey, errs Errors) (*Branch, error) {
	if s.failed != nil {
		return nil, s.failed
	}
	if b := s.Begin(name, base, reads); b != nil {
		return b, nil
	}
	return nil, fmt.Errorf("%w: run %q branch %q is in flight", errs.AtomInProgress, s.run, name)
}

// Begin begins the branch name at base (the run's last seq), which
// declares reads (checked by Check): nil if a branch of that name is in
// flight, live or committing.
func (s *Set[P]) Begin(name string, base uint64, reads []record.StateKey) *Branch {
	if _, ok := s.live[name]; ok || slices.ContainsFunc(s.queue, func(c *Commit[P]) bool { return c.Branch.Name == name }) {
		return nil
	}
	var sorted []record.StateKey
	if len(reads) > 0 {
		sorted = record.SortStateKeys(slices.Clone(reads))
	}
	b := &Branch{Run: s.run, Name: name, Base: base, Reads: sorted}
	s.live[name] = b
	return b
}

// Failed is the log's error that failed a branch's record, nil if none:
// the run takes no branch after it.
func (s *Set[P]) Failed() error { return s.failed }

// Live reports whether b is live: begun, and neither committing nor over.
func (s *Set[P]) Live(b *Branch) bool { return s.live[b.Name] == b }

// Len is the number of branches in flight, committing ones included; 0
// for a nil Set (a run without branches).
func (s *Set[P]) Len() int {
	if s == nil {
		return 0
	}
	return len(s.live) + len(s.queue)
}

// RefuseBegin is the refusal of an atom of Begin while the run holds s
// (errs.AtomInProgress): Begin and branches exclude each other, and the
// run holds its Set while any branch is in flight. nil if s is nil.
func (s *Set[P]) RefuseBegin(errs Errors) error {
	if s == nil {
		return nil
	}
	return fmt.Errorf("%w: run %q has %d branches in flight: Begin waits for them to commit or fail", errs.AtomInProgress, s.run, s.Len())
}

// Tail is the run's newest record appended.
func (s *Set[P]) Tail() Tail { return s.tail }

// Idle reports whether no branch is in flight and none failed: the run
// may drop the Set.
func (s *Set[P]) Idle() bool {
	return len(s.live) == 0 && len(s.queue) == 0 && s.failed == nil
}

// kept is s unless it is nil or Idle: what the run keeps as its Set.
func (s *Set[P]) kept() *Set[P] {
	if s == nil || s.Idle() {
		return nil
	}
	return s
}

// Conflict is the conflict rule: the conflict of branch b, which writes
// writes (sorted, unique), with the atoms after its base, or nil.
func (s *Set[P]) Conflict(b *Branch, writes []record.StateKey) *Conflict {
	if b.Base < s.winBase {
		return &Conflict{Seq: s.winBase + 1, Lost: true}
	}
	touched := writes
	if len(b.Reads) > 0 {
		touched = record.SortStateKeys(append(slices.Clone(writes), b.Reads...))
	}
	for _, w := range s.writes {
		if w.seq <= b.Base {
			continue
		}
		if k, ok := record.Overlap(w.keys, touched); ok {
			return &Conflict{Seq: w.seq, Key: k}
		}
	}
	return nil
}

// Bound returns the size bound of the run's frame after a delta whose own
// bound is delta, applied after every commit queued: when it passes limit
// while commits are queued, wait is the newest one's Done, to wait on
// before trying again (the exact size comes from the frame they leave).
func (s *Set[P]) Bound(delta, limit int64) (bound int64, wait <-chan struct{}) {
	bound = s.tail.Bound + delta
	if bound > limit && len(s.queue) > 0 {
		return bound, s.queue[len(s.queue)-1].done
	}
	return bound, nil
}

// Enqueue records that live branch b's record, which writes writes, is in
// the log's queue at seq Tail().Seq+1 with head head, leaving the frame's
// size bound at bound; lastSeq is the run's last seq applied. The branch
// is committing from then on.
func (s *Set[P]) Enqueue(b *Branch, writes []record.StateKey, head chain.Hash, bound int64, lastSeq uint64, payload P) *Commit[P] {
	seq := s.tail.Seq + 1
	c := &Commit[P]{Branch: b, Seq: seq, Payload: payload, done: make(chan struct{})}
	delete(s.live, b.Name)
	s.queue = append(s.queue, c)
	s.writes = append(s.writes, atomWrites{seq: seq, keys: writes})
	s.tail = Tail{Seq: seq, Head: head, Bound: bound}
	s.trim(lastSeq)
	return c
}

// End ends live branch b without a commit (Fail, or a conflict): its name
// is free again. lastSeq is the run's last seq applied.
func (s *Set[P]) End(b *Branch, lastSeq uint64) {
	delete(s.live, b.Name)
	s.trim(lastSeq)
}

// Publish applies, in seq order, every queued commit that is durable and
// whose predecessors are applied; lastSeq is the run's last seq applied
// before. A commit that does not apply fails with every commit after it.
func (s *Set[P]) Publish(core Core[P], lastSeq uint64) {
	for len(s.queue) > 0 && (s.queue[0].Durable || core.Durable(s.queue[0])) {
		c := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		c.Branch.seq.Store(c.Seq)
		err := core.Apply(c)
		core.Release(c)
		c.settle(err)
		if err != nil {
			s.Fail(nil, err, core)
			return
		}
		lastSeq = c.Seq
		core.Committed(c)
	}
	s.trim(lastSeq)
}

// Fail fails c (nil: the first queued) and every commit queued after it:
// their records are chained to c's, which is not durable (the log failed),
// so theirs are not either. The Set keeps err as Failed.
func (s *Set[P]) Fail(c *Commit[P], err error, core Core[P]) {
	if s.failed == nil {
		s.failed = err
	}
	i := 0
	if c != nil {
		i = max(slices.Index(s.queue, c), 0)
	}
	for _, q := range s.queue[i:] {
		if !q.settled {
			core.Release(q)
			q.settle(err)
		}
	}
	s.queue = s.queue[:i]
}

// trim drops the write sets no branch in flight or to come needs: those
// at or below every live branch's base and the run's last seq, and the
// oldest beyond the window.
func (s *Set[P]) trim(lastSeq uint64) {
	floor := lastSeq
	for _, b := range s.live {
		floor = min(floor, b.Base)
	}
	i := 0
	for i < len(s.writes) && (s.writes[i].seq <= floor || len(s.writes)-i > s.window) {
		s.winBase = s.writes[i].seq
		i++
	}
	if i > 0 {
		s.writes = slices.Delete(s.writes, 0, i)
	}
	s.winBase = max(s.winBase, min(floor, s.tail.Seq))
}

// WithKey returns in with call index's default key: branch b's
// (ledger.BranchKey), or with b nil (an atom of Begin) the run's
// (ledger.Intent.WithDefaultKey).
func WithKey(in *ledger.Intent, b *Branch, index uint32) *ledger.Intent {
	if b == nil {
		return in.WithDefaultKey(index)
	}
	return in.WithKey(ledger.BranchKey(b.Run, b.Name, int(index)), index)
}

// OtherKey reports whether key is a default idempotency key
// (ledger.BranchKey) of a branch of run other than the branch name.
func OtherKey(run, name, key string) bool {
	prefix := "ck1b-" + strconv.Itoa(len(run)) + ":" + run + ":" // BranchKey's of this run
	mine := ledger.BranchKey(run, name, 0)
	return strings.HasPrefix(key, prefix) && !strings.HasPrefix(key, mine[:len(mine)-1])
}

// Errors are the engine's sentinels that the refusals of Start, Open,
// Conduct and Fail match (errors.Is), so that their names and texts stay
// the engine's; Conflict makes the engine's error of a branch that lost
// to c.
type Errors struct {
	AtomInProgress, RunEnded, AtomDone, InvalidDelta error
	Conflict                                         func(b *Branch, c *Conflict) error
}

// State is what Start checks of a run, read under the run's lock.
type State struct {
	Run         string
	Running     uint64 // the seq of the atom of Begin running, 0 if none
	Interrupted uint64 // the seq of the atom a crash interrupted, until begun again; 0 if none
	Ended       bool   // the run ended, or its end is being written
	Rollback    error  // the engine's refusal while a rollback of the run is pending; nil if none
}

// Start checks that run st may begin a branch: not while an atom of Begin
// runs or a crash's interrupted atom waits to be begun again
// (errs.AtomInProgress), once the run ended (errs.RunEnded), nor while a
// rollback is pending (st.Rollback).
func Start(st State, errs Errors) error {
	switch {
	case st.Running != 0:
		return fmt.Errorf("%w: run %q seq %d (Begin's atom): commit or fail it before branching", errs.AtomInProgress, st.Run, st.Running)
	case st.Interrupted != 0:
		return fmt.Errorf("%w: run %q seq %d was interrupted by a crash: Begin it again, and commit or fail it, before branching",
			errs.AtomInProgress, st.Run, st.Interrupted)
	case st.Ended:
		return fmt.Errorf("%w: run %q takes no more atoms", errs.RunEnded, st.Run)
	case st.Rollback != nil:
		return st.Rollback
	}
	return nil
}
