// Package limits holds the engine's size limits and their checks, made
// before anything is appended (docs/DESIGN.md, "Guarantees"): the one
// size limit MaxSize of a record's body and of a run's encoded frame, the
// bound of an action's result a store's segments allow, the error of a
// record or frame past the limit, and a run's frame-size bound (Frame),
// kept as its atoms commit so that a commit measures its frame exactly
// only near the limit.
//
// # The interface to the engine
//
// None beyond values: the engine holds a Frame per run under the run's
// lock (Run.mu.size) and hands each check the run's frame and last seq
// and its sentinels (Errors); the public constants stay the engine's
// (engine.MaxSize, engine.MaxResultSize), checked equal to these at
// compile time.
//
//	bound, err := size.Check(frame, lastSeq, delta, run, seq, errs) // before the append
//	size.Note(bound, frame, lastSeq)                                // once applied
//
// # Guarantees
//
//   - Check refuses, with an error matching Errors.TooLarge, a delta that
//     would grow the frame past MaxSize, and never refuses one that would
//     not: past the cheap bound (the last exact size, each delta's
//     encoding and 2 bytes an op) the frame after the delta is measured
//     exactly.
//   - A bound is used only for the frame and seq it was measured or noted
//     for; any other pair is measured afresh.
//
// # Caveats
//
// A Frame holds no lock: its methods are called with the run's lock held.
package limits
