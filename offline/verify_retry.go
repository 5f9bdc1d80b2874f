package offline

// Deep verification of durable retries (ledger.RetryPolicy): the attempts
// of an action, as its intents (version 3) and failed certificates
// (version 2) record them in log order, keep the invariants of
// docs/DESIGN.md ("Durable retries"):
//
//   - R1: an attempt's number is above every attempt recorded before it
//     for the action (a restart never resets the count), and within the
//     policy's MaxAttempts (the decoder checks the bound).
//   - R2: a failed attempt names the latest attempt started (an intent
//     before it with that number, when the log still holds one).
//   - R3: the first attempt's start is the same in every record of the
//     action (the deadline's origin never moves), and no record's time is
//     before it.
//   - R4: an action given up is given up once, and no attempt starts
//     after it.

import "github.com/continuumdb/continuum/ledger"

// retrySeen is what the scan saw of one action's attempts.
type retrySeen struct {
	last   uint32 // the highest attempt number recorded
	first  int64  // the first attempt's start, as recorded
	gaveUp bool
}

func (vr *verifyRun) retrySeenOf(fp ledger.Fingerprint) *retrySeen {
	if vr.retries == nil {
		vr.retries = make(map[ledger.Fingerprint]*retrySeen)
	}
	s := vr.retries[fp]
	if s == nil {
		s = &retrySeen{}
		vr.retries[fp] = s
	}
	return s
}

// noteAttempt checks (Deep) the attempt an intent starts.
func (vr *verifyRun) noteAttempt(in *ledger.Intent, loc string) {
	if in.Retry == nil {
		return
	}
	s := vr.retrySeenOf(in.Fingerprint)
	switch {
	case s.gaveUp:
		vr.fail(in.RunID, in.Seq, loc, "attempt %d of action %x after it was given up", in.Attempt, in.Fingerprint[:8])
	case in.Attempt <= s.last:
		vr.fail(in.RunID, in.Seq, loc, "attempt %d of action %x after attempt %d: the count went back", in.Attempt, in.Fingerprint[:8], s.last)
	case s.last > 0 && in.First != s.first:
		vr.fail(in.RunID, in.Seq, loc, "attempt %d of action %x moves its first attempt's start from %d to %d", in.Attempt, in.Fingerprint[:8], s.first, in.First)
	}
	if s.last == 0 {
		s.first = in.First
	}
	s.last = max(s.last, in.Attempt)
}

// noteAttemptOutcome checks (Deep) a certificate of an action with a
// retry policy.
func (vr *verifyRun) noteAttemptOutcome(c *ledger.Certificate, loc string) {
	a := c.Attempt
	if a == nil {
		return
	}
	s := vr.retrySeenOf(c.Fingerprint)
	switch {
	case s.gaveUp:
		vr.fail(c.RunID, c.Seq, loc, "action %x given up a second time, or failed after it was given up", c.Fingerprint[:8])
	case s.last > 0 && a.Number != s.last:
		vr.fail(c.RunID, c.Seq, loc, "failure of attempt %d of action %x, whose latest attempt is %d", a.Number, c.Fingerprint[:8], s.last)
	case s.last > 0 && a.First != s.first:
		vr.fail(c.RunID, c.Seq, loc, "failure of action %x moves its first attempt's start from %d to %d", c.Fingerprint[:8], s.first, a.First)
	}
	if s.last == 0 {
		s.first, s.last = a.First, a.Number
	}
	if a.GaveUp != ledger.NotGivenUp {
		s.gaveUp = true
	}
}
