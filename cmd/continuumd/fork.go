package main

// Forks over the wire: POST /v1/runs/{run}/fork {"at": N, "id": "new"}
// is the engine's DB.Fork(run, N, new). The new run's state at N is the
// source's StateAt(N), its seqs up to N answer from the source's history,
// and its first atom is N+1. A fork's default-key call that repeats the
// source's action at the same position (seq, default-key index), with the
// same tool and sanitized args, is the source's action: the engine gives
// it the source's key, so its certificate answers done without the client
// executing anything, and an in-doubt one is the source's doubt (I10,
// internal/lineage). The server tells the client that key: see
// call.adoptKeyLocked and attempt.lineageKey.

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/ledger"
)

// handleFork creates a fork. A fork repeated after a lost answer (the
// same id, source and at) answers the fork the first one made, 200
// instead of 201: a fork is the pure function of its source's committed
// history up to at, so the run that holds id is the one asked for. An id
// that names any other run is run_exists.
func (s *server) handleFork(r *http.Request, body []byte) (int, any, *apiError) {
	var req forkRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	if req.At == nil {
		return 0, nil, badRequest("at", "at is required: the source run's committed seq the fork starts from (0: its beginning)")
	}
	at := *req.At
	if aerr := scopeOf(r).checkRun(rightWrite, req.ID, "id"); aerr != nil {
		return 0, nil, aerr
	}
	if s.draining.Load() {
		return 0, nil, &apiError{Status: http.StatusServiceUnavailable, Code: codeShuttingDown, Message: "the server is shutting down: fork on the next one"}
	}
	src, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	// The server's context, not the request's: a client that disconnects
	// must not cut the fork's record off between the log and the answer.
	run, err := s.db.Fork(s.ctx, src.id, at, req.ID)
	switch {
	case err == nil:
		var lease *leaseJSON
		if rs := s.adopt(req.ID, run); rs != nil { // nil: erased already
			lease = rs.lease()
		}
		return http.StatusCreated, runInfoJSON(run.Info(), lease), nil
	case errors.Is(err, engine.ErrRunExists):
		return s.forkExists(r.Context(), src, at, req.ID)
	case errors.Is(err, engine.ErrInvalidRunID):
		return 0, nil, &apiError{Status: http.StatusBadRequest, Code: codeInvalidRunID, Field: "id", Message: err.Error()}
	case errors.Is(err, engine.ErrSeqOutOfRange):
		e := notFound(codeAtomNotFound, "at", "%v", err)
		e.Details = map[string]any{"last_seq": src.run.LastSeq()}
		return 0, nil, e
	}
	return 0, nil, engineError(err, "")
}

// forkExists answers a fork whose id names a run: that run if it is the
// fork asked for (a repeat), run_exists otherwise.
func (s *server) forkExists(ctx context.Context, src *runState, at uint64, id string) (int, any, *apiError) {
	// The engine holds id, so opening it creates nothing. (Through
	// runState(create=false) it could be unknown here for a moment: the
	// fork that made it, running concurrently, registers it after the
	// engine answers.)
	rs, aerr := s.runState(ctx, id, true)
	if aerr != nil {
		return 0, nil, aerr
	}
	origin, aerr := s.forkOrigin(ctx, src, at)
	if aerr != nil {
		return 0, nil, aerr
	}
	info := rs.run.Info()
	if info.Parent == origin && info.ForkedAt == at {
		return http.StatusOK, runInfoJSON(info, rs.lease()), nil
	}
	what := "a run that is not a fork"
	if info.Parent != "" {
		what = fmt.Sprintf("the fork of run %q at seq %d", info.Parent, info.ForkedAt)
	}
	e := conflict(codeRunExists, "run %q exists: it is %s, not a fork of run %q at seq %d; fork under another id", id, what, src.id, at)
	e.Field = "id"
	e.Details = map[string]any{"parent": info.Parent, "forked_at": info.ForkedAt}
	return 0, nil, e
}

// forkOrigin is the run a fork of src at at names as its parent: src, or,
// when src is a fork and at is below its fork point, the ancestor whose
// own history holds at (DB.Fork forks from there, so that a lineage's
// links always name the run whose chain holds the fork point).
func (s *server) forkOrigin(ctx context.Context, src *runState, at uint64) (string, *apiError) {
	info := src.run.Info()
	for info.Parent != "" && at < info.ForkedAt {
		p, aerr := s.runState(ctx, info.Parent, false)
		if aerr != nil {
			return "", aerr
		}
		info = p.run.Info()
	}
	return info.ID, nil
}

// adoptKeyLocked makes c's intent carry key, the one the engine executes
// the action under or reports it in doubt with. It differs from the key
// the server derived at dispatch only in a fork, for a default-key call
// that repeats its parent's action at the same position: the engine gives
// it the parent's key (I10), and the client must execute, or reconcile
// with the downstream, under that key, and resolve that action.
func (c *call) adoptKeyLocked(key string) {
	if c.in == nil || c.in.Key == key {
		return
	}
	fp, err := ledger.Action{Tool: c.in.Tool, Args: c.in.Args, Key: key}.Fingerprint()
	if err != nil {
		return // not for args the ledger canonicalized already
	}
	in := *c.in
	in.Key, in.Fingerprint = key, fp
	c.in = &in
}

// lineageKey returns the key under which the engine answered call c, a
// default-key call of a fork, from a certificate without calling exec
// (exec and the in-doubt error name the key themselves). It is in.Key
// unless the parent's action at the same position is the same action:
// internal/lineage's rule (lineage.Key), read here through the engine's
// API, since the engine does not say which key it used:
//
//   - a committed parent atom: its actions as the log holds them, the
//     first whose intent is of this seq and default-key index (exactly
//     the engine's choice);
//   - the parent's atom in flight: the calls its attempt on this server
//     has done, then the actions of its interrupted atom, the first of
//     this index. These change while the parent works, so the engine's
//     choice, made a moment earlier, may differ; the key shown is then
//     the one the parent's action has now.
//
// The action matches when the candidate's fingerprint is that of this
// call's tool and args under the candidate's key.
func (a *attempt) lineageKey(ctx context.Context, in *ledger.Intent) string {
	info := a.rs.run.Info()
	if info.Parent == "" || a.seq <= info.ForkedAt {
		return in.Key
	}
	p, aerr := a.rs.srv.runState(ctx, info.Parent, false)
	if aerr != nil {
		return in.Key
	}
	type candidate struct {
		key string
		fp  ledger.Fingerprint
	}
	var cands []candidate
	if last := p.run.LastSeq(); a.seq <= last {
		ai, err := p.run.Atom(ctx, a.seq)
		if err != nil {
			return in.Key
		}
		for _, act := range ai.Actions {
			// Tool is "" when the log has no intent of the action.
			if act.Tool != "" && act.Seq == a.seq && act.Index == in.Index {
				cands = append(cands, candidate{act.Key, act.Fingerprint})
				break
			}
		}
	} else if a.seq == last+1 {
		p.mu.Lock()
		cur := p.mu.cur
		p.mu.Unlock()
		if cur != nil {
			cur.mu.Lock()
			for _, pc := range cur.mu.calls {
				if cur.mu.state != attemptOpen {
					break
				}
				if pc.state == callDone && pc.in != nil && pc.in.Index == in.Index {
					cands = append(cands, candidate{pc.in.Key, pc.in.Fingerprint})
				}
			}
			cur.mu.Unlock()
		}
		if seq, acts, err := p.run.Interrupted(ctx); err == nil && seq == a.seq {
			for _, act := range acts {
				if act.Index == in.Index && act.Key != "" {
					cands = append(cands, candidate{act.Key, act.Fingerprint})
				}
			}
		}
		if len(cands) > 1 {
			cands = cands[:1]
		}
	}
	for _, c := range cands {
		fp, err := ledger.Action{Tool: in.Tool, Args: in.Args, Key: c.key}.Fingerprint()
		if err == nil && fp == c.fp {
			return c.key
		}
	}
	return in.Key
}
