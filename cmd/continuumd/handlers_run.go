package main

// The handlers of the store and its runs: health, stats, verify, the runs'
// list, open, info, state, one atom, the interrupted atom, end, and the
// erasures (of a run, of one memory key of a run).

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/continuumdb/continuum/engine"
)

func (s *server) handleHealth(r *http.Request, _ []byte) (int, any, *apiError) {
	return 200, map[string]any{"ok": true, "protocol": "v1", "store": s.db.StoreID(), "origin": s.db.Origin(), "draining": s.draining.Load()}, nil
}

func (s *server) handleStats(r *http.Request, _ []byte) (int, any, *apiError) {
	st := s.db.Stats()
	s.mu.Lock()
	open := 0
	for a := range s.mu.open {
		a.mu.Lock()
		if a.mu.state == attemptOpen {
			open++
		}
		a.mu.Unlock()
	}
	s.mu.Unlock()
	bg := ""
	if st.Background != nil {
		bg = st.Background.Error()
	}
	return 200, map[string]any{
		"engine": map[string]any{
			"runs": st.Runs, "atoms": st.Atoms, "fails": st.Fails, "actions": st.Actions, "deduped": st.Deduped,
			"snapshots": st.Snapshots, "checkpoints": st.Checkpoints, "open_ms": float64(st.Open.Duration.Microseconds()) / 1000,
			"interrupted_at_open": st.Open.Interrupted, "background_error": bg,
		},
		"server": map[string]any{
			"attempts_open": open, "attempts_begun": s.counters.begun.Load(), "attempts_committed": s.counters.committed.Load(),
			"attempts_failed": s.counters.failed.Load(), "leases_expired": s.counters.expired.Load(),
			"takeovers": s.counters.takeovers.Load(), "requests": s.counters.requests.Load(),
		},
	}, nil
}

func (s *server) handleVerify(r *http.Request, body []byte) (int, any, *apiError) {
	var req verifyRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	rep, aerr := s.verifyStore(r.Context(), &req)
	if aerr != nil {
		return 0, nil, aerr
	}
	return 200, rep, nil
}

func (s *server) handleListRuns(r *http.Request, _ []byte) (int, any, *apiError) {
	infos, err := s.db.Runs()
	if err != nil {
		return 0, nil, engineError(err, "")
	}
	s.mu.Lock()
	states := make(map[string]*runState, len(s.mu.runs))
	for id, rs := range s.mu.runs {
		states[id] = rs
	}
	s.mu.Unlock()
	out := make([]runJSON, 0, len(infos))
	sc := scopeOf(r)
	for _, info := range infos {
		if !sc.covers(info.ID) {
			continue // a scoped token lists only its runs
		}
		var lease *leaseJSON
		if rs := states[info.ID]; rs != nil {
			lease = rs.lease()
		}
		out = append(out, runInfoJSON(info, lease))
	}
	return 200, map[string]any{"runs": out}, nil
}

func (s *server) handleOpenRun(r *http.Request, body []byte) (int, any, *apiError) {
	var req struct{}
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), true)
	if aerr != nil {
		return 0, nil, aerr
	}
	return 200, runInfoJSON(rs.run.Info(), rs.lease()), nil
}

func (s *server) handleRunInfo(r *http.Request, _ []byte) (int, any, *apiError) {
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	return 200, runInfoJSON(rs.run.Info(), rs.lease()), nil
}

func (s *server) handleState(r *http.Request, _ []byte) (int, any, *apiError) {
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	seq := rs.run.LastSeq()
	if q := r.URL.Query(); q.Has("seq") {
		n, err := strconv.ParseUint(q.Get("seq"), 10, 64)
		if err != nil {
			return 0, nil, badRequest("seq", "seq must be a committed seq (a non-negative integer), not %q", q.Get("seq"))
		}
		seq = n
	}
	f, err := rs.run.StateAt(r.Context(), seq)
	if err != nil {
		return 0, nil, engineError(err, "seq")
	}
	return 200, frameJSON(rs.id, seq, f), nil
}

func (s *server) handleAtom(r *http.Request, _ []byte) (int, any, *apiError) {
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		return 0, nil, badRequest("seq", "seq must be a committed seq (1, 2, ...), not %q", r.PathValue("seq"))
	}
	info, err := rs.run.Atom(r.Context(), seq)
	if err != nil {
		return 0, nil, engineError(err, "seq")
	}
	return 200, atomJSON(info), nil
}

// interrupted reports the attempt of rs's next seq that ended without its
// client committing or failing it: the engine's interrupted atom (the
// server stopped while it ran) or the last abandoned attempt.
func (rs *runState) interrupted(ctx context.Context) (*interruptedJSON, error) {
	seq, acts, err := rs.run.Interrupted(ctx)
	if err != nil {
		return nil, err
	}
	if seq != 0 {
		out := &interruptedJSON{Seq: seq, Reason: "restart", Actions: make([]actionStateJSON, 0, len(acts))}
		for _, a := range acts {
			out.Actions = append(out.Actions, actionStateJSON{Index: a.Index, Fingerprint: a.Fingerprint.String(),
				Status: statusName(a.Status), Tool: a.Tool, Key: a.Key, Idempotent: a.Idempotent})
		}
		return out, nil
	}
	next := rs.run.LastSeq() + 1
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if ab := rs.mu.abandoned; ab != nil && ab.Seq == next {
		return ab, nil
	}
	return nil, nil
}

func (s *server) handleInterrupted(r *http.Request, _ []byte) (int, any, *apiError) {
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	intr, err := rs.interrupted(r.Context())
	if err != nil {
		return 0, nil, engineError(err, "")
	}
	return 200, map[string]any{"interrupted": intr}, nil
}

func (s *server) handleEnd(r *http.Request, body []byte) (int, any, *apiError) {
	var req endRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	st, ok := endStatuses[req.Status]
	if !ok {
		return 0, nil, badRequest("status", "status must be completed, failed or cancelled, not %q", req.Status)
	}
	result, _, aerr := pickBytes("result", req.Result, req.ResultBase64)
	if aerr != nil {
		return 0, nil, aerr
	}
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	// Begins wait while the run ends, so that none slips in between.
	rs.beginMu.Lock()
	defer rs.beginMu.Unlock()
	if l := rs.lease(); l != nil {
		e := conflict(codeRunHeld, "run %q seq %d is held by an attempt until %s: commit or fail it before ending the run",
			rs.id, l.Seq, l.Expires.Format(time.RFC3339Nano))
		e.Details = map[string]any{"seq": l.Seq, "lease_expires": l.Expires}
		return 0, nil, e
	}
	if err := rs.run.End(s.ctx, st, result); err != nil {
		info := rs.run.Info()
		if errors.Is(err, engine.ErrRunEnded) && info.Status == st && bytes.Equal(info.Result, result) {
			return 200, runInfoJSON(info, nil), nil // a repeated end
		}
		return 0, nil, engineError(err, "result")
	}
	return 200, runInfoJSON(rs.run.Info(), nil), nil
}

func (s *server) handleErase(r *http.Request, body []byte) (int, any, *apiError) {
	var req eraseRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	if aerr := checkEraseReason(req.Reason); aerr != nil {
		return 0, nil, aerr
	}
	id := r.PathValue("run")
	known, err := s.knownRun(id)
	if err != nil {
		return 0, nil, engineError(err, "")
	}
	// A deleted run is erased too (repeated: its erasure is answered).
	if !known && !s.isGone(id) {
		return 0, nil, notFound(codeRunNotFound, "run", "the store has no run %q", id)
	}
	// Requests of the run wait until the erasure is done (and the server
	// has forgotten the run, if it succeeded).
	done, aerr := s.beginErasure(r.Context(), id)
	if aerr != nil {
		return 0, nil, aerr
	}
	defer done()
	// The server's context, not the request's: the engine finishes an
	// erasure it began either way, and the answer must say so.
	d, err := s.db.Erase(s.ctx, id, req.Reason)
	if err != nil {
		return 0, nil, engineError(err, "run")
	}
	s.forget(id)
	return 200, deletedRunToJSON(d), nil
}

func (s *server) handleEraseKey(r *http.Request, body []byte) (int, any, *apiError) {
	var req eraseRequest
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	if aerr := checkEraseReason(req.Reason); aerr != nil {
		return 0, nil, aerr
	}
	key := r.PathValue("key")
	if key == "" || len(key) > engine.MaxMemoryKeyLen {
		return 0, nil, badRequest("key", "the memory key must be 1 to %d bytes (percent-encoded in the path), not %d", engine.MaxMemoryKeyLen, len(key))
	}
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	e, err := s.db.EraseKey(s.ctx, rs.id, key, req.Reason)
	if err != nil {
		return 0, nil, engineError(err, "run")
	}
	return 200, erasedKeyToJSON(e), nil
}

func checkEraseReason(reason string) *apiError {
	if len(reason) > engine.MaxDeleteReason {
		return badRequest("reason", "reason is %d bytes, the limit is %d", len(reason), engine.MaxDeleteReason)
	}
	return nil
}
