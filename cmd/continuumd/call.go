package main

// One call of an attempt: dispatched to the engine's Do on a goroutine of
// its own, executed by the client, its outcome delivered, resolved, or
// answered.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/continuumdb/continuum/internal/branch"
	"github.com/continuumdb/continuum/ledger"
)

// callFor returns call n for a request: the existing one if n was made
// before (the request must ask for the same action), or a new one if n is
// the next number, dispatched to the engine in call order.
func (a *attempt) callFor(n int, req *callRequest) (*call, *apiError) {
	act, aerr := req.action()
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case n < len(a.mu.calls):
		c := a.mu.calls[n]
		if f, ok := c.req.same(req); !ok {
			e := conflict(codeCallMismatch, "call %d of attempt %s was %q with other %s: a call number names one action (repeat it unchanged, or use the next number %d)",
				n, a.token, c.req.Tool, f, len(a.mu.calls))
			e.Field = f
			return nil, e
		}
		return c, nil
	case n > len(a.mu.calls):
		e := conflict(codeOutOfOrder, "call %d of attempt %s comes before call %d: number calls from 0 and send each after the answer to the one before",
			n, a.token, len(a.mu.calls))
		e.Field = "call"
		return nil, e
	}
	if aerr != nil {
		return nil, aerr
	}
	if a.mu.state != attemptOpen {
		return nil, conflict(codeAttemptDone, "attempt %s of run %q seq %d is %s", a.token, a.rs.id, a.seq, a.mu.state)
	}
	c := &call{n: n, req: *req, act: act, changed: make(chan struct{})}
	index := a.mu.defaultKeys
	if act.Key == "" {
		a.mu.defaultKeys++
	}
	if in, err := ledger.NewIntent(act, a.rs.id, a.seq, index); err == nil {
		if a.branch != "" && act.Key == "" {
			in = branch.WithKey(in, &branch.Branch{Run: a.rs.id, Name: a.branch}, index) // as the engine keys a branch's call
		}
		c.in = in
	}
	a.mu.calls = append(a.mu.calls, c)
	a.dispatchLocked(c, act)
	return c, nil
}

// dispatchLocked starts the engine's Do of c in its own goroutine, after
// the previous dispatch of the attempt left its starting state: the engine
// numbers default keys in the order of Do calls, and this keeps it the
// order of call numbers however requests race.
func (a *attempt) dispatchLocked(c *call, act ledger.Action) {
	prev := a.mu.lastStarted
	started := make(chan struct{})
	a.mu.lastStarted = started
	c.running = true
	c.reported = false
	c.report = make(chan outcome, 1)
	a.execs.Add(1)
	a.rs.srv.workers.run(func() { a.runDo(c, act, prev, started) })
}

// runDo is one Do of the engine for call c. Its exec tells the client to
// execute and waits for the outcome; if the attempt is abandoned first, it
// panics, which leaves the action in doubt (a durable intent without a
// certificate), and runDo recovers.
func (a *attempt) runDo(c *call, act ledger.Action, prev <-chan struct{}, started chan struct{}) {
	srv := a.rs.srv
	var once sync.Once
	markStarted := func() { once.Do(func() { close(started) }) }
	defer a.execs.Done()
	defer markStarted()
	if prev != nil {
		select {
		case <-prev:
		case <-a.abandonCh:
		}
	}
	exec := func(ctx context.Context, key string) ([]byte, error) {
		if a.rs.handedOut.has(key) {
			// Never executed again while the client of an abandoned
			// attempt may be executing it: reported in doubt instead.
			return nil, fmt.Errorf("%w: continuumd: %q under key %q was handed to a client whose attempt was then abandoned, "+
				"which may still be executing it: ask the downstream, then resolve it (with retry to execute it again)",
				ledger.ErrUncertified, act.Tool, key)
		}
		a.mu.Lock()
		c.adoptKeyLocked(key)
		if c.reported {
			// A retry policy's next attempt: a new execution to hand out.
			c.report, c.reported = make(chan outcome, 1), false
		}
		if act.Retry != nil {
			c.tries.Add(1)
			c.attempt = attemptOf(ctx)
		}
		c.setStateLocked(callExecuting)
		report := c.report
		a.mu.Unlock()
		markStarted()
		select {
		case o := <-report:
			if o.err != "" {
				if act.Retry != nil {
					// The ledger records the failure, then gives up or
					// waits its backoff and calls exec again: pending
					// until then.
					a.mu.Lock()
					c.setStateLocked(callStarting)
					a.mu.Unlock()
				}
				return nil, &clientError{msg: o.err}
			}
			return o.result, nil
		case <-a.abandonCh:
		case <-ctx.Done():
		}
		panic(abandonPanic{})
	}
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		c.running = false
		if _, ok := r.(abandonPanic); ok {
			// The client was told to execute it and may still be doing so.
			a.rs.handedOut.add(c.key())
			c.setStateLocked(callInDoubt)
			return
		}
		// Not ours: a bug below. The action is in doubt (the ledger's
		// defer landed it so); the server goes on.
		srv.log.Error("continuumd: panic in the engine's Do", "run", a.rs.id, "seq", a.seq, "call", c.n, "panic", fmt.Sprint(r))
		c.apiErr = &apiError{Status: 500, Code: codeInternal, Message: fmt.Sprintf("the engine panicked running call %d: %v; the action may be in doubt", c.n, r)}
		c.setStateLocked(callError)
	}()

	var ran bool
	ctx := srv.ctx
	if act.Retry != nil {
		// A retry's wait ends with the attempt: no execution is handed out
		// to an attempt that was abandoned meanwhile.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-a.abandonCh:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	result, err := a.atom.Do(ctx, act, func(ctx context.Context, key string) ([]byte, error) {
		ran = true
		return exec(ctx, key)
	})
	// A certified result without exec: in a fork, the certificate may be
	// the parent's, under the parent's key (I10).
	replayedKey := ""
	if err == nil && !ran && act.Key == "" {
		a.mu.Lock()
		in := c.in
		a.mu.Unlock()
		if in != nil {
			replayedKey = a.lineageKey(srv.ctx, in)
		}
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	c.running = false
	var doubt *ledger.InDoubtError
	var ce *clientError
	var gave *ledger.GaveUpError
	switch {
	case errors.As(err, &gave):
		// The retry policy gave the action up: now, or in an earlier
		// process (then nothing was executed).
		c.errMsg, c.gaveUp, c.attempt = gave.Error(), gave.Reason.String(), gave.Attempts
		c.setStateLocked(callFailed)
	case err == nil:
		if replayedKey != "" {
			c.adoptKeyLocked(replayedKey)
		}
		c.result, c.replayed = result, !ran
		c.setStateLocked(callDone)
	case errors.As(err, &doubt):
		c.adoptKeyLocked(doubt.Key)
		c.setStateLocked(callInDoubt)
	case errors.As(err, &ce):
		// The client reported that the execution failed: this call's,
		// or the one of the same action this Do waited for.
		c.errMsg = ce.msg
		c.setStateLocked(callFailed)
	default:
		c.apiErr = engineError(err, "")
		if !ran && (c.apiErr.Code == codeInvalidArgs || c.apiErr.Code == codeBadRequest) {
			c.apiErr.Message = fmt.Sprintf("call %d: %s", c.n, c.apiErr.Message)
		}
		c.setStateLocked(callError)
	}
}

// deliver hands the client's outcome of call c to its waiting exec. A
// repeated outcome (after a lost answer) is not delivered again.
func (a *attempt) deliver(c *call, o outcome) *apiError {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.act.Retry != nil {
		switch {
		case o.attempt == 0:
			return badRequest("attempt", "call %d (%q) has a retry policy: its outcome names the attempt it is of (the answer's attempt)", c.n, c.req.Tool)
		case o.attempt < c.attempt || (o.attempt == c.attempt && c.reported):
			return nil // a repeat of an outcome delivered: the answer is the call's state
		case o.attempt > c.attempt || c.state != callExecuting:
			return conflict(codeNotExecuting, "call %d (%q) is not executing attempt %d (it is %s, attempt %d)", c.n, c.req.Tool, o.attempt, c.state, c.attempt)
		}
	}
	switch c.state {
	case callExecuting:
		if !c.reported {
			c.reported = true
			c.report <- o // buffered: never blocks
		}
		return nil
	case callDone, callFailed, callError:
		return nil // a repeat: the answer is the call's state
	case callInDoubt:
		return conflict(codeNotExecuting, "call %d (%q, key %q) is in doubt, not executing: resolve it with what the downstream says",
			c.n, c.req.Tool, c.key())
	}
	return conflict(codeNotExecuting, "call %d (%q) is not executing yet: repeat the call request until it answers execute",
		c.n, c.req.Tool)
}

func (c *call) key() string {
	if c.in != nil {
		return c.in.Key
	}
	return c.req.Key
}

// resolve records what the client found about in-doubt call c; with
// retry, a resolution that it did not happen dispatches the action again
// under the in-doubt key.
func (a *attempt) resolve(ctx context.Context, c *call, result []byte, happened bool, reason string, retry bool) *apiError {
	c.resolveMu.Lock()
	defer c.resolveMu.Unlock()
	a.mu.Lock()
	st, resolved, retried := c.state, c.resolved, c.retried
	a.mu.Unlock()
	switch {
	case st == callDone && resolved && happened, st == callFailed && resolved && !happened && !retry:
		return nil // a repeat
	case retry && !happened && retried && st != callInDoubt:
		return nil // a repeat of a resolve-and-retry: the answer is the call's state
	case st != callInDoubt:
		return conflict(codeNotInDoubt, "call %d (%q, key %q) is %s, not in doubt", c.n, c.req.Tool, c.key(), st)
	}
	doubt := &ledger.InDoubtError{Key: c.in.Key, Tool: c.in.Tool, RunID: c.in.RunID, Seq: c.in.Seq, Index: c.in.Index, Fingerprint: c.in.Fingerprint}
	var err error
	if happened {
		err = a.atom.ResolveInDoubt(ctx, doubt, result)
	} else {
		err = a.atom.ResolveInDoubtFailed(ctx, doubt, reason)
	}
	if err != nil {
		return engineError(err, "")
	}
	a.rs.handedOut.remove(c.in.Key) // the client found what happened
	a.mu.Lock()
	defer a.mu.Unlock()
	if happened {
		c.resolved = true
		c.result = append([]byte(nil), result...)
		c.setStateLocked(callDone)
		return nil
	}
	c.errMsg = reason
	if !retry {
		c.resolved = true
		c.setStateLocked(callFailed)
		return nil
	}
	c.retried = true
	// Execute again under the in-doubt key: an explicit key takes no
	// default-key index, so no later key moves.
	act := c.act
	act.Key = c.in.Key
	c.setStateLocked(callStarting)
	a.dispatchLocked(c, act)
	return nil
}

// waitCall waits until call c leaves the states in busy, the attempt is
// abandoned, ctx ends, or the server's wait bound passes; it returns
// whether c left them.
func (a *attempt) waitCall(ctx context.Context, c *call, busy func(callState) bool) bool {
	timer := time.NewTimer(a.rs.srv.cfg.callWait)
	defer timer.Stop()
	for {
		a.mu.Lock()
		st, ch := c.state, c.changed
		a.mu.Unlock()
		if !busy(st) {
			return true
		}
		select {
		case <-ch:
		case <-a.abandonCh:
			// Give the exec's panic a moment to land the call in doubt.
			select {
			case <-ch:
			case <-timer.C:
				return false
			case <-ctx.Done():
				return false
			}
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// answer is the protocol's view of call c now.
func (a *attempt) answer(c *call) (callResponse, *apiError) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return c.answerLocked()
}

func (c *call) answerLocked() (callResponse, *apiError) {
	if c.state == callError {
		return callResponse{}, c.apiErr
	}
	r := callResponse{Call: c.n, Status: c.state.String(), Tool: c.req.Tool, Key: c.key(), Replayed: c.replayed, Resolved: c.resolved,
		Attempt: c.attempt}
	if c.state == callFailed {
		r.GaveUp = c.gaveUp
	}
	if c.in != nil {
		r.Index, r.Fingerprint = c.in.Index, c.in.Fingerprint.String()
	}
	switch c.state {
	case callDone:
		r.setResult(c.result)
	case callFailed:
		r.Error = c.errMsg
	}
	return r, nil
}

// keySet is a set of idempotency keys, safe for concurrent use. A run's
// handedOut holds the keys of the calls whose execution was handed to a
// client and whose attempt was then abandoned (lease expiry, takeover)
// before the client reported an outcome: that client may still be
// executing them, and a later call of the action is answered in_doubt,
// never execute, even for an idempotent action, until a client resolves
// it (fencing: no action executed again while an earlier executor could
// still be executing it).
type keySet struct {
	mu sync.Mutex
	m  map[string]bool
}

func (s *keySet) add(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]bool{}
	}
	s.m[k] = true
}

func (s *keySet) has(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

func (s *keySet) remove(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
}

// attemptOf is the retry attempt an exec's context carries
// (ledger.AttemptFromContext), 0 if none.
func attemptOf(ctx context.Context) uint32 {
	n, _ := ledger.AttemptFromContext(ctx)
	return n
}
