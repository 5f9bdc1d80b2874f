package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunVerifyAndInspect: verify and inspect of one run say what the
// store's say of it, and nothing of other runs; a scoped token reaches
// only its own.
func TestRunVerifyAndInspect(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	agent := makeToken(t, file, "agent", "read,write", "a-")
	b, _ := readSecretFile("--tokens", file)
	set, err := parseTokens(b, file)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, "", func(c *serverConfig) { c.tokens, c.token = set, []byte("admin-token-0123456789abcdef") })
	ts.token = "admin-token-0123456789abcdef"
	ts.openRun("other")
	p, _ := ts.begin("other", nil)
	ts.commit(p)
	ts.token = agent
	ts.openRun("a-1")
	for range 3 {
		p, _ := ts.begin("a-1", nil)
		ts.act(p, 0, map[string]any{"tool": "t"}, "ok")
		ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "v"})
	}
	v := ts.must(200, "POST", "/v1/runs/a-1/verify", nil)
	run, _ := v.body["run"].(map[string]any)
	if v.body["ok"] != true || run["run"] != "a-1" || run["last_seq"] != float64(3) {
		t.Fatalf("verify of a run: %s", v)
	}
	in := ts.must(200, "GET", "/v1/runs/a-1/inspect", nil)
	if in.str("id") != "a-1" || in.num("atoms") != 3 || in.str("status") != "active" || in.str("head") != run["head"] {
		t.Fatalf("inspect of a run: %s (verify %s)", in, v)
	}
	wantError(t, ts.do("POST", "/v1/runs/other/verify", nil), 403, codeForbidden, "run")
	wantError(t, ts.do("GET", "/v1/runs/other/inspect", nil), 403, codeForbidden, "run")
	wantError(t, ts.do("POST", "/v1/verify", nil), 403, codeForbidden, "")
	wantError(t, ts.do("GET", "/v1/runs/a-none/inspect", nil), 404, codeRunNotFound, "run")
	ts.openRun("a-empty")
	if e := ts.must(200, "POST", "/v1/runs/a-empty/verify", nil); e.body["ok"] != true {
		t.Fatalf("verify of a run with nothing committed: %s", e)
	}
	ts.must(200, "GET", "/v1/runs/a-empty/inspect", nil)
}

// TestStoreScansAreBounded: verify, inspect and diff of a run each read
// the whole store; at most maxStoreScans run at once, and one more waits
// for a slot (or for its client to go).
func TestStoreScansAreBounded(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	p, _ := ts.begin("r", nil)
	ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "v"})
	for range maxStoreScans {
		ts.srv.scans <- struct{}{}
	}
	h := ts.srv.handler()
	for _, target := range []string{"POST /v1/runs/r/verify", "GET /v1/runs/r/inspect", "GET /v1/runs/r/diff?a=0&b=1", "POST /v1/verify"} {
		method, path, _ := strings.Cut(target, " ")
		answered := make(chan int, 1)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, path, nil).WithContext(ctx))
			answered <- rec.Code
		}()
		select {
		case code := <-answered:
			t.Fatalf("%s answered %d while every scan slot was taken", target, code)
		case <-time.After(100 * time.Millisecond):
		}
		cancel()
		if code := <-answered; code != http.StatusServiceUnavailable {
			t.Fatalf("%s, its client gone while waiting for a slot: %d", target, code)
		}
	}
	<-ts.srv.scans // one slot free: the next pass runs
	if in := ts.must(200, "GET", "/v1/runs/r/inspect", nil); in.num("atoms") != 1 {
		t.Fatalf("inspect with a slot free: %s", in)
	}
	ts.must(200, "POST", "/v1/runs/r/verify", nil)
}
