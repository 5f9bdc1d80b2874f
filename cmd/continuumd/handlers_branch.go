package main

// Branches over the wire (engine Run.Branch; docs/DESIGN.md "The engine's API", Branches):
// several attempts of one run in flight at once, each reading the state at
// its base and taking its seq at its commit, which fails with 409 conflict
// if an atom committed after its base wrote a key the branch writes or
// declared it reads. A branch is an attempt like any other from its begin
// on: its calls, outcomes, resolutions, sends, receives, commit and fail
// are the attempt endpoints. Its default idempotency keys derive from the
// run and its name (ledger.BranchKey), so branching again under the same
// name, after a conflict, a fail, a lost lease or a restart of the server,
// gets the earlier attempt's certified results without executing again.

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/record"
)

// branchRequest begins a branch: POST /v1/runs/{run}/branches.
type branchRequest struct {
	// Name names the branch: one piece of work of the run (its retries
	// share it, and with it their certified actions).
	Name string `json:"name"`
	// Reads are the state keys the branch declares it read besides what
	// it writes: "objective", "scratchpad", "messages", "frame", or
	// "subgoal:ID", "memory:KEY", "pending:CALL_ID".
	Reads []string `json:"reads"`
	// RequestID makes a repeated request (after a lost answer) answer the
	// branch it began, while that one is open.
	RequestID string `json:"request_id"`
	// Takeover abandons an open attempt of a branch of that name (its
	// calls waiting for an outcome become in doubt, the branch is failed)
	// instead of answering run_held.
	Takeover bool           `json:"takeover"`
	LeaseMS  int64          `json:"lease_ms"`
	Call     *callRequest   `json:"call"`
	Commit   *commitRequest `json:"commit"`
}

// parseStateKey reads a state key as StateKey.String writes it.
func parseStateKey(s string) (record.StateKey, error) {
	kind, name, named := strings.Cut(s, ":")
	kinds := map[string]record.KeyKind{
		"objective": record.KeyObjective, "subgoal": record.KeySubgoal, "memory": record.KeyMemory,
		"scratchpad": record.KeyScratchpad, "messages": record.KeyMessages, "pending": record.KeyPending,
		"frame": record.KeyFrame,
	}
	k, ok := kinds[kind]
	if !ok {
		return record.StateKey{}, errors.New("the kind of a state key is objective, subgoal, memory, scratchpad, messages, pending or frame")
	}
	key := record.StateKey{Kind: k, Name: name}
	if named != (k == record.KeySubgoal || k == record.KeyMemory || k == record.KeyPending) {
		return record.StateKey{}, errors.New("subgoal, memory and pending keys are KIND:NAME, the others a kind alone")
	}
	if err := key.Check(); err != nil {
		return record.StateKey{}, err
	}
	return key, nil
}

// conflictError is the answer to a branch's commit that lost (engine
// *ConflictError): 409 conflict, nothing written, with the atom and key it
// lost to.
func conflictError(err error) *apiError {
	var ce *engine.ConflictError
	errors.As(err, &ce)
	e := conflict(codeConflict, "%v", err)
	e.Details = map[string]any{"branch": ce.Branch, "base": ce.Base, "seq": ce.Seq, "lost": ce.Lost}
	if !ce.Lost {
		e.Details["key"] = ce.Key.String()
	}
	return e
}

func (s *server) handleBranch(r *http.Request, body []byte) (int, any, *apiError) {
	var req branchRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	if err := record.CheckBranchName(req.Name); err != nil {
		return 0, nil, badRequest("name", "%v", err)
	}
	if len(req.Reads) > record.MaxBranchReads {
		return 0, nil, badRequest("reads", "a branch declares at most %d reads, not %d", record.MaxBranchReads, len(req.Reads))
	}
	reads := make([]engine.StateKey, len(req.Reads))
	for i, s := range req.Reads {
		k, err := parseStateKey(s)
		if err != nil {
			return 0, nil, badRequest(fmt.Sprintf("reads[%d]", i), "%q: %v", s, err)
		}
		reads[i] = k
	}
	rc, lease, aerr := s.beginTerms(req.Call != nil, req.Commit, req.LeaseMS, "branch")
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
	cur := rs.mu.branches[req.Name]
	rs.mu.Unlock()
	if cur != nil {
		if req.RequestID != "" && req.RequestID == cur.requestID {
			if resp, ok := cur.beginAnswer(); ok {
				return s.beginRide(r.Context(), cur, resp, &beginRequest{Call: req.Call}, rc) // a repeated request
			}
			if _, ok := cur.finished(attemptCommitted); ok && rc != nil {
				resp := cur.branchAnswer(beginResponse{Attempt: cur.token, Run: rs.id, LeaseMS: cur.lease.Milliseconds()})
				return s.beginRide(r.Context(), cur, resp, &beginRequest{}, rc)
			}
		}
		cur.mu.Lock()
		open, closing, expires := cur.mu.state == attemptOpen, cur.mu.closing, cur.mu.expires
		cur.mu.Unlock()
		switch {
		case open && closing:
			<-cur.ended
		case open && req.Takeover:
			s.counters.takeovers.Add(1)
			cur.abandon(s.ctx, "takeover", true)
		case open:
			e := conflict(codeRunHeld, "branch %q of run %q is held by another attempt until %s (its lease); branch with takeover to abandon it",
				req.Name, rs.id, expires.UTC().Format(time.RFC3339Nano))
			e.Field = "name"
			e.Details = map[string]any{"branch": req.Name, "lease_expires": expires.UTC()}
			return 0, nil, e
		}
	}

	atom, err := rs.run.Branch(s.ctx, req.Name, reads...)
	if err != nil {
		return 0, nil, engineError(err, "")
	}
	a := &attempt{token: newToken(), rs: rs, atom: atom, lease: lease, branch: req.Name, base: atom.Base(),
		requestID: req.RequestID, abandonCh: make(chan struct{}), ended: make(chan struct{})}
	a.mu.expires = time.Now().Add(lease)
	rs.mu.Lock()
	if rs.mu.branches == nil {
		rs.mu.branches = map[string]*attempt{}
	}
	rs.mu.branches[req.Name] = a
	rs.mu.Unlock()
	s.addAttempt(a)
	s.counters.begun.Add(1)
	resp, _ := a.beginAnswer()
	return s.beginRide(r.Context(), a, resp, &beginRequest{Call: req.Call}, rc)
}

// branchAnswer adds a branch's name and base to a begin's answer.
func (a *attempt) branchAnswer(resp beginResponse) beginResponse {
	if a.branch != "" {
		base := a.base
		resp.Branch, resp.Base = a.branch, &base
	}
	return resp
}
