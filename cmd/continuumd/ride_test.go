package main

import (
	"testing"
)

// TestRideAlong: a begin carries the first call or the commit, an outcome
// the next call or the commit: an atom without actions is one request,
// one with k actions k + 1; each repeats as the requests it joins do.
func TestRideAlong(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	set := func(v string) []any { return []any{map[string]any{"op": "set", "key": "k", "value": v}} }

	before := ts.srv.counters.requests.Load()
	b := ts.must(201, "POST", "/v1/runs/r/attempts", map[string]any{"request_id": "q1", "commit": map[string]any{"delta": set("a")}})
	if got := ts.srv.counters.requests.Load() - before; got != 1 {
		t.Fatalf("an atom without actions took %d requests", got)
	}
	c, _ := b.body["commit"].(map[string]any)
	if c == nil || c["seq"] != float64(1) || c["head"] == "" {
		t.Fatalf("begin with a commit: %s", b)
	}
	again := ts.must(201, "POST", "/v1/runs/r/attempts", map[string]any{"request_id": "q1", "commit": map[string]any{"delta": set("a")}})
	if c2, _ := again.body["commit"].(map[string]any); c2["head"] != c["head"] || again.str("attempt") != b.str("attempt") {
		t.Fatalf("a repeated begin with its commit: %s, first %s", again, b)
	}
	wantError(t, ts.do("POST", "/v1/runs/r/attempts", map[string]any{"request_id": "q1", "commit": map[string]any{"delta": set("b")}}), 409, codeCommitMismatch, "delta")
	if st := ts.must(200, "GET", "/v1/runs/r", nil); st.num("last_seq") != 1 {
		t.Fatalf("the repeats committed again: %s", st)
	}

	// Two actions, three requests.
	before = ts.srv.counters.requests.Load()
	b = ts.must(201, "POST", "/v1/runs/r/attempts", map[string]any{"call": map[string]any{"tool": "t1", "args": map[string]any{"x": 1}}})
	call, _ := b.body["call"].(map[string]any)
	if call["status"] != "execute" {
		t.Fatalf("begin with a call: %s", b)
	}
	p := "/v1/runs/r/attempts/" + b.str("attempt")
	o := ts.must(200, "POST", p+"/calls/0/outcome", map[string]any{"result": "r1", "next": map[string]any{"tool": "t2"}})
	next, _ := o.body["next"].(map[string]any)
	if o.str("status") != "done" || next["status"] != "execute" || next["call"] != float64(1) {
		t.Fatalf("outcome with the next call: %s", o)
	}
	// A repeat of the outcome with its next answers both as they are.
	o2 := ts.must(200, "POST", p+"/calls/0/outcome", map[string]any{"result": "r1", "next": map[string]any{"tool": "t2"}})
	if n2, _ := o2.body["next"].(map[string]any); o2.str("status") != "done" || n2["status"] != "execute" {
		t.Fatalf("a repeated outcome with its next: %s", o2)
	}
	// A delta that does not apply: the outcome is certified, the error
	// says so, and the attempt stays open.
	bad := ts.do("POST", p+"/calls/1/outcome", map[string]any{"result": "r2",
		"commit": map[string]any{"delta": []any{map[string]any{"op": "set_subgoal_status", "id": "nope", "status": "done"}}}})
	wantError(t, bad, 422, codeInvalidDelta, "delta")
	if d, _ := bad.body["error"].(map[string]any)["details"].(map[string]any); d["outcome"].(map[string]any)["status"] != "done" {
		t.Fatalf("the outcome's answer is not in the error's details: %s", bad)
	}
	o = ts.must(200, "POST", p+"/calls/1/outcome", map[string]any{"result": "r2", "commit": map[string]any{"delta": set("c")}})
	if cm, _ := o.body["commit"].(map[string]any); o.str("status") != "done" || cm["seq"] != float64(2) {
		t.Fatalf("outcome with the commit: %s", o)
	}
	if got := ts.srv.counters.requests.Load() - before; got != 5 { // 3, and the repeat and the refused commit
		t.Fatalf("two actions took %d requests, want 3 + 2 repeated", got)
	}
	atom := ts.must(200, "GET", "/v1/runs/r/atoms/2", nil)
	if acts, _ := atom.body["actions"].([]any); len(acts) != 2 {
		t.Fatalf("the atom's actions: %s", atom)
	}

	// A begin whose call is refused: the attempt exists, and says so.
	e := ts.do("POST", "/v1/runs/r/attempts", map[string]any{"call": map[string]any{"tool": "t", "args": map[string]any{"a": 1, "b": map[string]any{}}, "redact": []string{"nope"}}})
	wantError(t, e, 422, codeInvalidArgs, "redact")
	d, _ := e.body["error"].(map[string]any)["details"].(map[string]any)
	att, _ := d["attempt"].(map[string]any)
	if att == nil || att["attempt"] == "" {
		t.Fatalf("no attempt in the details: %s", e)
	}
	ts.commit("/v1/runs/r/attempts/" + att["attempt"].(string))

	wantError(t, ts.do("POST", "/v1/runs/r/attempts", map[string]any{"call": map[string]any{"tool": "t"}, "commit": map[string]any{"delta": []any{}}}), 400, codeBadRequest, "commit")
	wantError(t, ts.do("POST", "/v1/runs/r/attempts", map[string]any{"commit": map[string]any{}}), 400, codeBadRequest, "commit.delta")
}

// TestBeginSeq: a begin with the seq the client expects begins only that
// seq; a begin with its commit repeated after a restart (request ids
// forgotten) is seq_mismatch, not a second commit.
func TestBeginSeq(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	body := map[string]any{"request_id": "q", "seq": 1, "commit": map[string]any{"delta": []any{}}}
	ts.must(201, "POST", "/v1/runs/r/attempts", body)
	ts.restart()
	e := ts.do("POST", "/v1/runs/r/attempts", body)
	wantError(t, e, 409, codeSeqMismatch, "seq")
	if d, _ := e.body["error"].(map[string]any)["details"].(map[string]any); d["next"] != float64(2) {
		t.Fatalf("details: %s", e)
	}
	if st := ts.must(200, "GET", "/v1/runs/r", nil); st.num("last_seq") != 1 {
		t.Fatalf("committed twice: %s", st)
	}
	body["seq"] = 2
	ts.must(201, "POST", "/v1/runs/r/attempts", body)
}
