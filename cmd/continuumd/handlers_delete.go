package main

// The handlers of deletion and garbage collection: DELETE of one ended
// run (engine DB.DeleteRuns) and GC of the store (engine DB.GC).

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/continuumdb/continuum/engine"
)

// deleteRequest is the body of POST /v1/runs/{run}/delete (engine
// DB.DeleteRuns of the one run).
type deleteRequest struct {
	// Reason is recorded in the delete record (at most
	// engine.MaxDeleteReason bytes; "": "deleted by request").
	Reason string `json:"reason"`
}

func (s *server) handleDelete(r *http.Request, body []byte) (int, any, *apiError) {
	var req deleteRequest
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
	if s.isGone(id) {
		return s.deletedAnswer(id) // a repeated delete: the deletion
	}
	if !known {
		return 0, nil, notFound(codeRunNotFound, "run", "the store has no run %q", id)
	}
	// Requests of the run wait until the deletion is done, as for an
	// erasure: none reads the run from the server's stale handle after.
	done, aerr := s.beginErasure(r.Context(), id)
	if aerr != nil {
		return 0, nil, aerr
	}
	defer done()
	reason := req.Reason
	if reason == "" {
		reason = "deleted by request"
	}
	// The server's context: the engine finishes a deletion it began.
	ds, err := s.db.DeleteRuns(s.ctx, engine.DeleteOptions{IDs: []string{id}, Reason: reason})
	switch {
	case errors.Is(err, engine.ErrRunDeleted):
		s.forget(id)
		return s.deletedAnswer(id)
	case errors.Is(err, engine.ErrRunHasForks) && !scopeOf(r).all:
		// The engine's message names the fork, which may be a run the
		// token does not cover (such runs are not shown to it).
		return 0, nil, conflict(codeRunHasForks, "delete run %q: %v (delete them first)", id, engine.ErrRunHasForks)
	case err != nil:
		return 0, nil, engineError(err, "run")
	case len(ds) != 1:
		return 0, nil, &apiError{Status: http.StatusInternalServerError, Code: codeInternal, Message: fmt.Sprintf("the engine deleted %d runs for one id", len(ds))}
	}
	s.forget(id)
	return 200, deletedRunToJSON(ds[0]), nil
}

// deletedAnswer answers the deletion of run id from the store's list.
func (s *server) deletedAnswer(id string) (int, any, *apiError) {
	ds, err := s.db.Deleted()
	if err != nil {
		return 0, nil, engineError(err, "")
	}
	for _, d := range ds {
		if d.ID == id {
			return 200, deletedRunToJSON(d), nil
		}
	}
	return 0, nil, &apiError{Status: http.StatusGone, Code: codeRunDeleted, Field: "run", Message: fmt.Sprintf("run %q is gone, and the store lists no deletion of it", id)}
}

// gcJSON is what one garbage collection did (engine.GCStats).
type gcJSON struct {
	Segments       int     `json:"segments"`
	Bytes          int64   `json:"bytes"`
	Floor          uint64  `json:"floor"`
	Compacted      int     `json:"compacted"`
	Emptied        int     `json:"emptied"`
	CompactedBytes int64   `json:"compacted_bytes"`
	Scanned        int64   `json:"scanned"`
	Forgotten      int     `json:"forgotten"`
	DurationMS     float64 `json:"duration_ms"`
}

func (s *server) handleGC(r *http.Request, body []byte) (int, any, *apiError) {
	var req struct{}
	if err := decodeJSON(body, &req); err != nil {
		return 0, nil, err
	}
	st, err := s.db.GC(r.Context())
	if err != nil {
		return 0, nil, engineError(err, "")
	}
	return 200, gcJSON{Segments: st.Segments, Bytes: st.Bytes, Floor: st.Floor, Compacted: st.Compacted, Emptied: st.Emptied,
		CompactedBytes: st.CompactedBytes, Scanned: st.Scanned, Forgotten: st.Forgotten,
		DurationMS: float64(st.Duration.Microseconds()) / 1000}, nil
}
