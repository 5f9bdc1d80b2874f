package main

import (
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"
)

// TestMessages: a message sent in an atom exists if and only if the atom
// commits; a received one is consumed with the receiving atom's commit,
// and given back by a fail; each survives a SIGKILL of the server at a
// seeded point between the steps.
func TestMessages(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	p := startProc(t, "--store", store, "--socket", sock)
	cl := unixClient(t, sock)
	maybeKill := func(where string) {
		if rng.IntN(2) == 0 {
			t.Logf("SIGKILL %s", where)
			p.kill()
			cl.cl.CloseIdleConnections()
			p.start()
		}
	}
	cl.openRun("a")
	cl.openRun("b")

	// A send in an atom that fails is never delivered.
	s, _ := cl.begin("a", nil)
	cl.must(200, "POST", s+"/send", map[string]any{"to": "b", "payload": "lost"})
	cl.must(200, "POST", s+"/fail", map[string]any{"reason": "changed my mind"})
	// Sent and committed: delivered.
	s, _ = cl.begin("a", nil)
	cl.must(200, "POST", s+"/send", map[string]any{"to": "b", "payload": "hello"})
	cl.must(200, "POST", s+"/send", map[string]any{"to": "b", "payload_base64": "/w=="})
	cl.commit(s)
	maybeKill("after the send's commit")
	in := cl.must(200, "GET", "/v1/runs/b/inbox", nil)
	if msgs, _ := in.body["messages"].([]any); len(msgs) != 2 {
		t.Fatalf("inbox: %s", in)
	}
	// Received, then the attempt is lost: given back.
	r, _ := cl.begin("b", nil)
	m := cl.must(200, "POST", r+"/receive", nil)
	msg, _ := m.body["message"].(map[string]any)
	if msg["from"] != "a" || msg["payload"] != "hello" || msg["seq"] != float64(1) || msg["index"] != float64(0) {
		t.Fatalf("receive: %s", m)
	}
	maybeKill("after a receive, before its commit")
	r, _ = cl.begin("b", map[string]any{"takeover": true})
	for i, want := range []map[string]any{{"payload": "hello"}, {"payload_base64": "/w=="}} {
		m = cl.must(200, "POST", r+"/receive", map[string]any{"from": "a"})
		msg, _ = m.body["message"].(map[string]any)
		for k, v := range want {
			if msg[k] != v {
				t.Fatalf("receive %d after the loss: %s", i, m)
			}
		}
	}
	m = cl.must(200, "POST", r+"/receive", map[string]any{"wait_ms": 50})
	if m.body["message"] != nil {
		t.Fatalf("a third message: %s", m)
	}
	cl.commit(r)
	maybeKill("after the receive's commit")
	in = cl.must(200, "GET", "/v1/runs/b/inbox", nil)
	if msgs, _ := in.body["messages"].([]any); len(msgs) != 0 {
		t.Fatalf("inbox after the consuming commit: %s", in)
	}
	r, _ = cl.begin("b", nil)
	if m := cl.must(200, "POST", r+"/receive", nil); m.body["message"] != nil {
		t.Fatalf("a consumed message came back: %s", m)
	}
	// Refusals.
	wantError(t, cl.do("POST", r+"/send", map[string]any{"to": "a"}), 400, codeBadRequest, "payload")
	wantError(t, cl.do("POST", r+"/send", map[string]any{"payload": "x"}), 400, codeBadRequest, "to")
	wantError(t, cl.do("POST", r+"/receive", map[string]any{"wait_ms": -1}), 400, codeBadRequest, "wait_ms")
	cl.must(200, "POST", "/v1/runs/a/end", map[string]any{"status": "completed"})
	wantError(t, cl.do("POST", r+"/send", map[string]any{"to": "a", "payload": "x"}), 409, codeRunEnded, "to")
	cl.commit(r)
}
