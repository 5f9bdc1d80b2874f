// Package settle is the engine's Resolve family's logic (docs/DESIGN.md,
// "The engine's API, section by section", "Settling an action in doubt"):
// which in-doubt action a Resolve names, and the settling's steps in
// their order. An action with a default key is named by its tool and
// sanitized args among the atom's default-key calls (contract v1):
// exactly one of them must be in doubt. An InDoubtError names its action
// exactly, which must still be in doubt. The ledger records the outcome;
// package engine's atom checks the call, observes and makes the ledger
// call (engine/resolve.go's resolvingAtom is the Atom).
//
// # The interface
//
// What the engine calls, whole:
//
//	Resolve(ctx, atom, act, result, failed, errs) error        // Atom.Resolve, ResolveFailed (failed set)
//	ResolveInDoubt(ctx, atom, e, result, failed, errs) error   // Atom.ResolveInDoubt, ResolveInDoubtFailed
//
// over the engine's atom:
//
//	type Atom interface {
//		ID() string; Seq() uint64                         // the run's name, the atom's seq
//		Prepare(ctx, act) (*ledger.Intent, error)         // Do's checks: the intent at the next default-key index
//		Last() uint32                                     // the highest default-key index a call may have had
//		Intent(ctx, in, i) (*ledger.Intent, error)        // in's action at default-key index i, from the lineage
//		Other(key string) bool                            // key is another branch's
//		Ready(ctx) error                                  // the store open, the atom running, the ledger loaded
//		Ledger() *ledger.Ledger
//		WaitInDoubt(ctx, in) error                        // no earlier writer's call of in runs (a failed outcome)
//		Settle(ctx, in, result, failed) error             // the ledger's Resolve or ResolveFailed, observed
//		Done(in, result)                                  // in done in the atom with result
//	}
//
// Both choose the action with
//
//	DefaultKey(run, seq, in, last, intent, l, errs) (*ledger.Intent, error) // the one in-doubt call of in's tool and args
//	Names(e, run, seq, other, errs) error                         // e names an action of this atom
//	InDoubt(e, l, errs) (*ledger.Intent, error)                   // the intent of e's action, still in doubt
//
// intent(i) builds the candidate intent at default-key index i (in's
// action with the key of index i, repeated from the lineage as a Do's
// would be). Errs are the engine's sentinels the refusals wrap.
//
// # Guarantees
//
//   - DefaultKey returns the candidate among indexes 0..last that the
//     ledger holds as an intent without certificate and not in flight; none
//     is a NotInDoubt error (naming the calls checked), two or more an
//     Ambiguous one (naming their keys). It writes nothing.
//   - InDoubt refuses an action the ledger does not hold as in doubt.
//   - A failed outcome is recorded only once no earlier writer's call of
//     the action runs (WaitInDoubt): the agent runs it again on the
//     strength of it. A done one is counted in the atom with a copy of
//     result, once the ledger recorded it.
//
// # Caveats
//
// The ledger may change between the check and the Resolve's record: the
// ledger's own Resolve refuses an action no longer in doubt.
package settle
