package main

import (
	"fmt"
	"strings"
	"testing"
)

// outcomeUntilSettled posts an outcome of call n and repeats it while the
// answer is pending (the server waits the retry's backoff), as a client
// does.
func (ts *testServer) outcomeUntilSettled(p string, n int, body map[string]any) reply {
	ts.t.Helper()
	for {
		r := ts.must(200, "POST", fmt.Sprintf("%s/calls/%d/outcome", p, n), body)
		if r.str("status") != "pending" {
			return r
		}
	}
}

// TestRetryOverTheWire: a call with a retry policy is answered execute
// again after a failed outcome, with the next attempt and the same key; a
// repeated outcome of the failed attempt is not taken for the next one's;
// a restart of the server goes on with the count; an action given up is
// answered failed with gave_up, and again after a restart without
// execute.
func TestRetryOverTheWire(t *testing.T) {
	ts := startServer(t, shortTempDir(t), nil)
	ts.openRun("r")
	p, _ := ts.begin("r", nil)
	call := map[string]any{"tool": "http.post", "args": map[string]any{"u": 1}, "idempotent": true,
		"retry": map[string]any{"max_attempts": 3, "initial_ms": 1}}
	r := ts.must(200, "POST", p+"/calls/0", call)
	wantStatus(t, r, "execute")
	key := r.str("key")
	if r.num("attempt") != 1 {
		t.Fatalf("first answer %s, want attempt 1", r)
	}
	// An outcome without its attempt is refused for a call with a policy.
	wantError(t, ts.do("POST", p+"/calls/0/outcome", map[string]any{"error": "503"}), 400, codeBadRequest, "attempt")
	r = ts.outcomeUntilSettled(p, 0, map[string]any{"error": "503", "attempt": 1})
	wantStatus(t, r, "execute")
	if r.num("attempt") != 2 || r.str("key") != key {
		t.Fatalf("after a failure: %s, want execute attempt 2 under key %q", r, key)
	}
	// The failed attempt's outcome again (its answer lost): not attempt 2's.
	r = ts.must(200, "POST", p+"/calls/0/outcome", map[string]any{"error": "503", "attempt": 1})
	if r.str("status") != "execute" || r.num("attempt") != 2 {
		t.Fatalf("a repeated outcome of attempt 1: %s", r)
	}
	// The server restarts while attempt 2 executes: attempt 2 is in doubt
	// and counts; the client's next attempt of the atom is attempt 3.
	ts.restart()
	p, _ = ts.begin("r", nil)
	r = ts.must(200, "POST", p+"/calls/0", call)
	if r.str("status") != "execute" || r.num("attempt") != 3 || r.str("key") != key {
		t.Fatalf("after a restart: %s, want execute attempt 3", r)
	}
	r = ts.outcomeUntilSettled(p, 0, map[string]any{"error": "still 503", "attempt": 3})
	wantStatus(t, r, "failed")
	if r.str("gave_up") != "attempts exhausted" || !strings.Contains(r.str("error"), "3 attempt(s)") || !strings.Contains(r.str("error"), "still 503") {
		t.Fatalf("given up: %s", r)
	}
	ts.restart()
	p, _ = ts.begin("r", nil)
	r = ts.must(200, "POST", p+"/calls/0", call)
	if r.str("status") != "failed" || r.str("gave_up") != "attempts exhausted" {
		t.Fatalf("after the give-up and a restart: %s, want failed without execute", r)
	}
	// Another policy is another action, and a repeat of call 0 with
	// another policy is a mismatch.
	other := map[string]any{"tool": "http.post", "args": map[string]any{"u": 1}, "idempotent": true,
		"retry": map[string]any{"max_attempts": 4, "initial_ms": 1}}
	wantError(t, ts.do("POST", p+"/calls/0", other), 409, codeCallMismatch, "retry")
	bad := map[string]any{"tool": "t", "retry": map[string]any{"initial_ms": 5}}
	wantError(t, ts.do("POST", p+"/calls/1", bad), 400, codeBadRequest, "retry")
}
