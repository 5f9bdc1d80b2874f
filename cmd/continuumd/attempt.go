package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/ledger"
)

// An attempt is one client's try at one atom: the engine's Atom, held by
// the server on behalf of a client that may be in another process, on
// another machine, or gone. It holds its run's lease; every request on it
// renews the lease, and when the lease runs out with no request in
// progress (or another client takes the run over) the attempt is
// abandoned:
//
//   - every call whose execution the server still waits for is left in
//     doubt: its exec ends by a panic, which the ledger documents as
//     leaving a durable intent without a certificate (ledger.Ledger.Do),
//     so no later call executes it again unless it is idempotent;
//   - the atom is failed (Atom.Fail: its seq is not consumed, its
//     certified actions stay certified), so that the next attempt begins
//     the same seq with its default keys numbered from 0 again, exactly as
//     an agent re-begun after a crash;
//   - the actions it had started are kept, with their states, and given to
//     the next attempt of the same seq (beginResponse.Interrupted).
//
// A server that stops (SIGTERM) abandons its attempts the same way but
// does not fail their atoms: the engine then reports them as interrupted
// when the store is opened again, as it does after a crash.
type attempt struct {
	token string
	rs    *runState
	// branch is the branch's name for an attempt begun by POST
	// .../branches (engine Run.Branch), "" for one of a begin; base is
	// the seq whose state it reads. A branch has no seq until it commits
	// (seq is 0; mu.seq is the one its commit took).
	branch    string
	base      uint64
	requestID string // a branch's begin's request_id
	atom      *engine.Atom
	seq       uint64
	lease     time.Duration
	// abandonCh is closed when the attempt starts being abandoned: a
	// waiting exec then ends and leaves its action in doubt, and waiting
	// requests answer lease_lost.
	abandonCh chan struct{}
	// ended is closed (by end) once the attempt is committed, failed or
	// abandoned (after abandon has drained it).
	ended   chan struct{}
	endOnce sync.Once
	// interrupted is what begin reported of the seq's earlier attempt.
	interrupted *interruptedJSON
	// inherited are the actions of the interrupted attempt of this seq that
	// begin reported; abandonment reports them again, updated by this
	// attempt's calls.
	inherited []actionStateJSON
	// pins counts the requests in progress on the attempt (Add only under
	// mu while the attempt is open and not closing).
	pins sync.WaitGroup
	// execs counts the goroutines running the engine's Do for its calls.
	execs sync.WaitGroup
	// appends are the chunks the attempt appended, per stream, in order
	// (handlers_streams.go): an append repeated with its index is not
	// appended twice.
	appends struct {
		sync.Mutex
		sent map[string][]sentChunk
	}

	mu struct {
		sync.Mutex
		state   attemptState
		closing bool   // abandonment started: no new request is pinned
		reason  string // abandoned: why; failed: the client's reason
		head    string // committed: the atom's head (hex)
		seq     uint64 // committed: the atom's seq (a branch's, taken at its commit)
		// conflict is a branch's commit's conflict: a repeated commit
		// answers it again.
		conflict *apiError
		delta    [sha256.Size]byte // committed: the digest of the delta's encoding (a repeated commit must carry the same)
		expires  time.Time
		active   int // pinned requests; the lease does not run out while > 0
		calls    []*call
		// defaultKeys counts the calls dispatched with a default key: the
		// engine's index of the next one (Atom numbers its default-key Do
		// calls; this attempt makes them in call order, see dispatch).
		defaultKeys uint32
		// lastStarted is closed when the most recent dispatch left the
		// starting state, after the engine took its default-key index.
		lastStarted chan struct{}
	}
}

type attemptState uint8

const (
	attemptOpen attemptState = iota
	attemptCommitted
	attemptFailed
	attemptAbandoned
)

func (s attemptState) String() string {
	switch s {
	case attemptOpen:
		return "open"
	case attemptCommitted:
		return "committed"
	case attemptFailed:
		return "failed"
	}
	return "abandoned"
}

// A call is one action of an attempt, numbered by the client from 0 in
// the order it makes them. The number makes a repeated request (after a
// lost answer) find the call it repeats instead of making another.
type call struct {
	n   int
	req callRequest
	act ledger.Action
	// in is the intent the engine records for the call (its key, index and
	// fingerprint), computed the way the engine does; nil if the action is
	// invalid (the engine then refuses it and state is callError). In a
	// fork, a default-key call that repeats its parent's action takes the
	// parent's key: the engine's Do says so (adoptKeyLocked), and in is
	// replaced under the attempt's mu, by the goroutine running the call.
	in *ledger.Intent

	// The fields below are guarded by the attempt's mu.
	state    callState
	result   []byte
	errMsg   string
	apiErr   *apiError
	replayed bool // done from a certificate made before this call
	resolved bool // done or failed by a resolution
	retried  bool // resolved as failed and dispatched again (resolve with retry)
	// report carries the client's outcome to the waiting exec; reported
	// says that one was delivered for the current execution.
	report   chan outcome
	reported bool
	// changed is closed and replaced at every change of state.
	changed chan struct{}
	// tries counts the executions handed out for a call with a retry
	// policy, in this server's Do of it: 1 for the first, each exec of a
	// retry adds one. attempt is the ledger's number of the one executing
	// (or last executed), as the answer gives it. Written under the
	// attempt's mu; tries is read without it (waitCall's busy).
	tries   atomic.Uint32
	attempt uint32
	gaveUp  string // why the policy gave the action up (failed)
	// running: a goroutine runs the engine's Do for this call.
	running bool

	// resolveMu orders the resolutions of the call: a repeated one waits
	// for the first and answers with its outcome.
	resolveMu sync.Mutex
}

type callState uint8

const (
	callStarting  callState = iota // dispatched: the engine writes the intent, or waits for another execution of the action
	callExecuting                  // the engine called exec: the client executes and reports the outcome
	callDone                       // certified result (done or resolved)
	callFailed                     // certified as failed (the exec's error, or a resolution that it did not happen)
	callInDoubt                    // dispatched earlier, outcome unknown
	callError                      // the engine refused the call
)

func (s callState) String() string {
	switch s {
	case callStarting:
		return "pending"
	case callExecuting:
		return "execute"
	case callDone:
		return "done"
	case callFailed:
		return "failed"
	case callInDoubt:
		return "in_doubt"
	}
	return "error"
}

type outcome struct {
	result  []byte
	err     string // non-empty: the effect did not happen
	attempt uint32 // the retry attempt it is of (0: the current one)
}

// abandonPanic is what a waiting exec panics with when its attempt is
// abandoned; runDo recovers it. The ledger lands the action in doubt.
type abandonPanic struct{}

// clientError is the error an exec returns for an outcome the client
// reported as failed: its message is what the certificate records.
type clientError struct{ msg string }

func (e *clientError) Error() string { return e.msg }

// setStateLocked moves c to st and wakes everyone waiting on it.
func (c *call) setStateLocked(st callState) {
	c.state = st
	close(c.changed)
	c.changed = make(chan struct{})
}

// pin registers a request on the attempt and renews its lease. It fails
// when the attempt is abandoned or being abandoned (lease_lost), or, with
// needOpen, when it is committed or failed (attempt_done).
func (a *attempt) pin(needOpen bool) *apiError {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.closing || a.mu.state == attemptAbandoned {
		return a.lostLocked()
	}
	if needOpen && a.mu.state != attemptOpen {
		return conflict(codeAttemptDone, "attempt %s of run %q seq %d is %s", a.token, a.rs.id, a.seq, a.mu.state)
	}
	a.mu.active++
	a.mu.expires = time.Now().Add(a.lease)
	a.pins.Add(1)
	return nil
}

func (a *attempt) unpin() {
	a.mu.Lock()
	a.mu.active--
	a.mu.expires = time.Now().Add(a.lease)
	a.mu.Unlock()
	a.pins.Done()
}

func (a *attempt) lostLocked() *apiError {
	e := conflict(codeLeaseLost, "attempt %s of run %q seq %d was abandoned (%s): its calls waiting for an outcome are in doubt; begin again",
		a.token, a.rs.id, a.seq, a.mu.reason)
	e.Details = map[string]any{"reason": a.mu.reason, "seq": a.seq}
	return e
}

// expired reports whether the lease ran out with no request in progress.
func (a *attempt) expired(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.state == attemptOpen && !a.mu.closing && a.mu.active == 0 && now.After(a.mu.expires)
}

// abandon ends the attempt on behalf of a client that is gone: see the
// type's comment. fail says whether to fail the atom (lease expiry,
// takeover) or leave it running for the engine to report as interrupted
// (shutdown). It waits until the attempt is drained; a second call waits
// for the first.
func (a *attempt) abandon(ctx context.Context, reason string, fail bool) {
	a.mu.Lock()
	if a.mu.state != attemptOpen || a.mu.closing {
		a.mu.Unlock()
		<-a.ended
		return
	}
	a.mu.closing, a.mu.reason = true, reason
	close(a.abandonCh)
	a.mu.Unlock()

	a.pins.Wait()  // requests in progress end (a commit may still land)
	a.execs.Wait() // every waiting exec has ended: its action is in doubt

	a.mu.Lock()
	open := a.mu.state == attemptOpen
	a.mu.Unlock()
	var failErr error
	if open && fail {
		failErr = a.atom.Fail(context.WithoutCancel(ctx), fmt.Sprintf("continuumd: attempt %s abandoned: %s", a.token, reason))
	}
	a.mu.Lock()
	if a.mu.state == attemptOpen {
		a.mu.state = attemptAbandoned
	}
	final := a.mu.state
	a.mu.closing = false
	a.mu.Unlock()
	if final == attemptAbandoned && a.branch == "" {
		a.rs.noteAbandoned(a, reason) // a branch has no seq to begin again: a retry branches under its name
	}
	if failErr != nil {
		a.rs.srv.log.Error("continuumd: failing an abandoned atom", "run", a.rs.id, "seq", a.seq, "err", failErr)
	}
	if final == attemptAbandoned {
		a.rs.srv.log.Info("continuumd: attempt abandoned", "run", a.rs.id, "seq", a.seq, "attempt", a.token, "reason", reason)
	}
	a.end()
}

// end marks the attempt ended (committed, failed or abandoned): the
// reaper no longer checks its lease, and forgets it once it has been
// retained for cfg.retain. The caller holds neither a.mu nor the server's.
func (a *attempt) end() {
	a.endOnce.Do(func() {
		close(a.ended)
		s := a.rs.srv
		s.mu.Lock()
		delete(s.mu.open, a)
		s.mu.done = append(s.mu.done, a)
		s.mu.Unlock()
	})
}

// interruptedActions is what an abandoned attempt leaves the next one:
// the actions its begin inherited, then its own calls that reached the
// engine, each with its latest state.
func (a *attempt) interruptedActions() []actionStateJSON {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append([]actionStateJSON(nil), a.inherited...)
	for _, c := range a.mu.calls {
		if c.in == nil || c.state == callError {
			continue
		}
		n := c.n
		st := actionStateJSON{Call: &n, Index: c.in.Index, Fingerprint: c.in.Fingerprint.String(),
			Tool: c.in.Tool, Key: c.in.Key, Idempotent: c.in.Idempotent}
		switch {
		case c.state == callDone && c.resolved:
			st.Status = "resolved"
		case c.state == callDone:
			st.Status = "done"
		case c.state == callFailed:
			st.Status = "failed"
		default: // in doubt, or executing when its exec was ended
			st.Status = "in_doubt"
		}
		replaced := false
		for i := range out {
			if out[i].Fingerprint == st.Fingerprint {
				out[i], replaced = st, true
			}
		}
		if !replaced {
			out = append(out, st)
		}
	}
	return out
}

func (a *attempt) describe() attemptJSON {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := attemptJSON{Attempt: a.token, Run: a.rs.id, Seq: a.seq, State: a.mu.state.String(), Reason: a.mu.reason,
		LeaseMS: a.lease.Milliseconds(), LeaseExpires: a.mu.expires.UTC(), Head: a.mu.head, Calls: []callResponse{}}
	if a.branch != "" {
		out.Branch, out.Base, out.Seq = a.branch, &a.base, a.mu.seq
	}
	if a.mu.closing {
		out.State = "abandoning"
	}
	for _, c := range a.mu.calls {
		r, aerr := c.answerLocked()
		if aerr != nil {
			r = callResponse{Call: c.n, Status: "error", Tool: c.req.Tool, Key: c.key(), Error: aerr.Message}
		}
		out.Calls = append(out.Calls, r)
	}
	return out
}

// busyCalls lists the calls still starting or executing, which a commit
// must not leave behind.
func (a *attempt) busyCalls() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	var n []int
	for _, c := range a.mu.calls {
		if c.state == callStarting || c.state == callExecuting {
			n = append(n, c.n)
		}
	}
	return n
}
