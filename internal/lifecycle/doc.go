// Package lifecycle decides a run's end (docs/DESIGN.md, "The engine's
// API, section by section", Lifecycle and forks): the names of the
// statuses, the checks of an End's arguments and of the run's state, and
// the end record's bytes, its chain link over the stored (in an encrypted
// store sealed) result.
//
// # The interface to the engine
//
// None beyond values: the engine hands Check the arguments, Endable a
// State read under the run's lock with its sentinels (Errors), and Record
// the store's Hasher and Sealer (nil for a plaintext store); it appends
// the record, and publishes the End Record returned once it is durable.
// The run's end state is this package's End, held by the engine under the
// run's lock (Run.mu.end; nil while active): its status, time, result,
// link and stored result (RowResult: what CHECKPOINT's row holds), and
// the run's last link with it (ChainHead).
//
// # Guarantees
//
//   - Check refuses a status that is not final and a result over
//     MaxResult (wrapping the engine's ErrTooLarge) before anything is
//     written.
//   - Endable refuses a run whose end would break a rule (broken, ended
//     or ending, an atom, a rollback or branches in flight), naming it.
//   - Record links the end over the bytes the record stores: the chain
//     verifies an encrypted store's end without its keys.
//   - An End is immutable once set; it holds its own copy of the result.
package lifecycle
