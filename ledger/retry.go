// Durable retries: an action's retry policy, the attempts the log
// records, and the errors of an action given up.

package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/internal/retry"
)

// RetryPolicy is how Do retries an action whose exec fails (Action.Retry).
// Its fields but Retryable are recorded with every attempt's intent and
// are part of the action's fingerprint, so they must be computed the same
// way by every process that runs the action: durations, never absolute
// times. See Do for the schedule it drives.
type RetryPolicy struct {
	// MaxAttempts bounds the attempts, the first included (1: no retry).
	// 0 means no bound on the count; then Deadline must be set.
	MaxAttempts uint32
	// Initial is the wait after the first failed attempt (0: none).
	Initial time.Duration
	// Multiplier scales the wait after each further failure: the wait
	// after attempt n is Initial × Multiplier^(n-1), capped by Max. It is
	// within [1, 1000]; 0 means 2.
	Multiplier float64
	// Max caps a wait (0: no cap).
	Max time.Duration
	// Deadline bounds the whole sequence from the start of the first
	// attempt: no attempt starts at or after first+Deadline, and exec's
	// context carries that deadline (0: none).
	Deadline time.Duration
	// Retryable, if set, says which exec errors are retried; the others
	// give the action up at once (a permanent failure). When nil, every
	// error is retried except one that matches ErrPermanent (Permanent).
	// It is not recorded: it exists in the process that runs the action.
	Retryable func(error) bool
}

func (p *RetryPolicy) schedule() retry.Policy {
	return retry.Policy{MaxAttempts: p.MaxAttempts, Initial: p.Initial, Multiplier: p.Multiplier, Max: p.Max, Deadline: p.Deadline}.Normalized()
}

// normalized returns a copy of p with its defaults filled in, validated;
// nil for nil.
func (p *RetryPolicy) normalized() (*RetryPolicy, error) {
	if p == nil {
		return nil, nil
	}
	s := p.schedule()
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRetryPolicy, err)
	}
	return &RetryPolicy{MaxAttempts: s.MaxAttempts, Initial: s.Initial, Multiplier: s.Multiplier, Max: s.Max,
		Deadline: s.Deadline, Retryable: p.Retryable}, nil
}

// Equal reports whether p and o record the same policy (Retryable is not
// compared: it is not recorded). Both nil counts.
func (p *RetryPolicy) Equal(o *RetryPolicy) bool {
	if p == nil || o == nil {
		return p == o
	}
	return p.schedule() == o.schedule()
}

// retryable reports whether execErr may be retried under p.
func (p *RetryPolicy) retryable(execErr error) bool {
	if errors.Is(execErr, ErrPermanent) {
		return false
	}
	return p.Retryable == nil || p.Retryable(execErr)
}

// GiveUp says why an action with a retry policy was given up.
type GiveUp uint8

// The reasons, as certificates record them (frozen).
const (
	// NotGivenUp: the failure is an attempt's; another may follow.
	NotGivenUp GiveUp = GiveUp(retry.None)
	// GaveUpAttempts: MaxAttempts attempts were made.
	GaveUpAttempts GiveUp = GiveUp(retry.Exhausted)
	// GaveUpDeadline: the deadline passed, or the next attempt would have
	// started after it.
	GaveUpDeadline GiveUp = GiveUp(retry.Deadline)
	// GaveUpPermanent: exec's error is not retryable.
	GaveUpPermanent GiveUp = GiveUp(retry.Permanent)
)

// String names g.
func (g GiveUp) String() string {
	if g == NotGivenUp {
		return "retry scheduled"
	}
	return retry.Reason(g).String()
}

// Attempt is what a failed certificate of an action with a retry policy
// records besides the error: which attempt failed, when, and what
// follows. Times are Unix nanoseconds of the wall clock.
type Attempt struct {
	// Number is the attempt that failed, 1-based: the attempts made so
	// far, an attempt left in doubt by a crash included.
	Number uint32
	// First is the start of the first attempt (the deadline's origin).
	First int64
	// At is when the failure was recorded (never before a time recorded
	// earlier for the action: a clock moved back does not go back here).
	At int64
	// Next is the earliest start of the next attempt; 0 when GaveUp.
	Next int64
	// GaveUp is why the action was given up; NotGivenUp if it was not.
	GaveUp GiveUp
}

// Sentinels of durable retries.
var (
	// ErrBadRetryPolicy is wrapped by the error for an Action.Retry that
	// cannot be scheduled (no bound, a negative duration, a multiplier
	// out of range).
	ErrBadRetryPolicy = errors.New("ledger: bad retry policy")
	// ErrPermanent, matched by an exec's error, says that retrying cannot
	// help: an action with a retry policy is given up at once
	// (GaveUpPermanent). Wrap an error with Permanent.
	ErrPermanent = errors.New("ledger: permanent error")
	// ErrGaveUp matches a *GaveUpError: an action with a retry policy
	// failed for good, durably; Do returns it again without calling exec.
	ErrGaveUp = errors.New("ledger: action given up")
	// ErrAttemptsExhausted matches a *GaveUpError for GaveUpAttempts.
	ErrAttemptsExhausted = errors.New("ledger: retry attempts exhausted")
	// ErrRetryDeadline matches a *GaveUpError for GaveUpDeadline.
	ErrRetryDeadline = errors.New("ledger: retry deadline passed")
)

// Permanent wraps err so that it matches ErrPermanent (and still err).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() []error {
	return []error{e.err, ErrPermanent}
}

// GaveUpError is the failure of an action that its retry policy gave up:
// after Attempts attempts, for Reason, with LastErr the last attempt's
// error as its certificate records it (scrubbed of the action's secrets).
// It matches ErrGaveUp, and ErrAttemptsExhausted, ErrRetryDeadline or
// ErrPermanent by its reason; on the Do that ran the last attempt it also
// unwraps to exec's own error.
type GaveUpError struct {
	RunID       string
	Seq         uint64
	Index       uint32
	Tool        string
	Key         string
	Fingerprint Fingerprint
	Attempts    uint32
	Reason      GiveUp
	LastErr     string
	// First and At are the first attempt's start and the time the action
	// was given up (Unix nanoseconds).
	First, At int64

	err error // exec's own, if this process ran the last attempt
}

func (e *GaveUpError) Error() string {
	return fmt.Sprintf("ledger: run %q seq %d: tool %q given up (%s) after %d attempt(s) over %v, idempotency key %q: last error: %s",
		e.RunID, e.Seq, e.Tool, e.Reason, e.Attempts, time.Duration(e.At-e.First).Round(time.Millisecond), e.Key, e.LastErr)
}

// Is matches ErrGaveUp and the sentinel of e's reason.
func (e *GaveUpError) Is(target error) bool {
	switch target {
	case ErrGaveUp:
		return true
	case ErrAttemptsExhausted:
		return e.Reason == GaveUpAttempts
	case ErrRetryDeadline:
		return e.Reason == GaveUpDeadline
	case ErrPermanent:
		return e.Reason == GaveUpPermanent
	}
	return false
}

// Unwrap returns exec's own error when this process ran the last attempt.
func (e *GaveUpError) Unwrap() error { return e.err }

// Clock is the time a ledger's retry schedules run on: Now for the
// records, Sleep for the waits (which must end early, with ctx's error,
// when ctx does).
type Clock = retry.Clock

// SetClock makes the ledger run retry schedules on c (nil: the wall
// clock). Call it before the first Do.
func (l *Ledger) SetClock(c Clock) { l.clock = c }

func (l *Ledger) now() (Clock, time.Time) {
	c := l.clock
	if c == nil {
		c = retry.Wall{}
	}
	return c, c.Now()
}

type attemptKey struct{}

// AttemptFromContext returns the attempt (1-based) that the context of an
// exec of an action with a retry policy runs: Do puts it there.
func AttemptFromContext(ctx context.Context) (uint32, bool) {
	n, ok := ctx.Value(attemptKey{}).(uint32)
	return n, ok
}
