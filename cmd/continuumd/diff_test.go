package main

import (
	"path/filepath"
	"testing"
)

// TestDiff: the diff of two seqs of a run and of a fork with its parent
// answers what continuumctl diff shows (the base, and each side's spans,
// ops and atoms); runs of two lineages are unrelated_runs, a seq past the
// last atom_not_found; a token reads a diff only if it reads both runs.
func TestDiff(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	agent := makeToken(t, file, "agent7", "read,write", "agent-7-")
	b, err := readSecretFile("--tokens", file)
	if err != nil {
		t.Fatal(err)
	}
	set, err := parseTokens(b, file)
	if err != nil {
		t.Fatal(err)
	}
	const admin = "admin-token-0123456789abcdef"
	ts := startServer(t, "", func(c *serverConfig) { c.tokens, c.token = set, []byte(admin) })
	ts.token = admin
	ts.openRun("agent-7-a")
	for _, v := range []string{"1", "2", "3"} {
		p, _ := ts.begin("agent-7-a", nil)
		ts.commit(p, map[string]any{"op": "set", "key": "k", "value": v}, map[string]any{"op": "append_scratch", "value": v})
	}
	ts.must(201, "POST", "/v1/runs/agent-7-a/fork", map[string]any{"at": 1, "id": "agent-7-f"})
	p, _ := ts.begin("agent-7-f", nil)
	ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "fork"})
	ts.openRun("other")
	p, _ = ts.begin("other", nil)
	ts.commit(p)

	ts.token = agent
	d := ts.must(200, "GET", "/v1/runs/agent-7-a/diff?a=1&b=last", nil)
	base := d.body["base"].(map[string]any)
	sideA, sideB := d.body["a"].(map[string]any), d.body["b"].(map[string]any)
	if base["seq"] != float64(1) || base["head"] == "" || sideA["ops"] != float64(0) || sideB["ops"] != float64(4) || len(sideB["atoms"].([]any)) != 2 {
		t.Fatalf("diff 1..last: %s", d)
	}
	d = ts.must(200, "GET", "/v1/runs/agent-7-a/diff?a=3&b=2&run_b=agent-7-f", nil)
	base = d.body["base"].(map[string]any)
	sideA, sideB = d.body["a"].(map[string]any), d.body["b"].(map[string]any)
	if base["run"] != "agent-7-a" || base["seq"] != float64(1) || len(sideA["atoms"].([]any)) != 2 || len(sideB["atoms"].([]any)) != 1 ||
		sideB["spans"].([]any)[0].(map[string]any)["run"] != "agent-7-f" {
		t.Fatalf("diff with a fork: %s", d)
	}
	// Another run outside the token's scope: forbidden, before anything.
	wantError(t, ts.do("GET", "/v1/runs/agent-7-a/diff?a=1&b=1&run_b=other", nil), 403, codeForbidden, "run_b")
	wantError(t, ts.do("GET", "/v1/runs/other/diff?a=1&b=1", nil), 403, codeForbidden, "run")
	ts.token = admin
	wantError(t, ts.do("GET", "/v1/runs/agent-7-a/diff?a=1&b=1&run_b=other", nil), 422, codeUnrelatedRuns, "run_b")
	wantError(t, ts.do("GET", "/v1/runs/agent-7-a/diff?a=1&b=9", nil), 404, codeAtomNotFound, "b")
	wantError(t, ts.do("GET", "/v1/runs/agent-7-a/diff?a=1", nil), 400, codeBadRequest, "b")
	wantError(t, ts.do("GET", "/v1/runs/agent-7-a/diff?a=x&b=1", nil), 400, codeBadRequest, "a")
	wantError(t, ts.do("GET", "/v1/runs/agent-7-a/diff?a=1&b=1&c=2", nil), 400, codeBadRequest, "c")
	wantError(t, ts.do("GET", "/v1/runs/agent-7-a/diff?a=1&b=1&run_b=nope", nil), 404, codeRunNotFound, "run_b")
}
