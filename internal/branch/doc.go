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
//		Committed(c *Commit[P])     // the work after c is applied (snapshots, checkpoints due)
//	}
//
// and calls, in a branch's life:
//
//	Check(run, name, reads)             // Branch's arguments, before any lock
//	Begin(ctx, atom, name, reads, window, errs) // under the run's lock once no record is being written: Start, the frame, the Set, Open
//	Start(state, errs)                  // the run may branch (its State, the engine's sentinels)
//	NewSet[P](run, tail, window)        // the first branch of a run
//	(*Set).Open(name, base, reads, errs) // a live branch; Failed, or errs.AtomInProgress if the name is taken
//	(*Set).Conflict(b, writes)          // the conflict rule at Commit: *Conflict or nil
//	(*Set).Bound(deltaBound, limit)     // the frame's size bound after it, or wait
//	(*Set).Enqueue(b, writes, head, bound, lastSeq, payload) // its record was appended
//	(*Set).Publish(core, lastSeq)       // apply every durable commit in seq order
//	(*Set).Fail(c, err, core)           // the log failed c's record: c and all after it fail
//	(*Set).End(b, lastSeq)              // Fail or a conflict: the branch is over
//	(*Set).Idle()                       // no branch in flight: the run drops its Set
//	(*Set).Len()                        // the branches in flight (nil: 0), RunInfo.Branches
//	(*Set).RefuseBegin(errs)            // Begin's refusal while the run holds its Set (nil: none)
//	(*Branch).Ext()                     // the record's extension naming base, name, reads
//	WithKey(intent, b, index)           // a call's default key: the branch's, or (b nil) the run's
//	OtherKey(run, name, key)            // key is another branch's default key
//	Conflict.Describe(run, name, base)  // the text of engine.ConflictError
//
// A branch's Commit is Conduct, and its Fail is Fail, over the engine's
// Atom: the run's Core, plus the steps only the engine can take. Every
// decision (the order of the checks, the refusals and their errors, the
// conflict ending the branch, the Set the run keeps) is the package's;
// the engine's errors come in through Errors (its sentinels, and its
// ConflictError made from a Conflict):
//
//	type Atom[P any] interface {
//		Core[P]
//		Encode(have int) (n int, err error)         // the record's body with the n actions held now, unless n == have
//		Lock() (*Set[P], Now)                       // the run's lock; its Set and what the run and the atom say under it
//		Unlock(s *Set[P])                           // s is the run's Set from now on (nil: none); the lock released
//		CheckLocked() error                         // the run's frame built, or why the run takes no atom
//		TailLocked() Tail                           // the run's newest record and its frame's size bound
//		CanApplyLocked() error                      // the delta against the run's frame
//		FrameBoundLocked(seq uint64) (int64, error) // the frame's exact size after the delta
//		AppendLocked(seq uint64, prev chain.Hash, bound int64) (P, chain.Hash, error) // seal, link, append, atom done
//		EndLocked(reason string, fail bool)         // the atom done without a commit (a Fail, or a conflict), observed
//		Wait(c *Commit[P]) error                    // the log's outcome on c's record
//		FailLocked(c *Commit[P], err error) error   // the error c fails with, the log's failure recorded
//	}
//
//	Conduct(ctx, atom, b, writes, deltaBound, limit, errs) // encode, check, enqueue in seq order, wait, publish or fail
//	Fail(atom, b, reason, errs)                             // the branch over without a record
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
