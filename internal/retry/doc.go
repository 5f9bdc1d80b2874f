// Package retry is the schedule of an action's durable retries: given a
// policy (attempts, exponential backoff, a deadline) and what the log
// recorded of the attempts so far, it says whether another attempt may
// run, when, or why the action is given up. It holds no state and writes
// nothing: the ledger records each attempt (its intent) and each failure
// (its certificate) and asks this package what follows. It imports no
// package of the module, so every layer may use it.
//
// The interface the ledger uses is small:
//
//	type Clock interface {
//		Now() time.Time
//		Sleep(ctx context.Context, d time.Duration) error
//	}
//	func (p Policy) Validate() error
//	func (p Policy) Backoff(attempt uint32) time.Duration
//	func (p Policy) Next(s State, now time.Time) Decision   // before an attempt
//	func (p Policy) AfterFailure(s State, failed time.Time) (next time.Time, r Reason) // after one
//
// Usage, as the ledger runs an action:
//
//	d := p.Next(state, clock.Now())
//	if d.GiveUp != None { record the final failure; return }
//	clock.Sleep(ctx, d.Wait)        // ctx-cancellable
//	record intent (attempt state.Attempts+1), run exec
//	next, r := p.AfterFailure(state', clock.Now()) // on a retryable error
//
// # Guarantees
//
//   - The schedule is a pure function of the policy and the recorded
//     state (the attempts made, the first attempt's time, the last
//     recorded time and the next attempt's earliest time): a restart that
//     reads the same records makes the same decision. Nothing is reset.
//   - A wall clock that moves back never shortens a wait nor resets the
//     count: "now" is never taken earlier than the latest recorded time,
//     so the wait before the next attempt is at most one backoff, and a
//     deadline measured from the first attempt is never passed later than
//     the clock says plus that.
//   - Attempts never exceed Policy.MaxAttempts; an attempt whose start
//     would fall after the deadline is not made (the action is given up at
//     once rather than after a useless wait).
//
// # Caveats
//
//   - There is no jitter: the schedule is deterministic so that it can be
//     recomputed after a crash. Many runs failing together retry together.
//   - A clock that moves forward (or a store closed for a long time)
//     passes the deadline: time is wall time, as the records hold it.
//   - A wall clock moved back by more than a deadline extends that
//     deadline by as much: the records hold wall times, and no monotonic
//     clock survives a restart.
package retry
