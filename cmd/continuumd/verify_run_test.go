package main

import (
	"path/filepath"
	"testing"
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
