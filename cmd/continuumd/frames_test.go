package main

import (
	"testing"
)

// startFramesServer is startServer with a client that speaks
// continuum-frames/1.
func startFramesServer(t *testing.T, edit func(*serverConfig)) *testServer {
	t.Helper()
	ts := startServer(t, "", edit)
	ts.cl.CloseIdleConnections()
	ts.frames = true
	ts.cl = newFramesClient(ts.sock)
	return ts
}

func TestFramesAtom(t *testing.T) {
	ts := startFramesServer(t, nil)
	ts.openRun("r1")
	p, _ := ts.begin("r1", nil)
	ts.act(p, 0, map[string]any{"tool": "t", "args": map[string]any{"a": 1}}, "ok")
	r := ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "v"})
	if r.proto != "continuum-frames/1" {
		t.Fatalf("answer over %q", r.proto)
	}
	r = ts.do("GET", "/v1/runs/nope", nil)
	wantError(t, r, 404, codeRunNotFound, "run")
}
