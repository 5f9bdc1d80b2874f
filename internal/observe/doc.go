// Package observe is the plumbing of the engine's observation hook
// (engine.Options.Observer, docs/DESIGN.md "Observation"): how a Do or
// Resolve call ended, as the outcome the engine reports (ActionOutcome's
// values and names), decided from whether exec ran and the ledger's
// error. The Observer interfaces and events are the engine's public API
// (engine/observer.go); this package knows nothing of them but their
// numbering.
//
// # The interface
//
// What the engine calls, whole:
//
//	OfDo(ran, err) Outcome     // how a Do ended
//	OfResolve(o, err) Outcome  // o, or Failed when err != nil
//	Outcome.String() string    // ActionOutcome's names
//
// # Guarantees
//
// The Outcome values are engine.ActionOutcome's, in its order
// (engine/observer.go checks the two at compile time). OfDo: no error is
// Executed if exec ran, else Cached; ledger.ErrInDoubt is InDoubt; a
// retry policy's give-up (ledger.ErrGaveUp) is GaveUp; any other error
// Failed.
//
// # Caveats
//
// None: the package is stateless.
package observe
