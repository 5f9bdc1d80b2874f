// Package branch holds the branches of a run: several atoms of one run in
// flight at once, with optimistic concurrency (engine/doc.go, "Branches").
// It knows the rules and the bookkeeping: which branches are live, the
// commits whose records are in the log and not yet applied, the write sets
// of the atoms after the oldest base a branch may still have (the conflict
// window), the conflict rule, and the order in which commits are applied
// or failed, and the steps of a branch's commit in their order (Conduct).
// It writes nothing and reads no log: the engine's adapter of a commit
// (engine/branch.go's branchAtom) encodes and appends each branch's
// record, and applies each commit to the run's state when the Set hands
// it over.
//
// # The interface with the engine
//
// A run holds one *Set[P] (P: the engine's payload of a commit: its
// record, its delta, what it holds until applied) from its first Branch
// until no branch is in flight, and calls it only with the run's lock
// held. The engine implements Core over one run:
//
//	type Core[P any] interface {
//		Durable(c *Commit[P]) bool  // c's record is durable; sets c.Pos
//		Apply(c *Commit[P]) error   // apply c to the run's state, in seq order
//		Release(c *Commit[P])       // c is settled: drop what the engine held for it
//	}
//
// and calls, in a branch's life:
//
//	Check(run, name, reads)             // Branch's arguments, before any lock
//	Start(state, errs)                  // the run may branch (its State, the engine's sentinels)
//	NewSet[P](tail, window)             // the first branch of a run
//	(*Set).Begin(name, base, reads)     // a live branch, nil if the name is taken
//	(*Set).Conflict(b, writes)          // the conflict rule at Commit: *Conflict or nil
//	(*Set).Bound(deltaBound, limit)     // the frame's size bound after it, or wait
//	(*Set).Enqueue(b, writes, head, bound, lastSeq, payload) // its record was appended
//	(*Set).Publish(core, lastSeq)       // apply every durable commit in seq order
//	(*Set).Fail(c, err, core)           // the log failed c's record: c and all after it fail
//	(*Set).End(b, lastSeq)              // Fail or a conflict: the branch is over
//	(*Set).Idle()                       // no branch in flight: the run drops its Set
//	OtherKey(run, name, key)            // key is another branch's default key
//
// A branch's Commit is Conduct over the engine's Atom (the run's Core,
// plus the steps only the engine can take):
//
//	type Atom[P any] interface {
//		Core[P]
//		Encode() error                                  // the record's body, with the actions held now
//		Lock() *Set[P]                                  // the run's lock, and its Set
//		Unlock()                                        // drops an Idle Set, releases the lock
//		ReadyLocked(s *Set[P]) (wait <-chan struct{}, stale bool, err error) // may it take a seq now?
//		CheckLocked(c *Conflict) error                  // the run, the conflict found, the delta
//		FrameBoundLocked(seq uint64) (int64, error)     // the frame's exact size after the delta
//		AppendLocked(seq uint64, prev chain.Hash, bound int64) (P, chain.Hash, error) // link, append, atom done
//		LastSeqLocked() uint64                          // the run's last seq applied
//		Wait(c *Commit[P]) error                        // the log's outcome on c's record
//		FailLocked(c *Commit[P], err error) error       // the error c fails with
//	}
//
//	Conduct(ctx, atom, b, writes, deltaBound, limit) // encode, check, enqueue in seq order, wait, publish or fail
//
// Durability: Enqueue is called after the record is in the log's queue;
// Publish applies a commit only once Core.Durable says its record is
// durable and every commit before it is applied, so the run's state only
// ever shows a durable prefix of its records. A record that failed in the
// log fails every commit queued after it (their records are chained to
// it), and the Set then refuses new branches (Failed) until the store is
// reopened.
//
// # Caveats
//
// A Set is not safe for concurrent use: its caller's lock (the run's)
// guards it. A commit's done channel (Commit.Done) is the one thing read
// without that lock.
package branch
