package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A GET .../read answers at most maxReadAtoms atoms, and stops after the
// atom that takes their JSON to maxReadBytes or past (one atom at least):
// a longer range is read in pages (the answer's next_from). The bytes
// bound the server's memory for one answer, whatever the atoms' sizes.
const (
	maxReadAtoms = 2048
	maxReadBytes = 16 << 20
)

// handleRead answers a part of a run without its whole frame: the memory
// keys chosen by key= (exact, repeatable) and prefix= (repeatable) of the
// frame at seq (default the last), and with from=A the atoms A..seq (their
// deltas, as GET .../atoms/{seq} answers one). A client that keeps an
// index or a log in memory keys reads one entry of it, not all of it, and
// reads a stretch of a run's history in one request.
func (s *server) handleRead(r *http.Request, _ []byte) (int, any, *apiError) {
	rs, aerr := s.runState(r.Context(), r.PathValue("run"), false)
	if aerr != nil {
		return 0, nil, aerr
	}
	q := r.URL.Query()
	for k := range q {
		if k != "seq" && k != "key" && k != "prefix" && k != "from" {
			return 0, nil, badRequest(k, "unknown query parameter %q (seq, key, prefix, from)", k)
		}
	}
	last := rs.run.LastSeq()
	seq := last
	if q.Has("seq") {
		n, err := strconv.ParseUint(q.Get("seq"), 10, 64)
		if err != nil {
			return 0, nil, badRequest("seq", "seq must be a committed seq (a non-negative integer), not %q", q.Get("seq"))
		}
		seq = n
	}
	keys, prefixes := q["key"], q["prefix"]
	out := map[string]any{"run": rs.id, "seq": seq}
	if len(keys) > 0 || len(prefixes) > 0 {
		f, err := rs.run.StateAt(r.Context(), seq)
		if err != nil {
			return 0, nil, engineError(err, "seq")
		}
		mem, mem64 := map[string]string{}, map[string]string{}
		put := func(k string, v []byte) {
			if utf8.Valid(v) && utf8.ValidString(k) {
				mem[k] = string(v)
			} else {
				mem64[k] = base64.StdEncoding.EncodeToString(v)
			}
		}
		for _, k := range keys {
			if v, ok := f.Memory[k]; ok {
				put(k, v)
			}
		}
		if len(prefixes) > 0 {
			ps := prefixFree(prefixes)
			for k, v := range f.Memory {
				if hasPrefixIn(ps, k) {
					put(k, v)
				}
			}
		}
		out["memory"] = mem
		if len(mem64) > 0 {
			out["memory_base64"] = mem64
		}
	} else if seq > last {
		return 0, nil, notFound(codeAtomNotFound, "seq", "run %q has no seq %d (its last is %d)", rs.id, seq, last)
	}
	if q.Has("from") {
		from, err := strconv.ParseUint(q.Get("from"), 10, 64)
		if err != nil || from == 0 {
			return 0, nil, badRequest("from", "from must be a seq (1, 2, ...), not %q", q.Get("from"))
		}
		if from > seq {
			return 0, nil, badRequest("from", "from (%d) is past seq (%d)", from, seq)
		}
		to := min(seq, from+maxReadAtoms-1)
		atoms := make([]json.RawMessage, 0, to-from+1)
		size := 0
		for n := from; n <= to; n++ {
			if size >= maxReadBytes {
				to = n - 1
				break
			}
			info, err := rs.run.Atom(r.Context(), n)
			if err != nil {
				return 0, nil, engineError(err, "from")
			}
			b, err := json.Marshal(atomJSON(info))
			if err != nil {
				return 0, nil, engineError(err, "from")
			}
			atoms = append(atoms, b)
			size += len(b)
		}
		if to < seq {
			out["next_from"] = to + 1
		}
		out["atoms"] = atoms
	}
	return 200, out, nil
}

// prefixFree returns ps sorted, without those another of ps is a prefix
// of (they match nothing more), for hasPrefixIn.
func prefixFree(ps []string) []string {
	ps = slices.Clone(ps)
	slices.Sort(ps)
	out := ps[:0]
	for _, p := range ps {
		if len(out) > 0 && strings.HasPrefix(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// hasPrefixIn reports whether one of ps (prefixFree's) is a prefix of k,
// in O(log len(ps)): of a set where none is a prefix of another, only
// the greatest one not after k can be one of k's (any between it and k
// would start with it).
func hasPrefixIn(ps []string, k string) bool {
	i, found := slices.BinarySearch(ps, k)
	return found || i > 0 && strings.HasPrefix(k, ps[i-1])
}
