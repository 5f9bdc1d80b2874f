package main

// The handlers of an attempt at an atom: begin, heartbeat, a call and its
// outcome, resolve, commit and fail; and the reaper of lapsed leases.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/continuumdb/continuum/frame"
)

func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return "att_" + hex.EncodeToString(b[:])
}

func (s *server) handleBegin(r *http.Request, body []byte) (int, any, *apiError) {
	var req beginRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	rc, lease, aerr := s.beginTerms(req.Call != nil, req.Commit, req.LeaseMS, "begin")
	if aerr != nil {
		return 0, nil, aerr
	}
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	rs.beginMu.Lock()
	defer rs.beginMu.Unlock()

	rs.mu.Lock()
	cur := rs.mu.cur
	var last *attempt
	if req.RequestID != "" && req.RequestID == rs.mu.lastRequest {
		last = rs.mu.lastAttempt
	}
	rs.mu.Unlock()
	if last != nil {
		if resp, ok := last.beginAnswer(); ok {
			return s.beginRide(r.Context(), last, resp, &req, rc) // a repeated begin: the attempt it made, while open
		}
		if _, ok := last.finished(attemptCommitted); ok && rc != nil {
			// A repeated begin that committed: its commit again.
			resp := beginResponse{Attempt: last.token, Run: rs.id, Seq: last.seq, LeaseMS: last.lease.Milliseconds(), Interrupted: last.interrupted}
			return s.beginRide(r.Context(), last, resp, &req, rc)
		}
	}

	if cur != nil {
		cur.mu.Lock()
		open, closing, expires, seq := cur.mu.state == attemptOpen, cur.mu.closing, cur.mu.expires, cur.seq
		cur.mu.Unlock()
		switch {
		case open && closing:
			<-cur.ended // being abandoned already: wait for it
		case open && req.Takeover:
			s.counters.takeovers.Add(1)
			cur.abandon(s.ctx, "takeover", true)
		case open:
			e := conflict(codeRunHeld, "run %q seq %d is held by another attempt until %s (its lease); begin with takeover to abandon it",
				rs.id, seq, expires.UTC().Format(time.RFC3339Nano))
			e.Details = map[string]any{"seq": seq, "lease_expires": expires.UTC()}
			return 0, nil, e
		}
	}

	if req.Seq != nil {
		if next := rs.run.LastSeq() + 1; *req.Seq != next {
			e := conflict(codeSeqMismatch, "run %q's next atom is seq %d, not %d", rs.id, next, *req.Seq)
			e.Field, e.Details = "seq", map[string]any{"next": next}
			return 0, nil, e
		}
	}
	atom, err := rs.run.Begin(s.ctx)
	if err != nil {
		return 0, nil, engineError(err, "")
	}
	a := &attempt{token: newToken(), rs: rs, atom: atom, seq: atom.Seq(), lease: lease,
		abandonCh: make(chan struct{}), ended: make(chan struct{})}
	a.mu.expires = time.Now().Add(lease)

	var intr *interruptedJSON
	if atom.Interrupted() {
		intr, err = rs.interrupted(s.ctx)
		if err != nil {
			atom.Fail(context.WithoutCancel(s.ctx), "continuumd: could not read the interrupted atom: "+err.Error())
			return 0, nil, engineError(err, "")
		}
	}
	rs.mu.Lock()
	if ab := rs.mu.abandoned; ab != nil {
		if ab.Seq == a.seq && intr == nil {
			intr = ab
		}
		if ab.Seq != a.seq || intr != ab {
			rs.mu.abandoned = nil
		}
	}
	if intr != nil {
		a.inherited = append([]actionStateJSON(nil), intr.Actions...)
	}
	rs.mu.cur = a
	rs.mu.lastRequest, rs.mu.lastAttempt = req.RequestID, a
	a.interrupted = intr
	rs.mu.Unlock()

	s.addAttempt(a)
	s.counters.begun.Add(1)
	resp, _ := a.beginAnswer()
	return s.beginRide(r.Context(), a, resp, &req, rc)
}

// beginRide makes what rides on a begin of attempt a: its call 0, or its
// commit. An error of either is answered with the begin's answer under
// details.attempt: the attempt exists (open, unless the error says
// otherwise).
func (s *server) beginRide(ctx context.Context, a *attempt, resp beginResponse, req *beginRequest, rc *rideCommit) (int, any, *apiError) {
	switch {
	case req.Call != nil:
		c, aerr := s.doCall(ctx, a, 0, req.Call)
		if aerr != nil {
			return 0, nil, withDetail(aerr, "attempt", resp)
		}
		resp.Call = &c
	case rc != nil:
		done, aerr := s.doCommit(a, rc)
		if aerr != nil {
			return 0, nil, withDetail(aerr, "attempt", resp)
		}
		resp.Commit = &done
	}
	return 201, resp, nil
}

// beginAnswer is the answer to the begin that made a, while it is open.
func (a *attempt) beginAnswer() (beginResponse, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.state != attemptOpen || a.mu.closing {
		return beginResponse{}, false
	}
	a.mu.expires = time.Now().Add(a.lease)
	return a.branchAnswer(beginResponse{Attempt: a.token, Run: a.rs.id, Seq: a.seq, LeaseMS: a.lease.Milliseconds(),
		LeaseExpires: a.mu.expires.UTC(), Interrupted: a.interrupted}), true
}

// attemptOf finds the attempt a request names, which must be of its run.
func (s *server) attemptOf(r *http.Request) (*attempt, *apiError) {
	token, run := r.PathValue("attempt"), r.PathValue("run")
	s.mu.Lock()
	a := s.mu.attempts[token]
	s.mu.Unlock()
	if a == nil || a.rs.id != run {
		e := notFound(codeAttemptNotFound, "attempt", "run %q has no attempt %q: the server restarted since (begin again: the atom is reported interrupted), or the attempt finished long ago", run, token)
		return nil, e
	}
	return a, nil
}

func (s *server) handleAttempt(r *http.Request, _ []byte) (int, any, *apiError) {
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	return 200, a.describe(), nil
}

func (s *server) handleHeartbeat(r *http.Request, body []byte) (int, any, *apiError) {
	var req struct{}
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if aerr := a.pin(true); aerr != nil {
		return 0, nil, aerr
	}
	a.unpin()
	return 200, a.describe(), nil
}

func callNumber(r *http.Request) (int, *apiError) {
	n, err := strconv.ParseUint(r.PathValue("call"), 10, 31)
	if err != nil {
		return 0, badRequest("call", "the call number must be 0, 1, 2, ..., not %q", r.PathValue("call"))
	}
	return int(n), nil
}

// existingCall finds call n of a for an outcome or a resolution.
func (a *attempt) existingCall(n int) (*call, *apiError) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n >= len(a.mu.calls) {
		return nil, notFound(codeCallNotFound, "call", "attempt %s has no call %d (it has %d)", a.token, n, len(a.mu.calls))
	}
	return a.mu.calls[n], nil
}

func (s *server) handleCall(r *http.Request, body []byte) (int, any, *apiError) {
	n, aerr := callNumber(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	var req callRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	resp, aerr := s.doCall(r.Context(), a, n, &req)
	if aerr != nil {
		return 0, nil, aerr
	}
	return 200, resp, nil
}

// doCall makes call n of attempt a (or answers its state when it was
// made) and answers with the call's state.
func (s *server) doCall(ctx context.Context, a *attempt, n int, req *callRequest) (callResponse, *apiError) {
	if aerr := a.pin(false); aerr != nil {
		return callResponse{}, aerr
	}
	defer a.unpin()
	c, aerr := a.callFor(n, req)
	if aerr != nil {
		return callResponse{}, aerr
	}
	a.waitCall(ctx, c, func(st callState) bool { return st == callStarting })
	return s.callAnswer(a, c)
}

// callAnswer answers with call c's state, or lease_lost if its attempt was
// abandoned meanwhile.
func (s *server) callAnswer(a *attempt, c *call) (callResponse, *apiError) {
	a.mu.Lock()
	lost := a.mu.closing || a.mu.state == attemptAbandoned
	var e *apiError
	if lost {
		e = a.lostLocked()
	}
	a.mu.Unlock()
	if lost {
		return callResponse{}, e
	}
	return a.answer(c)
}

func (s *server) handleOutcome(r *http.Request, body []byte) (int, any, *apiError) {
	n, aerr := callNumber(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	var req outcomeRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	result, hasResult, aerr := pickBytes("result", req.Result, req.ResultBase64)
	switch {
	case aerr != nil:
		return 0, nil, aerr
	case hasResult && req.Error != nil:
		return 0, nil, badRequest("error", "an outcome is a result or an error, not both")
	case !hasResult && req.Error == nil:
		return 0, nil, badRequest("result", "an outcome needs result (or result_base64), or error")
	case req.Error != nil && *req.Error == "":
		return 0, nil, badRequest("error", "error must say why the action did not take effect")
	case req.Next != nil && req.Commit != nil:
		return 0, nil, badRequest("next", "an outcome carries the next call or the commit, not both")
	}
	var ride *rideCommit
	if req.Commit != nil {
		if ride, aerr = prepareCommit(req.Commit, "commit."); aerr != nil {
			return 0, nil, aerr
		}
	}
	o := outcome{result: result, attempt: req.Attempt}
	if req.Error != nil {
		o.err = *req.Error
	}
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	resp, aerr := s.doOutcome(r.Context(), a, n, o)
	if aerr != nil {
		return 0, nil, aerr
	}
	certified := resp.Status == "done" || resp.Status == "failed"
	switch {
	case req.Next != nil && certified:
		next, aerr := s.doCall(r.Context(), a, n+1, req.Next)
		if aerr != nil {
			return 0, nil, withDetail(aerr, "outcome", resp)
		}
		resp.Next = &next
	case ride != nil && certified:
		done, aerr := s.doCommit(a, ride)
		if aerr != nil {
			return 0, nil, withDetail(aerr, "outcome", resp)
		}
		resp.Commit = &done
	}
	return 200, resp, nil
}

// withDetail adds what a request did before its error to the error's
// details (a ride-along call or commit that failed after its outcome was
// certified, or after its begin).
func withDetail(e *apiError, key string, v any) *apiError {
	c := *e
	c.Details = map[string]any{key: v}
	for k, x := range e.Details {
		c.Details[k] = x
	}
	return &c
}

// doOutcome delivers the outcome of call n of a and answers the call's
// state once it is certified.
func (s *server) doOutcome(ctx context.Context, a *attempt, n int, o outcome) (callResponse, *apiError) {
	if aerr := a.pin(false); aerr != nil {
		return callResponse{}, aerr
	}
	defer a.unpin()
	c, aerr := a.existingCall(n)
	if aerr != nil {
		return callResponse{}, aerr
	}
	tries := c.tries.Load()
	if aerr := a.deliver(c, o); aerr != nil {
		return callResponse{}, aerr
	}
	// Until it is certified; for a call with a retry policy, until it is
	// certified or the next attempt is handed out (execute again).
	a.waitCall(ctx, c, func(st callState) bool {
		return st == callStarting || (st == callExecuting && c.tries.Load() == tries)
	})
	return s.callAnswer(a, c)
}

func (s *server) handleResolve(r *http.Request, body []byte) (int, any, *apiError) {
	n, aerr := callNumber(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	var req resolveRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	result, hasResult, aerr := pickBytes("result", req.Result, req.ResultBase64)
	switch {
	case aerr != nil:
		return 0, nil, aerr
	case hasResult && req.Failed != nil:
		return 0, nil, badRequest("failed", "a resolution is a result (the effect happened) or failed (it did not), not both")
	case !hasResult && req.Failed == nil:
		return 0, nil, badRequest("result", "a resolution needs result (or result_base64), or failed")
	case req.Failed != nil && *req.Failed == "":
		return 0, nil, badRequest("failed", "failed must say why the effect is known not to have happened")
	case req.Retry && req.Failed == nil:
		return 0, nil, badRequest("retry", "retry goes with failed: an action that happened is not executed again")
	}
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if aerr := a.pin(false); aerr != nil {
		return 0, nil, aerr
	}
	defer a.unpin()
	c, aerr := a.existingCall(n)
	if aerr != nil {
		return 0, nil, aerr
	}
	reason := ""
	if req.Failed != nil {
		reason = *req.Failed
	}
	if aerr := a.resolve(s.ctx, c, result, hasResult, reason, req.Retry); aerr != nil {
		return 0, nil, aerr
	}
	a.waitCall(r.Context(), c, func(st callState) bool { return st == callStarting })
	resp, aerr := s.callAnswer(a, c)
	if aerr != nil {
		return 0, nil, aerr
	}
	return 200, resp, nil
}

func (s *server) handleCommit(r *http.Request, body []byte) (int, any, *apiError) {
	var req commitRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	rc, aerr := prepareCommit(&req, "")
	if aerr != nil {
		return 0, nil, aerr
	}
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	resp, aerr := s.doCommit(a, rc)
	if aerr != nil {
		return 0, nil, aerr
	}
	return 200, resp, nil
}

// rideCommit is a commit's delta, decoded, and the digest of its
// encoding (to tell a repeated commit from a changed one: the attempt
// keeps the digest, not the delta, while it is retained).
type rideCommit struct {
	d   *frame.Delta
	sum [sha256.Size]byte
}

// prepareCommit decodes a commit request's delta; prefix is the path of
// the commit in its request ("commit." when it rides on another).
// beginTerms checks what a begin and a branch's begin share: a first call
// or a commit riding on it (not both), the lease asked for (0: the
// server's), and a server that is not shutting down. what names the
// request in the errors ("begin", "branch").
func (s *server) beginTerms(call bool, commit *commitRequest, leaseMS int64, what string) (*rideCommit, time.Duration, *apiError) {
	if call && commit != nil {
		return nil, 0, badRequest("commit", "a %s carries its first call or its commit, not both", what)
	}
	var rc *rideCommit
	if commit != nil {
		var aerr *apiError
		if rc, aerr = prepareCommit(commit, "commit."); aerr != nil {
			return nil, 0, aerr
		}
	}
	lease := s.cfg.lease
	if leaseMS != 0 {
		lease = time.Duration(leaseMS) * time.Millisecond
		if leaseMS < 0 || lease < s.cfg.minLease || lease > s.cfg.maxLease {
			return nil, 0, badRequest("lease_ms", "lease_ms must be between %d and %d (0: the server's default, %d)",
				s.cfg.minLease.Milliseconds(), s.cfg.maxLease.Milliseconds(), s.cfg.lease.Milliseconds())
		}
	}
	if s.draining.Load() {
		return nil, 0, &apiError{Status: http.StatusServiceUnavailable, Code: codeShuttingDown, Message: "the server is shutting down: " + what + " on the next one"}
	}
	return rc, lease, nil
}

func prepareCommit(req *commitRequest, prefix string) (*rideCommit, *apiError) {
	if req.Delta == nil {
		return nil, badRequest(prefix+"delta", "delta is required: a list of ops ([] for none)")
	}
	d, aerr := decodeDelta(req.Delta)
	if aerr != nil {
		if prefix != "" && aerr.Field != "" {
			aerr.Field = prefix + aerr.Field
		}
		return nil, aerr
	}
	return &rideCommit{d: d, sum: sha256.Sum256(frame.AppendDelta(nil, d))}, nil
}

// doCommit commits attempt a with rc's delta, or answers the commit
// already made with the same delta.
func (s *server) doCommit(a *attempt, rc *rideCommit) (commitResponse, *apiError) {
	if done, ok := a.finished(attemptCommitted); ok {
		a.mu.Lock()
		same := a.mu.delta == rc.sum
		a.mu.Unlock()
		if !same {
			e := conflict(codeCommitMismatch, "attempt %s of run %q committed seq %d with another delta: a repeated commit must carry the same one (begin a new atom for a new delta)", a.token, a.rs.id, a.seq)
			e.Field = "delta"
			return commitResponse{}, e
		}
		return done.(commitResponse), nil // a repeated commit
	}
	a.mu.Lock()
	lost := a.mu.conflict
	a.mu.Unlock()
	if lost != nil {
		return commitResponse{}, lost // a repeated commit of a branch that conflicted
	}
	if aerr := a.pin(true); aerr != nil {
		return commitResponse{}, aerr
	}
	defer a.unpin()
	if busy := a.busyCalls(); len(busy) > 0 {
		e := conflict(codeCallsRunning, "calls %v of attempt %s are still executing: report their outcomes before committing", busy, a.token)
		e.Details = map[string]any{"calls": busy}
		return commitResponse{}, e
	}
	if err := a.atom.Commit(s.ctx, rc.d); err != nil {
		aerr := engineError(err, "delta")
		if aerr.Code == codeConflict {
			// The branch is over, nothing written: a repeated commit
			// answers the same conflict; a retry branches again.
			a.mu.Lock()
			a.mu.state, a.mu.reason, a.mu.conflict = attemptFailed, aerr.Message, aerr
			a.mu.Unlock()
			a.end()
			s.counters.failed.Add(1)
		}
		return commitResponse{}, aerr
	}
	head := hexHash(a.rs.run.Head())
	a.mu.Lock()
	a.mu.state, a.mu.head, a.mu.delta, a.mu.seq = attemptCommitted, head, rc.sum, a.atom.Seq()
	a.mu.Unlock()
	a.end()
	s.counters.committed.Add(1)
	resp, _ := a.finished(attemptCommitted)
	return resp.(commitResponse), nil
}

// finished returns the answer of a's commit or fail when a ended so.
func (a *attempt) finished(st attemptState) (any, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.state != st {
		return nil, false
	}
	if st == attemptCommitted {
		return commitResponse{Run: a.rs.id, Seq: a.mu.seq, Head: a.mu.head}, true
	}
	return failResponse{Run: a.rs.id, Seq: a.seq, Reason: a.mu.reason}, true
}

func (s *server) handleFail(r *http.Request, body []byte) (int, any, *apiError) {
	var req failRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	a, aerr := s.attemptOf(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if done, ok := a.finished(attemptFailed); ok {
		return 200, done, nil
	}
	if aerr := a.pin(true); aerr != nil {
		return 0, nil, aerr
	}
	defer a.unpin()
	if busy := a.busyCalls(); len(busy) > 0 {
		e := conflict(codeCallsRunning, "calls %v of attempt %s are still executing: report their outcomes before failing the atom", busy, a.token)
		e.Details = map[string]any{"calls": busy}
		return 0, nil, e
	}
	if err := a.atom.Fail(s.ctx, req.Reason); err != nil {
		return 0, nil, engineError(err, "")
	}
	a.mu.Lock()
	a.mu.state, a.mu.reason = attemptFailed, req.Reason
	a.mu.Unlock()
	a.end()
	s.counters.failed.Add(1)
	resp, _ := a.finished(attemptFailed)
	return 200, resp, nil
}

// reap abandons the attempts whose lease ran out and forgets finished
// ones older than cfg.retain. It runs until ctx ends.
func (s *server) reap(ctx context.Context) {
	t := time.NewTicker(s.cfg.reapEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.reapOnce(now)
		}
	}
}

func (s *server) reapOnce(now time.Time) {
	s.mu.Lock()
	var expired []*attempt
	for a := range s.mu.open {
		if a.expired(now) {
			expired = append(expired, a)
		}
	}
	// The ended attempts, oldest first: those whose lease would have run
	// out more than cfg.retain ago are forgotten. The order is that of
	// their ends, not quite of their expiries: one retained a little
	// longer holds back the next, never the other way round.
	n := 0
	for _, a := range s.mu.done {
		a.mu.Lock()
		old := now.Sub(a.mu.expires) > s.cfg.retain
		a.mu.Unlock()
		if !old {
			break
		}
		n++
		if s.mu.attempts[a.token] == a {
			delete(s.mu.attempts, a.token)
		}
		if a.branch != "" {
			a.rs.mu.Lock()
			if a.rs.mu.branches[a.branch] == a {
				delete(a.rs.mu.branches, a.branch)
			}
			a.rs.mu.Unlock()
		}
	}
	if n > 0 {
		clear(s.mu.done[:n])
		s.mu.done = s.mu.done[n:]
		if len(s.mu.done) < cap(s.mu.done)/4 {
			s.mu.done = append([]*attempt(nil), s.mu.done...) // give the dropped front back
		}
	}
	s.mu.Unlock()
	for _, a := range expired {
		s.counters.expired.Add(1)
		go a.abandon(s.ctx, "lease_expired", true)
	}
}

// addAttempt registers a new attempt: found by its token, its lease
// checked by the reaper.
func (s *server) addAttempt(a *attempt) {
	s.mu.Lock()
	s.mu.attempts[a.token] = a
	s.mu.open[a] = struct{}{}
	s.mu.Unlock()
}

// abandonAll abandons every open attempt without failing its atom, for
// shutdown: their calls waiting for an outcome are left in doubt, and the
// engine reports their atoms as interrupted at the next Open.
func (s *server) abandonAll() {
	s.mu.Lock()
	var open []*attempt
	for a := range s.mu.open {
		a.mu.Lock()
		if a.mu.state == attemptOpen {
			open = append(open, a)
		}
		a.mu.Unlock()
	}
	s.mu.Unlock()
	sort.Slice(open, func(i, j int) bool { return open[i].token < open[j].token })
	var wg sync.WaitGroup
	for _, a := range open {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.abandon(s.ctx, "shutdown", false)
		}()
	}
	wg.Wait()
}
