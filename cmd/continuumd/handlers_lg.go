package main

// GET /v1/heads: the newest frames of the active runs of an id prefix, in
// one request. A client that keeps one thread of work as a tree of runs
// (clients/langgraph: a LangGraph thread, its forks) finds the thread's
// runs and reads their heads without listing the whole store and without
// a request per run.

import (
	"encoding/base64"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/continuumdb/continuum/engine"
)

// maxHeadsRuns bounds the runs one GET /v1/heads answers: past it the
// answer says truncated, and the client lists the runs another way.
const maxHeadsRuns = 1024

// headJSON is one run of GET /v1/heads: its last seq, where it was forked
// from, and the memory keys asked for of its frame at that seq.
type headJSON struct {
	Run          string            `json:"run"`
	Seq          uint64            `json:"seq"`
	Parent       string            `json:"parent,omitempty"`
	ForkedAt     uint64            `json:"forked_at,omitempty"`
	Memory       map[string]string `json:"memory"`
	MemoryBase64 map[string]string `json:"memory_base64,omitempty"`
}

// handleHeads answers, for every active run whose id starts with
// run_prefix (and that the token reaches), its last seq and the memory
// keys chosen by key= (exact) and prefix= (repeatable) of its frame at
// that seq, as GET .../read answers them for one run. Runs sorted by id;
// at most maxHeadsRuns (then truncated: true).
func (s *server) handleHeads(r *http.Request, _ []byte) (int, any, *apiError) {
	q := r.URL.Query()
	for k := range q {
		if k != "run_prefix" && k != "key" && k != "prefix" {
			return 0, nil, badRequest(k, "unknown query parameter %q (run_prefix, key, prefix)", k)
		}
	}
	rp := q.Get("run_prefix")
	if rp == "" || len(q["run_prefix"]) != 1 {
		return 0, nil, badRequest("run_prefix", "run_prefix is required, once, and not empty: the runs whose id starts with it")
	}
	if !utf8.ValidString(rp) {
		return 0, nil, badRequest("run_prefix", "run_prefix is not UTF-8")
	}
	infos, err := s.db.Runs(engine.StatusActive)
	if err != nil {
		return 0, nil, engineError(err, "")
	}
	sc := scopeOf(r)
	keys := q["key"]
	var ps []string
	if len(q["prefix"]) > 0 {
		ps = prefixFree(q["prefix"])
	}
	out := []headJSON{}
	truncated := false
	for _, info := range infos {
		if !strings.HasPrefix(info.ID, rp) || !sc.covers(info.ID) {
			continue
		}
		if len(out) == maxHeadsRuns {
			truncated = true
			break
		}
		rs, aerr := s.runState(r.Context(), info.ID, false)
		if aerr != nil {
			if aerr.Status == http.StatusNotFound || aerr.Status == http.StatusGone {
				continue // deleted since the listing
			}
			return 0, nil, aerr
		}
		seq := rs.run.LastSeq()
		f, err := rs.run.StateAt(r.Context(), seq)
		if err != nil {
			return 0, nil, engineError(err, "")
		}
		h := headJSON{Run: info.ID, Seq: seq, Parent: info.Parent, ForkedAt: info.ForkedAt, Memory: map[string]string{}}
		put := func(k string, v []byte) {
			if utf8.Valid(v) && utf8.ValidString(k) {
				h.Memory[k] = string(v)
				return
			}
			if h.MemoryBase64 == nil {
				h.MemoryBase64 = map[string]string{}
			}
			h.MemoryBase64[k] = base64.StdEncoding.EncodeToString(v)
		}
		for _, k := range keys {
			if v, ok := f.Memory[k]; ok {
				put(k, v)
			}
		}
		if len(ps) > 0 {
			for k, v := range f.Memory {
				if hasPrefixIn(ps, k) {
					put(k, v)
				}
			}
		}
		out = append(out, h)
	}
	ans := map[string]any{"runs": out}
	if truncated {
		ans["truncated"] = true
	}
	return 200, ans, nil
}
