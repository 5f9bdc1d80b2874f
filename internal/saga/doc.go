// Package saga holds the rollback of a run with compensations (a saga):
// which certified actions a rollback to an earlier seq undoes and in what
// order (Plan), the rollback record it writes before the first
// compensation runs (Record), the pending rollback that record starts
// (Pending), and the replay of that record after a restart (Replay).
// It writes nothing and runs nothing: package engine conducts it
// (engine/rollback.go): it appends the record and waits for its fsync,
// runs each compensation through the ledger as an action of the completing
// atom, and commits that atom; docs/DESIGN.md, "Compensation and
// rollback", has the rules and the crash safety of each step.
//
// # The interface with the engine
//
// Planning reads the run's history through Store, which the engine
// implements over one run (engine/rollback_plan.go):
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
//
// The ledger must be loaded before Plan is called; Store reads only what
// is durable. The engine calls, in a rollback's life:
//
//	Plan(ctx, store, run, to, seq, inflight) // what to undo, newest first; writes nothing
//	NotUndone(undo)                          // the actions without a compensation
//	Record(sealer, run, seq, to, head, started, undo) // the record's bytes
//	NewPending(rec, seq, to, head, undo, pin)         // pending once rec is durable
//	Replay(rec, lastSeq, head, pending)      // a rollback record found in the log
//
// The run holds its *Pending (Run.mu.rollback) from the record's fsync to
// the completing atom's, under the run's lock; a Pending is immutable.
//
// # Caveats
//
// Plan reads every atom it rolls back and the log from the target's atom
// to its end: a rollback far back in a long run costs a read of that much
// log. Its result is bounded by record.MaxRollbackUndo (*TooManyError).
package saga
