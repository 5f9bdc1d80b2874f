package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Policy is an action's retry policy. Every field is part of the action's
// identity (the ledger hashes it into the fingerprint), so it must be
// computed the same way by every process that runs the action: durations,
// never absolute times.
type Policy struct {
	// MaxAttempts bounds the attempts, the first one included (1: no
	// retry). 0 means no bound on the count; then Deadline must be set.
	MaxAttempts uint32
	// Initial is the wait after the first failed attempt (0: none).
	Initial time.Duration
	// Multiplier scales the wait after each further failure: the wait
	// after attempt n is Initial × Multiplier^(n-1), capped by Max. It is
	// at least 1 and at most MaxMultiplier; 0 means DefaultMultiplier.
	Multiplier float64
	// Max caps a wait (0: no cap).
	Max time.Duration
	// Deadline bounds the whole sequence, measured from the start of the
	// first attempt: no attempt starts after first+Deadline (0: none).
	Deadline time.Duration
}

// DefaultMultiplier is the multiplier of a policy that leaves it 0.
const DefaultMultiplier = 2.0

// MaxMultiplier bounds Policy.Multiplier.
const MaxMultiplier = 1000.0

// ErrBadPolicy marks a policy that cannot be scheduled.
var ErrBadPolicy = errors.New("retry: bad policy")

// Normalized returns p with its defaults filled in (Multiplier), the form
// that is recorded and hashed.
func (p Policy) Normalized() Policy {
	if p.Multiplier == 0 {
		p.Multiplier = DefaultMultiplier
	}
	return p
}

// Validate reports what is wrong with p (normalized or not), wrapping
// ErrBadPolicy.
func (p Policy) Validate() error {
	p = p.Normalized()
	switch {
	case p.MaxAttempts == 0 && p.Deadline <= 0:
		return fmt.Errorf("%w: neither MaxAttempts nor Deadline bounds the retries", ErrBadPolicy)
	case p.Initial < 0 || p.Max < 0 || p.Deadline < 0:
		return fmt.Errorf("%w: negative duration (initial %v, max %v, deadline %v)", ErrBadPolicy, p.Initial, p.Max, p.Deadline)
	case math.IsNaN(p.Multiplier) || p.Multiplier < 1 || p.Multiplier > MaxMultiplier:
		return fmt.Errorf("%w: multiplier %v is not within [1, %v]", ErrBadPolicy, p.Multiplier, MaxMultiplier)
	}
	return nil
}

// Backoff is the wait after attempt (1-based) failed: Initial ×
// Multiplier^(attempt-1), capped by Max, and never beyond the largest
// time.Duration. Attempt 0 has no wait.
func (p Policy) Backoff(attempt uint32) time.Duration {
	p = p.Normalized()
	if attempt == 0 || p.Initial <= 0 {
		return 0
	}
	w := float64(p.Initial) * math.Pow(p.Multiplier, float64(attempt-1))
	limit := float64(math.MaxInt64)
	if p.Max > 0 {
		limit = float64(p.Max)
	}
	if w >= limit || math.IsInf(w, 0) || math.IsNaN(w) {
		if p.Max > 0 {
			return p.Max
		}
		return math.MaxInt64
	}
	return time.Duration(w)
}

// State is what the log recorded of an action's attempts.
type State struct {
	// Attempts is the number of attempts made: intents written, an
	// attempt in doubt (its intent without certificate) included.
	Attempts uint32
	// First is the start of the first attempt (zero before it).
	First time.Time
	// Last is the latest time recorded for the action (an attempt's start
	// or a failure), the floor of "now" (a clock moved back).
	Last time.Time
	// NotBefore is the earliest start of the next attempt (zero: at once).
	NotBefore time.Time
}

// Reason says why an action is given up (None: it is not).
type Reason uint8

// The reasons, as the ledger records them (frozen: they are stored).
const (
	None      Reason = 0
	Exhausted Reason = 1 // MaxAttempts attempts were made
	Deadline  Reason = 2 // the deadline passed, or the next attempt would start after it
	Permanent Reason = 3 // the error is not retryable
)

// String names r.
func (r Reason) String() string {
	switch r {
	case None:
		return "none"
	case Exhausted:
		return "attempts exhausted"
	case Deadline:
		return "deadline passed"
	case Permanent:
		return "permanent error"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Decision is what Next decides before an attempt.
type Decision struct {
	// GiveUp is not None when no attempt may run.
	GiveUp Reason
	// Wait is how long to wait before the attempt (at most one backoff).
	Wait time.Duration
	// Attempt is the number of the attempt to make (1-based).
	Attempt uint32
}

// floor returns now, or s.Last if now is earlier (a clock moved back).
func floor(s State, now time.Time) time.Time {
	if now.Before(s.Last) {
		return s.Last
	}
	return now
}

// Next decides, at now, about the attempt after s.Attempts.
func (p Policy) Next(s State, now time.Time) Decision {
	p = p.Normalized()
	now = floor(s, now)
	if p.MaxAttempts > 0 && s.Attempts >= p.MaxAttempts {
		return Decision{GiveUp: Exhausted}
	}
	if s.Attempts == math.MaxUint32 {
		return Decision{GiveUp: Exhausted}
	}
	start := now
	if s.NotBefore.After(now) {
		start = s.NotBefore
	}
	if p.Deadline > 0 && s.Attempts > 0 && !start.Before(s.First.Add(p.Deadline)) {
		return Decision{GiveUp: Deadline}
	}
	wait := start.Sub(now)
	if b := p.Backoff(s.Attempts); wait > b {
		wait = b // NotBefore is at most one backoff after a recorded time
	}
	return Decision{Wait: wait, Attempt: s.Attempts + 1}
}

// AfterFailure schedules the attempt after a retryable failure of the
// last of s.Attempts attempts, at failed: the earliest start of the next
// one, or why there is none.
func (p Policy) AfterFailure(s State, failed time.Time) (next time.Time, r Reason) {
	p = p.Normalized()
	failed = floor(s, failed)
	if p.MaxAttempts > 0 && s.Attempts >= p.MaxAttempts {
		return time.Time{}, Exhausted
	}
	next = failed.Add(p.Backoff(s.Attempts))
	if p.Deadline > 0 && !next.Before(s.First.Add(p.Deadline)) {
		return time.Time{}, Deadline
	}
	return next, None
}

// Clock is the time the schedule runs on.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends (then it returns ctx's error).
	Sleep(ctx context.Context, d time.Duration) error
}

// Wall is the system clock.
type Wall struct{}

// Now returns time.Now.
func (Wall) Now() time.Time { return time.Now() }

// Sleep waits d on a timer, or until ctx ends.
func (Wall) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
