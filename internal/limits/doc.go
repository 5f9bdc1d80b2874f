// Package limits holds the engine's size limits and their checks, made
// before anything is appended (docs/DESIGN.md, "Guarantees"): the one
// size limit MaxSize of a record's body and of a run's encoded frame, the
// bound of an action's result a store's segments allow, the error of a
// record or frame past the limit, and the check of a delta against a
// run's frame-size bound (CheckFrame), which measures the frame after it
// exactly only near the limit.
//
// # The interface to the engine
//
// None beyond values: the engine keeps each run's frame-size bound
// (runstate.Sizes, under the run's lock) and hands each check that bound,
// the run's frame and its sentinels (Errors); the public constants stay
// the engine's (engine.MaxSize, engine.MaxResultSize), checked equal to
// these at compile time.
//
//	bound, err := limits.CheckFrame(sizes.Encoded(frame, lastSeq), frame, delta, run, seq, errs) // before the append
//	sizes.NoteEncoded(bound, frame, lastSeq)                                                       // once applied
//
// # Guarantees
//
//   - Check refuses, with an error matching Errors.TooLarge, a delta that
//     would grow the frame past MaxSize, and never refuses one that would
//     not: past the cheap bound (the last exact size, each delta's
//     encoding and 2 bytes an op) the frame after the delta is measured
//     exactly.
package limits
