// Package settle is the engine's Resolve family's logic (docs/DESIGN.md,
// "The engine's API, section by section", "Settling an action in doubt"):
// which in-doubt action a Resolve names. An action with a default key is
// named by its tool and sanitized args among the atom's default-key calls
// (contract v1): exactly one of them must be in doubt. An InDoubtError
// names its action exactly, which must still be in doubt. The ledger
// records the outcome; package engine checks the atom, conducts the
// ledger call and implements nothing for this package: it hands it the
// candidates and the ledger.
//
// # The interface
//
// What the engine calls, whole:
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
//
// # Caveats
//
// The ledger may change between the check and the Resolve's record: the
// ledger's own Resolve refuses an action no longer in doubt.
package settle
