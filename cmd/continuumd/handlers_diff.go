package main

// Diff of two states of a lineage over the wire (what continuumctl diff
// shows; offline.Inspector.Diff): GET /v1/runs/{run}/diff?a=SEQ&b=SEQ
// compares the run with itself, &run_b=OTHER the run at a with OTHER at
// b (a fork and its parent, or any two runs of one lineage). The read
// right on both runs is needed.

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/offline"
)

// diffSeq reads query parameter name: a seq, or "last" (the run's last).
func diffSeq(r *http.Request, name string, rs *runState) (uint64, *apiError) {
	q := r.URL.Query().Get(name)
	switch q {
	case "":
		return 0, badRequest(name, "%s is required: a seq (0 for the empty frame) or last", name)
	case "last":
		return rs.run.LastSeq(), nil
	}
	n, err := strconv.ParseUint(q, 10, 64)
	if err != nil {
		return 0, badRequest(name, "%s must be a seq (a non-negative integer) or last, not %q", name, q)
	}
	return n, nil
}

func (s *server) handleDiff(r *http.Request, _ []byte) (int, any, *apiError) {
	q := r.URL.Query()
	for k := range q {
		if k != "a" && k != "b" && k != "run_b" {
			return 0, nil, badRequest(k, "unknown query parameter %q (a, b, run_b)", k)
		}
	}
	rsA, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	rsB := rsA
	if q.Has("run_b") {
		id := q.Get("run_b")
		if aerr := scopeOf(r).checkRun(rightRead, id, "run_b"); aerr != nil {
			return 0, nil, aerr
		}
		if rsB, aerr = s.runState(r.Context(), id, false); aerr != nil {
			aerr.Field = "run_b"
			return 0, nil, aerr
		}
	}
	seqA, aerr := diffSeq(r, "a", rsA)
	if aerr != nil {
		return 0, nil, aerr
	}
	seqB, aerr := diffSeq(r, "b", rsB)
	if aerr != nil {
		return 0, nil, aerr
	}
	in, done, aerr := s.inspectStore(r.Context())
	if aerr != nil {
		return 0, nil, aerr
	}
	defer done()
	d, err := in.Diff(r.Context(), rsA.id, seqA, rsB.id, seqB)
	switch {
	case errors.Is(err, offline.ErrUnrelatedRuns):
		return 0, nil, &apiError{Status: http.StatusUnprocessableEntity, Code: codeUnrelatedRuns, Field: "run_b", Message: err.Error()}
	case errors.Is(err, engine.ErrSeqOutOfRange):
		return 0, nil, notFound(codeAtomNotFound, "b", "%v", err)
	case err != nil:
		return 0, nil, engineError(err, "")
	}
	// As continuumctl diff --json prints it, without the store's id and
	// directory.
	return 200, offline.NewExportedDiff(d), nil
}
