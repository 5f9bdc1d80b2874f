// Package saga holds the rollback of a run with compensations (a saga):
// which certified actions a rollback to an earlier seq undoes and in what
// order (Plan), the rollback record it writes before the first
// compensation runs (Record), the pending rollback that record starts
// (Pending) and where the run keeps it (Slot), and the replay of that
// record after a restart (Replay).
// Start checks that a run may begin a rollback, and Compensation builds
// each compensation's intent and chooses its exec. Conduct drives a
// rollback through those steps in their order over the completing atom
// (Atom); it writes nothing and runs nothing itself: the engine's Atom
// (engine/rollback.go) appends the record and waits for its fsync, runs
// each compensation through the ledger as an action of the completing
// atom, and commits that atom; docs/DESIGN.md, "Compensation
// and rollback", has the rules and the crash safety of each step.
//
// # The interface with the engine
//
// Planning reads the run's history through Store:
//
//	type Store interface {
//		Lookup(fp ledger.Fingerprint) (ledger.Entry, bool)           // the ledger's entry
//		Intent(loc ledger.Loc) (*ledger.Intent, error)               // the intent record at loc
//		Certificate(loc ledger.Loc) (*ledger.Certificate, error)     // the certificate at loc
//		Actions(ctx context.Context, seq uint64) ([]ledger.Fingerprint, error) // committed atom seq's actions
//		Certified(ctx context.Context, to uint64) ([]Certified, error)  // certificates after atom to
//	}
//
// ScanCertified is Certified over a cursor of the log the engine opens.
// The ledger must be loaded before Plan is called; Store reads only what
// is durable. Replay is what recovery calls of a rollback record found in
// the log:
//
//	Replay(rec, lastSeq, head, pending) // a pending rollback, or why rec contradicts the run
//
// The rollback itself: Run.Rollback reads the run's State under its
// lock and checks it,
//
//	Start(state, to, fresh, errs)  // the engine's sentinels in errs (Errors)
//
// begins the completing atom at LastSeq+1, then calls
//
//	Conduct(ctx, atom, to, pending, inflight, allowNotUndone, errs) // plan or resume, compensate, complete
//
// over the engine's one adapter of that atom and its run
// (engine/rollback.go's rollbackAtom), a runview.Run (its ChainHead is
// the head the rollback begins from, its StateAt the target state), a
// Store, and:
//
//	type Atom interface {
//		runview.Run
//		Store
//		Seq() uint64                                         // the completing atom's
//		Sealer() *record.Sealer                              // the store's, nil if not encrypted
//		Append(ctx context.Context, rec []byte) (pin uint64, err error) // the record, durable, the replay floor pinned
//		Pend(p *Pending)                                     // p pending in the run, the atom chained over p.Seal
//		Compensate(ctx context.Context, u *record.Undo) ([]byte, error) // through the ledger, Do's rules
//		Complete(ctx context.Context, f *frame.Frame) error  // commit the atom: the frame replaced by f
//	}
//
// Conduct plans with Plan, builds the record with Record and its
// Pending with NewPending; the engine's Compensate builds the
// compensation's intent and exec with
//
//	Compensation(ledger, u, run, seq, index, execFor) // the intent, and execFor's exec unless certified
//
// and runs it as Do does.
//
// The run keeps its pending rollback in a Slot (Run.mu.rollback), under
// the run's lock, from the record's fsync to the completing atom's; a
// Pending is immutable. The engine calls, the run's lock held:
//
//	slot.Pend(p)                          // Atom.Pend: the record is durable
//	slot.Complete(seq)                    // the atom at seq applied: the Pin to release
//	slot.Replay(rec, lastSeq, head, pin)  // recovery's replay of a rollback record
//	slot.Refuse(run, errs)                // Begin's and a branch's refusal while pending
//	slot.Target(), slot.Pending()         // PendingRollback, End's and Start's checks
//
// # Caveats
//
// Plan reads every atom it rolls back and the log from the target's atom
// to its end: a rollback far back in a long run costs a read of that much
// log. Its result is bounded by record.MaxRollbackUndo (*TooManyError).
package saga
