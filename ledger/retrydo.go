// Do's path for an action with a retry policy: attempts, waits and the
// durable give-up.

package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/internal/retry"
)

// IntentReader is implemented by a Journal that reads an intent back by
// its location (the engine's does). Do needs it for an action with a
// retry policy that is in doubt and whose attempt count only the log
// holds (its entry came from a persisted table).
type IntentReader interface {
	ReadIntent(loc Loc) (*Intent, error)
}

// tries is what the log holds of an action's attempts (entry.tries).
type tries struct {
	st      retry.State
	gaveUp  GiveUp
	lastErr string // the last failure's error as recorded
}

func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// intentTries is the state an intent of an action with a policy records:
// its attempt started and has no outcome yet. nil without a policy.
func intentTries(in *Intent) *tries {
	if in == nil || in.Retry == nil {
		return nil
	}
	return &tries{st: retry.State{Attempts: in.Attempt, First: unixTime(in.First), Last: unixTime(in.Started)}}
}

// certTries is the state after certificate c: a failed attempt's (c has
// an Attempt), or nil (done, resolved: no schedule is needed any more).
// A failed certificate without an Attempt keeps prev's count.
func certTries(c *Certificate, prev *tries) *tries {
	if a := c.Attempt; a != nil {
		return &tries{
			st:      retry.State{Attempts: a.Number, First: unixTime(a.First), Last: unixTime(a.At), NotBefore: unixTime(a.Next)},
			gaveUp:  a.GaveUp,
			lastErr: c.Err,
		}
	}
	if c.Status == StatusFailed && prev != nil {
		t := *prev
		t.lastErr, t.st.NotBefore = c.Err, time.Time{}
		return &t
	}
	return nil
}

// loadTries returns the attempts the log holds for the action of entry
// cur, read back from the log when the entry came from a persisted table.
// The caller owns the action's flight.
func (l *Ledger) loadTries(j Journal, fp Fingerprint, cur *entry) (*tries, error) {
	if cur.tries != nil {
		return cur.tries, nil
	}
	var prev *tries
	switch cur.status {
	case StatusNone:
		return &tries{}, nil
	case StatusFailed:
		c, err := j.ReadCertificate(cur.certLoc)
		if err != nil {
			return nil, fmt.Errorf("ledger: reading the failed attempt of %s at segment %d offset %d: %w", fp, cur.certLoc.Segment, cur.certLoc.Offset, err)
		}
		if c == nil || c.Fingerprint != fp || c.Status != StatusFailed {
			return nil, fmt.Errorf("%w: certificate at segment %d offset %d is not the failure of %s", ErrCorrupt, cur.certLoc.Segment, cur.certLoc.Offset, fp)
		}
		if c.Attempt != nil {
			return certTries(c, nil), nil
		}
		prev = &tries{lastErr: c.Err}
	case StatusIntent:
	default:
		return &tries{}, nil
	}
	if prev != nil && cur.intentLoc == (Loc{}) {
		// Resolved as failed before any attempt (ResolveFailed of an
		// action with an explicit key and no record): nothing to count.
		return prev, nil
	}
	r, ok := j.(IntentReader)
	if !ok || cur.intentLoc == (Loc{}) {
		return nil, fmt.Errorf("ledger: the attempts of %s are not known: the journal cannot read its intent back", fp)
	}
	in, err := r.ReadIntent(cur.intentLoc)
	if err != nil {
		return nil, fmt.Errorf("ledger: reading the last attempt of %s at segment %d offset %d: %w", fp, cur.intentLoc.Segment, cur.intentLoc.Offset, err)
	}
	if in == nil || in.Fingerprint != fp || in.Retry == nil {
		return nil, fmt.Errorf("%w: intent at segment %d offset %d is not an attempt of %s", ErrCorrupt, cur.intentLoc.Segment, cur.intentLoc.Offset, fp)
	}
	t := intentTries(in)
	if prev != nil {
		t.lastErr = prev.lastErr
	}
	return t, nil
}

// gaveUp is the error of an action given up after t.
func gaveUp(in *Intent, t *tries, execErr error) *GaveUpError {
	return &GaveUpError{RunID: in.RunID, Seq: in.Seq, Index: in.Index, Tool: in.Tool, Key: in.Key, Fingerprint: in.Fingerprint,
		Attempts: t.st.Attempts, Reason: t.gaveUp, LastErr: t.lastErr, First: unixNanos(t.st.First), At: unixNanos(t.st.Last), err: execErr}
}

// runRetry is run for an action with a retry policy: entry e is in flight
// f, owned by this goroutine, and was in state cur. Each attempt writes
// its intent (with its number) before exec; each failure writes a failed
// certificate with the attempt and what follows before the next attempt
// waits; the give-up is one failed certificate that says so.
func (l *Ledger) runRetry(ctx context.Context, j Journal, in *Intent, exec Exec, e *entry, f *flight, cur entry) (result, recorded []byte, err error) {
	fp := in.Fingerprint
	pol := in.Retry
	sched := pol.schedule()
	clock, _ := l.now()
	landed := false
	land := func(res []byte, err error) {
		l.mu.Lock()
		l.landLocked(&fp, e, f, res, err)
		l.mu.Unlock()
		landed = true
	}
	defer func() {
		if !landed { // exec or the journal panicked: what is durable stays
			land(nil, fmt.Errorf("ledger: tool %q panicked while running; the action is in doubt", in.Tool))
		}
	}()

	t, err := l.loadTries(j, fp, &cur)
	if err != nil {
		land(nil, err)
		return nil, nil, err
	}
	if t.gaveUp != NotGivenUp {
		err = gaveUp(in, t, nil)
		land(nil, err)
		return nil, nil, err
	}
	if cur.status == StatusIntent {
		// An attempt left in doubt (Do refused a non-idempotent one
		// before): it counts, and the next waits a backoff from its start.
		t = &tries{st: t.st, lastErr: fmt.Sprintf("attempt %d was left in doubt (its outcome was never recorded)", t.st.Attempts)}
		t.st.NotBefore = t.st.Last.Add(sched.Backoff(t.st.Attempts))
	}
	var execErr error // the last attempt's own error, in this process
	for {
		d := sched.Next(t.st, clock.Now())
		if d.GiveUp != retry.None {
			return nil, nil, l.giveUp(ctx, j, in, e, f, t, GiveUp(d.GiveUp), execErr, &landed)
		}
		if d.Wait > 0 {
			if serr := clock.Sleep(ctx, d.Wait); serr != nil {
				err = fmt.Errorf("ledger: tool %q: waiting %v for attempt %d (a later Do resumes the schedule): %w", in.Tool, d.Wait, d.Attempt, serr)
				if execErr != nil {
					err = fmt.Errorf("%w; attempt %d failed: %w", err, t.st.Attempts, execErr)
				}
				land(nil, err)
				return nil, nil, err
			}
		}
		start := clock.Now()
		if start.Before(t.st.Last) {
			start = t.st.Last // a clock moved back
		}
		att := *in
		att.Attempt, att.Started = d.Attempt, unixNanos(start)
		att.First = unixNanos(t.st.First)
		if t.st.Attempts == 0 {
			att.First = att.Started
		}
		var werr error
		l.journal(func() (Loc, error) { return j.WriteIntent(ctx, &att) }, func(loc Loc, w error) {
			if werr = w; w == nil {
				e.status, e.intentLoc, e.result, e.tries = StatusIntent, loc, nil, intentTries(&att)
			}
		})
		if werr != nil {
			err = fmt.Errorf("ledger: writing the intent of tool %q (attempt %d): %w", in.Tool, d.Attempt, werr)
			land(nil, err)
			return nil, nil, err
		}
		t = intentTries(&att)

		ectx, cancel := context.WithValue(ctx, attemptKey{}, att.Attempt), context.CancelFunc(func() {})
		if pol.Deadline > 0 {
			// The deadline on the schedule's clock, as a wall-clock deadline.
			left := t.st.First.Add(pol.Deadline).Sub(clock.Now())
			ectx, cancel = context.WithDeadline(ectx, time.Now().Add(left))
		}
		var res []byte
		res, execErr = exec(ectx, in.Key)
		cancel()
		if errors.Is(execErr, ErrUncertified) {
			err = fmt.Errorf("ledger: tool %q attempt %d: %w: %w", in.Tool, att.Attempt, execErr,
				&InDoubtError{Key: in.Key, Tool: in.Tool, RunID: in.RunID, Seq: in.Seq, Index: in.Index, Fingerprint: fp})
			land(nil, err)
			return nil, nil, err
		}
		if execErr == nil {
			return l.certifyDone(ctx, j, in, e, f, res, &landed)
		}

		failed := clock.Now()
		if failed.Before(t.st.Last) {
			failed = t.st.Last
		}
		next, reason := time.Time{}, retry.Permanent
		if pol.retryable(execErr) {
			next, reason = sched.AfterFailure(t.st, failed)
		}
		c := &Certificate{Fingerprint: fp, RunID: in.RunID, Seq: in.Seq, Index: in.Index, ExplicitKey: in.ExplicitKey(),
			Status: StatusFailed, Err: in.scrub.text(execErr.Error()),
			Attempt: &Attempt{Number: t.st.Attempts, First: unixNanos(t.st.First), At: unixNanos(failed), Next: unixNanos(next), GaveUp: GiveUp(reason)}}
		l.journal(func() (Loc, error) { return j.WriteCertificate(uncancelled(ctx), c) }, func(loc Loc, w error) {
			if werr = w; w == nil {
				e.status, e.certLoc, e.result, e.tries = StatusFailed, loc, nil, certTries(c, nil)
			}
		})
		if werr != nil {
			err = fmt.Errorf("ledger: tool %q attempt %d failed (%w) and recording the failure failed too (%w); the action is in doubt",
				in.Tool, t.st.Attempts, execErr, werr)
			land(nil, err)
			return nil, nil, err
		}
		t = certTries(c, nil)
		if reason != retry.None {
			t.lastErr = execErr.Error() // this process's own error text
			err = gaveUp(in, t, execErr)
			land(nil, err)
			return nil, nil, err
		}
	}
}

// giveUp records that the action is given up for reason before another
// attempt (the deadline passed, or the attempts were used up by attempts
// left in doubt) and returns the *GaveUpError.
func (l *Ledger) giveUp(ctx context.Context, j Journal, in *Intent, e *entry, f *flight, t *tries, reason GiveUp, execErr error, landed *bool) error {
	fp := in.Fingerprint
	clock, now := l.now()
	_ = clock
	if now.Before(t.st.Last) {
		now = t.st.Last
	}
	c := &Certificate{Fingerprint: fp, RunID: in.RunID, Seq: in.Seq, Index: in.Index, ExplicitKey: in.ExplicitKey(),
		Status: StatusFailed, Err: t.lastErr,
		Attempt: &Attempt{Number: max(t.st.Attempts, 1), First: unixNanos(t.st.First), At: unixNanos(now), GaveUp: reason}}
	if c.Attempt.First == 0 {
		c.Attempt.First = c.Attempt.At // given up before any attempt
	}
	var err error
	l.journal(func() (Loc, error) { return j.WriteCertificate(uncancelled(ctx), c) }, func(loc Loc, werr error) {
		*landed = true
		if werr != nil {
			err = fmt.Errorf("ledger: tool %q: recording that it is given up (%s after %d attempts): %w", in.Tool, reason, t.st.Attempts, werr)
			l.landLocked(&fp, e, f, nil, err)
			return
		}
		e.status, e.certLoc, e.result, e.tries = StatusFailed, loc, nil, certTries(c, nil)
		err = gaveUp(in, e.tries, execErr)
		l.landLocked(&fp, e, f, nil, err)
	})
	return err
}

// certifyDone writes the done certificate of a successful attempt (as
// run does) and lands the flight.
func (l *Ledger) certifyDone(ctx context.Context, j Journal, in *Intent, e *entry, f *flight, res []byte, landed *bool) (result, recorded []byte, err error) {
	fp := in.Fingerprint
	c := &Certificate{Fingerprint: fp, RunID: in.RunID, Seq: in.Seq, Index: in.Index, ExplicitKey: in.ExplicitKey(),
		Status: StatusDone, Result: bytes.Clone(in.scrub.result(res))}
	if c.Result == nil {
		c.Result = []byte{}
	}
	l.journal(func() (Loc, error) { return j.WriteCertificate(uncancelled(ctx), c) }, func(loc Loc, werr error) {
		*landed = true
		if werr != nil {
			err = fmt.Errorf("ledger: tool %q succeeded but writing its certificate failed: %w; the action is in doubt", in.Tool, werr)
			l.landLocked(&fp, e, f, nil, err)
			return
		}
		e.status, e.certLoc, e.result, e.tries = StatusDone, loc, c.Result, nil
		result, recorded = res, c.Result
		l.landLocked(&fp, e, f, c.Result, nil)
	})
	return result, recorded, err
}

// resolveAttempt fills the Attempt of c, the certificate by which
// ResolveFailed resolves an action with a retry policy as failed: the
// attempt it resolves counts, and the next one is scheduled after it as
// after a retryable failure (or the action is given up). An action given
// up already is not resolved again (its *GaveUpError); one never attempted
// gets a plain failed certificate.
func (l *Ledger) resolveAttempt(j Journal, in *Intent, cur *entry, c *Certificate) error {
	t, err := l.loadTries(j, in.Fingerprint, cur)
	if err != nil {
		return err
	}
	if t.gaveUp != NotGivenUp {
		return fmt.Errorf("ledger: resolving tool %q as failed: %w", in.Tool, gaveUp(in, t, nil))
	}
	if t.st.Attempts == 0 {
		return nil
	}
	_, now := l.now()
	if now.Before(t.st.Last) {
		now = t.st.Last
	}
	next, reason := in.Retry.schedule().AfterFailure(t.st, now)
	c.Attempt = &Attempt{Number: t.st.Attempts, First: unixNanos(t.st.First), At: unixNanos(now), Next: unixNanos(next), GaveUp: GiveUp(reason)}
	return nil
}
