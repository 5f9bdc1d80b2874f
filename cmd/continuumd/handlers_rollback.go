package main

// Rollback with compensations over the wire (engine Run.Rollback,
// PendingRollback, ResolveCompensation; docs/DESIGN.md "Compensation and
// rollback"). The server runs the engine's Rollback; its exec of each
// compensation is the client's, exactly as a call's is:
//
//	POST /v1/runs/{run}/rollback {"to", "allow_not_undone"}
//	  -> {"status": "execute", "step": {"n", "key", "tool", "args", "undoes"}}   the intent is durable: run it with key
//	POST /v1/runs/{run}/rollback/outcome {"step": n, "result"}
//	  -> the next step, or {"status": "done", "seq", "undone", ...}            the run is at to's state
//
// The engine's job for the run stays in the server while it waits for a
// client: a client that vanishes leaves its compensation waiting, and the
// next POST .../rollback (any client) attaches to it. A compensation that
// was handed out to execute is then in doubt to the new client (unless
// idempotent: execute it again with the same key): it asks the downstream
// and resolves (POST .../rollback/resolve {"key", "result" | "failed"}:
// failed hands it out to execute again, under the same key). A restart of
// the server leaves the rollback pending, as a crash does in Go: the next
// POST .../rollback with the same to resumes it, certified compensations
// are not run again, and one in doubt answers in_doubt until resolved.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/ledger"
)

type rollbackRequest struct {
	To             *uint64 `json:"to"`
	AllowNotUndone bool    `json:"allow_not_undone"`
	// RequestID makes a request repeated after a lost answer answer the
	// rollback it made (done), instead of rolling back again.
	RequestID string `json:"request_id"`
}

type rollbackOutcomeRequest struct {
	Step         *int    `json:"step"`
	Result       *string `json:"result"`
	ResultBase64 *string `json:"result_base64"`
	Error        *string `json:"error"`
}

type rollbackResolveRequest struct {
	Key          string  `json:"key"`
	Result       *string `json:"result"`
	ResultBase64 *string `json:"result_base64"`
	Failed       *string `json:"failed"`
}

// undoJSON is an action a rollback reaches (engine.Undo).
type undoJSON struct {
	Seq         uint64 `json:"seq"`
	Tool        string `json:"tool"`
	Fingerprint string `json:"fingerprint"`
	// Compensation is the tool that undoes it; absent: it has none.
	Compensation string `json:"compensation,omitempty"`
}

// compStepJSON is a compensation the client is to run.
type compStepJSON struct {
	N          int             `json:"n"`
	Key        string          `json:"key"`
	Tool       string          `json:"tool"`
	Args       json.RawMessage `json:"args"`
	Idempotent bool            `json:"idempotent"`
	Undoes     undoJSON        `json:"undoes"`
}

// rollbackResponse answers every rollback request. Status: "execute" (run
// step's compensation with its key, then post its outcome), "in_doubt"
// (its outcome is unknown: ask the downstream with key, then resolve),
// "running" (the engine is writing: repeat the request), "done" (the
// rollback completed: seq is the atom that completed it), "failed" (the
// client reported the compensation did not take effect: the rollback is
// pending; POST .../rollback again runs it again).
type rollbackResponse struct {
	Status    string           `json:"status"`
	Run       string           `json:"run"`
	To        uint64           `json:"to"`
	Step      *compStepJSON    `json:"step,omitempty"`
	Key       string           `json:"key,omitempty"` // in_doubt: the compensation's key
	Error     string           `json:"error,omitempty"`
	Seq       uint64           `json:"seq,omitempty"`
	Undone    []undoJSON       `json:"undone,omitempty"`
	Results   []callResultJSON `json:"results,omitempty"`
	NotUndone []undoJSON       `json:"not_undone,omitempty"`
	Resumed   bool             `json:"resumed,omitempty"`
}

// callResultJSON is a compensation's result: text, or base64 when it is
// not UTF-8.
type callResultJSON struct {
	Result       *string `json:"result,omitempty"`
	ResultBase64 *string `json:"result_base64,omitempty"`
}

// pendingJSON answers GET /v1/runs/{run}/rollback.
type pendingJSON struct {
	Run     string            `json:"run"`
	Pending bool              `json:"pending"`
	To      uint64            `json:"to,omitempty"`
	Running *rollbackResponse `json:"running,omitempty"`
}

// rollbackJob is the engine's Rollback of one run, running in the server.
type rollbackJob struct {
	rs        *runState
	to        uint64
	requestID string
	mu        struct {
		sync.Mutex
		step    *compStep // the compensation waiting for its outcome
		steps   int       // compensations handed to the client so far
		done    bool
		res     *engine.RollbackResult
		err     error
		changed chan struct{}
	}
}

// compStep is one compensation the engine asked the client to run.
type compStep struct {
	n      int
	u      engine.Undo
	key    string
	handed bool // answered execute at least once
	report chan outcome
}

func (j *rollbackJob) notifyLocked() {
	close(j.mu.changed)
	j.mu.changed = make(chan struct{})
}

func undoOf(u engine.Undo) undoJSON {
	out := undoJSON{Seq: u.Seq, Tool: u.Tool, Fingerprint: u.Action.String()}
	if u.Compensation != nil {
		out.Compensation = u.Compensation.Tool
	}
	return out
}

// exec is the engine's exec of compensation u: it hands it to the client
// and waits for the outcome. The server stopping ends it by a panic, which
// leaves the compensation in doubt (a durable intent without a
// certificate) and the rollback pending, as a crash does.
func (j *rollbackJob) exec(ctx context.Context, u engine.Undo) ledger.Exec {
	return func(ectx context.Context, key string) ([]byte, error) {
		st := &compStep{u: u, key: key, report: make(chan outcome, 1)}
		j.mu.Lock()
		st.n = j.mu.steps
		j.mu.steps++
		j.mu.step = st
		j.notifyLocked()
		j.mu.Unlock()
		select {
		case o := <-st.report:
			j.mu.Lock()
			j.mu.step = nil
			j.mu.Unlock()
			if o.err != "" {
				return nil, &clientError{msg: o.err}
			}
			return o.result, nil
		case <-ctx.Done():
		case <-ectx.Done():
		}
		panic(abandonPanic{})
	}
}

// start runs the engine's Rollback of job j in its own goroutine.
func (s *server) startRollback(j *rollbackJob, allow bool) {
	s.rollbacks.Add(1)
	go func() {
		defer s.rollbacks.Done()
		var res *engine.RollbackResult
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(abandonPanic); !ok {
						s.log.Error("continuumd: panic in the engine's Rollback", "run", j.rs.id, "panic", r)
					}
					err = &apiError{Status: http.StatusServiceUnavailable, Code: codeShuttingDown, Message: "the server is stopping: the rollback stays pending; repeat it against the next one"}
				}
			}()
			res, err = j.rs.run.Rollback(s.ctx, j.to, engine.RollbackOptions{Exec: func(u engine.Undo) ledger.Exec { return j.exec(s.ctx, u) }, AllowNotUndone: allow})
		}()
		// The run's state and the job's change together (rs.mu, then
		// j.mu): a client woken by the job's end and sending its next
		// request at once finds the run without a rollback running, not
		// this one still (rollback_pending).
		j.rs.mu.Lock()
		j.mu.Lock()
		j.mu.done, j.mu.res, j.mu.err, j.mu.step = true, res, err, nil
		j.notifyLocked()
		j.mu.Unlock()
		if j.rs.mu.rollback == j {
			j.rs.mu.rollback = nil
		}
		j.rs.mu.lastRollback = j
		var doubt *ledger.InDoubtError
		if errors.As(err, &doubt) {
			j.rs.mu.compDoubt = doubt
		}
		j.rs.mu.Unlock()
	}()
}

// answer is j's state as an answer; attach says the request comes from a
// client that may not be the one the current compensation was handed to.
func (j *rollbackJob) answer(attach bool) (rollbackResponse, *apiError) {
	j.mu.Lock()
	defer j.mu.Unlock()
	resp := rollbackResponse{Run: j.rs.id, To: j.to}
	switch {
	case j.mu.step != nil:
		st := j.mu.step
		c := st.u.Compensation
		resp.Step = &compStepJSON{N: st.n, Key: st.key, Tool: c.Tool, Args: json.RawMessage(c.Args), Idempotent: c.Idempotent, Undoes: undoOf(st.u)}
		if len(c.Args) == 0 {
			resp.Step.Args = json.RawMessage("null")
		}
		if attach && st.handed && !c.Idempotent {
			resp.Status, resp.Key = "in_doubt", st.key
			return resp, nil
		}
		st.handed = true
		resp.Status = "execute"
	case !j.mu.done:
		resp.Status = "running"
	case j.mu.err == nil:
		r := j.mu.res
		resp.Status, resp.Seq, resp.Resumed = "done", r.Seq, r.Resumed
		for i, u := range r.Undone {
			resp.Undone = append(resp.Undone, undoOf(u))
			var cr callResultJSON
			cr.Result, cr.ResultBase64 = textOrBase64(r.Results[i])
			resp.Results = append(resp.Results, cr)
		}
		for _, u := range r.NotUndone {
			resp.NotUndone = append(resp.NotUndone, undoOf(u))
		}
	default:
		return resp, rollbackError(j.mu.err, j.mu.res, &resp)
	}
	return resp, nil
}

// rollbackError is the answer to a rollback that stopped with err: an
// in-doubt compensation and one the client failed are answers (status
// in_doubt, failed), the rest errors.
func rollbackError(err error, res *engine.RollbackResult, resp *rollbackResponse) *apiError {
	var doubt *ledger.InDoubtError
	var ce *clientError
	var ae *apiError
	switch {
	case errors.As(err, &doubt):
		resp.Status, resp.Key, resp.Error = "in_doubt", doubt.Key, err.Error()
		return nil
	case errors.As(err, &ce):
		resp.Status, resp.Error = "failed", err.Error()
		return nil
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, engine.ErrNotUndone):
		e := conflict(codeNotUndone, "%v", err)
		var nu []undoJSON
		if res != nil {
			for _, u := range res.NotUndone {
				nu = append(nu, undoOf(u))
			}
		}
		e.Field, e.Details = "allow_not_undone", map[string]any{"not_undone": nu}
		return e
	case errors.Is(err, engine.ErrSeqOutOfRange):
		return badRequest("to", "%v", err)
	}
	return engineError(err, "to")
}

// wait waits until j changes from what seen was (or the request ends, or
// callWait passes: the answer is then the current state).
func (j *rollbackJob) wait(ctx context.Context, d time.Duration, moved func() bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		j.mu.Lock()
		ch, ok := j.mu.changed, moved()
		j.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-t.C:
			return
		}
	}
}

func (s *server) handleRollback(r *http.Request, body []byte) (int, any, *apiError) {
	var req rollbackRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	if req.To == nil {
		return 0, nil, badRequest("to", "to is required: the seq whose state the run goes back to")
	}
	if s.draining.Load() {
		return 0, nil, &apiError{Status: http.StatusServiceUnavailable, Code: codeShuttingDown, Message: "the server is shutting down: roll back on the next one"}
	}
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	rs.beginMu.Lock()
	rs.mu.Lock()
	j, last := rs.mu.rollback, rs.mu.lastRollback
	attach := j != nil
	if j != nil && j.to != *req.To {
		rs.mu.Unlock()
		rs.beginMu.Unlock()
		e := conflict(codeRollbackPending, "run %q is rolling back to seq %d: finish that rollback (to = %d) first", rs.id, j.to, j.to)
		e.Field, e.Details = "to", map[string]any{"to": j.to}
		return 0, nil, e
	}
	if j == nil && last != nil && req.RequestID != "" && last.requestID == req.RequestID {
		rs.mu.Unlock()
		rs.beginMu.Unlock()
		return s.rollbackAnswer(last, false) // a repeated request: what it did
	}
	if j == nil {
		j = &rollbackJob{rs: rs, to: *req.To, requestID: req.RequestID}
		j.mu.changed = make(chan struct{})
		rs.mu.rollback, rs.mu.compDoubt = j, nil
		s.startRollback(j, req.AllowNotUndone)
	}
	rs.mu.Unlock()
	rs.beginMu.Unlock()
	if !attach {
		j.wait(r.Context(), s.cfg.callWait, func() bool { return j.mu.step != nil || j.mu.done })
	}
	return s.rollbackAnswer(j, attach)
}

func (s *server) rollbackAnswer(j *rollbackJob, attach bool) (int, any, *apiError) {
	resp, aerr := j.answer(attach)
	if aerr != nil {
		return 0, nil, aerr
	}
	return 200, resp, nil
}

// runningRollback is the rollback job of the run a request names.
func (s *server) runningRollback(r *http.Request) (*runState, *rollbackJob, *apiError) {
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return nil, nil, aerr
	}
	rs.mu.Lock()
	j := rs.mu.rollback
	rs.mu.Unlock()
	return rs, j, nil
}

func (s *server) handleRollbackOutcome(r *http.Request, body []byte) (int, any, *apiError) {
	var req rollbackOutcomeRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	result, hasResult, aerr := pickBytes("result", req.Result, req.ResultBase64)
	switch {
	case aerr != nil:
		return 0, nil, aerr
	case req.Step == nil:
		return 0, nil, badRequest("step", "step is required: the n of the compensation whose outcome this is")
	case hasResult == (req.Error != nil):
		return 0, nil, badRequest("result", "an outcome is a result (or result_base64) or an error, one of them")
	case req.Error != nil && *req.Error == "":
		return 0, nil, badRequest("error", "error must say why the compensation did not take effect")
	}
	_, j, aerr := s.runningRollback(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if j == nil {
		return 0, nil, notFound(codeRollbackNotFound, "step", "run %q has no rollback running in this server: POST .../rollback (again) to resume a pending one", r.PathValue("run"))
	}
	j.mu.Lock()
	st := j.mu.step
	switch {
	case st != nil && st.n == *req.Step:
		o := outcome{result: result}
		if req.Error != nil {
			o.err = *req.Error
		}
		select {
		case st.report <- o:
		default: // delivered already
		}
	case *req.Step >= j.mu.steps:
		j.mu.Unlock()
		return 0, nil, conflict(codeNotExecuting, "the rollback of run %q has handed out no compensation %d", j.rs.id, *req.Step)
	}
	n := *req.Step
	j.mu.Unlock()
	// Wait for the compensation to be certified and the next step (or the
	// end); a repeated outcome answers the current state.
	j.wait(r.Context(), s.cfg.callWait, func() bool { return j.mu.done || (j.mu.step != nil && j.mu.step.n > n) })
	return s.rollbackAnswer(j, false)
}

func (s *server) handleRollbackResolve(r *http.Request, body []byte) (int, any, *apiError) {
	var req rollbackResolveRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	result, hasResult, aerr := pickBytes("result", req.Result, req.ResultBase64)
	switch {
	case aerr != nil:
		return 0, nil, aerr
	case req.Key == "":
		return 0, nil, badRequest("key", "key is required: the in-doubt compensation's key")
	case hasResult == (req.Failed != nil):
		return 0, nil, badRequest("result", "a resolution is a result (the compensation happened) or failed (it did not), one of them")
	case req.Failed != nil && *req.Failed == "":
		return 0, nil, badRequest("failed", "failed must say why the compensation is known not to have happened")
	}
	rs, j, aerr := s.runningRollback(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if j != nil {
		j.mu.Lock()
		st := j.mu.step
		if st == nil || st.key != req.Key {
			j.mu.Unlock()
			return 0, nil, conflict(codeNotInDoubt, "the rollback of run %q has no compensation in doubt with key %q", rs.id, req.Key)
		}
		if hasResult {
			select {
			case st.report <- outcome{result: result}:
			default:
			}
			n := st.n
			j.mu.Unlock()
			j.wait(r.Context(), s.cfg.callWait, func() bool { return j.mu.done || (j.mu.step != nil && j.mu.step.n > n) })
			return s.rollbackAnswer(j, false)
		}
		st.handed = false // it did not happen: hand it out again, same key
		j.mu.Unlock()
		return s.rollbackAnswer(j, false)
	}
	// The rollback stopped on a compensation in doubt (after a restart or
	// a lost client): settle it through the engine, then resume.
	rs.mu.Lock()
	doubt := rs.mu.compDoubt
	rs.mu.Unlock()
	if doubt == nil || doubt.Key != req.Key {
		if to, pending := rs.run.PendingRollback(); pending {
			return 0, nil, conflict(codeNotInDoubt, "run %q's pending rollback (to seq %d) has no compensation known in doubt with key %q: POST .../rollback to resume it and learn which is", rs.id, to, req.Key)
		}
		return 0, nil, conflict(codeNotInDoubt, "run %q has no pending rollback", rs.id)
	}
	var err error
	if hasResult {
		err = rs.run.ResolveCompensation(s.ctx, doubt, result)
	} else {
		err = rs.run.ResolveCompensationFailed(s.ctx, doubt, *req.Failed)
	}
	if err != nil {
		return 0, nil, engineError(err, "key")
	}
	rs.mu.Lock()
	if rs.mu.compDoubt == doubt {
		rs.mu.compDoubt = nil
	}
	rs.mu.Unlock()
	to, _ := rs.run.PendingRollback()
	return 200, rollbackResponse{Status: "resolved", Run: rs.id, To: to, Key: req.Key}, nil
}

func (s *server) handlePendingRollback(r *http.Request, _ []byte) (int, any, *apiError) {
	rs, j, aerr := s.runningRollback(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	out := pendingJSON{Run: rs.id}
	out.To, out.Pending = rs.run.PendingRollback()
	if j != nil {
		j.mu.Lock()
		resp := rollbackResponse{Run: rs.id, To: j.to, Status: "running"}
		if st := j.mu.step; st != nil {
			resp.Status, resp.Key = "executing", st.key
		}
		j.mu.Unlock()
		out.Running = &resp
	}
	return 200, out, nil
}
