package main

import (
	"testing"
)

// TestH2C: with --h2c an HTTP/2 client without TLS makes atoms over the
// Unix socket with the protocol unchanged (requests riding on each other,
// errors as JSON with a code), and an HTTP/1.1 client is served on the
// same socket beside it.
func TestH2C(t *testing.T) {
	ts := &testServer{t: t, dir: shortTempDir(t) + "/store", h2c: true}
	ts.sock = ts.dir + ".sock"
	ts.cfg = testConfig(ts.dir)
	ts.start()
	t.Cleanup(ts.stop)

	ts.openRun("r")
	b := ts.must(201, "POST", "/v1/runs/r/attempts", map[string]any{"call": map[string]any{"tool": "t", "args": map[string]any{"n": 1}}})
	if b.proto != "HTTP/2.0" {
		t.Fatalf("the answer came over %s, not HTTP/2", b.proto)
	}
	call, _ := b.body["call"].(map[string]any)
	if call["status"] != "execute" {
		t.Fatalf("begin with call 0: %s", b)
	}
	p := "/v1/runs/r/attempts/" + b.str("attempt")
	o := ts.must(200, "POST", p+"/calls/0/outcome", map[string]any{"result": "ok",
		"commit": map[string]any{"delta": []any{map[string]any{"op": "set", "key": "k", "value": "v"}}}})
	if c, _ := o.body["commit"].(map[string]any); o.str("status") != "done" || c["seq"] != float64(1) {
		t.Fatalf("outcome with the commit: %s", o)
	}
	e := ts.do("POST", "/v1/runs/r/attempts/att_nope/commit", map[string]any{"delta": []any{}})
	wantError(t, e, 404, codeAttemptNotFound, "attempt")
	if e.proto != "HTTP/2.0" {
		t.Fatalf("the error came over %s", e.proto)
	}

	h2 := ts.cl
	ts.cl = newSocketClient(ts.sock, false)
	defer func() { ts.cl.CloseIdleConnections(); ts.cl = h2 }()
	st := ts.must(200, "GET", "/v1/runs/r/state", nil)
	if st.proto != "HTTP/1.1" {
		t.Fatalf("the HTTP/1.1 client was answered over %s", st.proto)
	}
	if m, _ := st.body["memory"].(map[string]any); m == nil || m["k"] == nil {
		t.Fatalf("state after the atom over HTTP/2: %s", st)
	}
}
