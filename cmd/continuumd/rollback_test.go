package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"
)

// TestRollback: compensations declared in calls run in the client, newest
// first, each once; an action without one refuses the rollback
// (not_undone) unless allow_not_undone; the run ends at the target's state;
// a repeated request answers what was done; a client that vanishes after
// execute leaves its compensation in doubt to the next one, which
// resolves it.
func TestRollback(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	ts.begin("r", map[string]any{"commit": map[string]any{"delta": []map[string]any{{"op": "set", "key": "x", "value": "1"}}}})
	for i, tool := range []string{"pay", "book"} {
		p, _ := ts.begin("r", nil)
		comp := map[string]any{"tool": "un" + tool, "args": map[string]any{"i": i}}
		wantStatus(t, ts.act(p, 0, map[string]any{"tool": tool, "args": map[string]any{"i": i}, "compensate": comp}, tool+" ok"), "done")
		ts.commit(p, map[string]any{"op": "set", "key": tool, "value": "yes"})
	}
	p, _ := ts.begin("r", nil)
	wantStatus(t, ts.act(p, 0, map[string]any{"tool": "notify", "args": map[string]any{}}, "sent"), "done")
	ts.commit(p)

	// notify has no compensation.
	r := ts.do("POST", "/v1/runs/r/rollback", map[string]any{"to": 1})
	wantError(t, r, 409, codeNotUndone, "allow_not_undone")
	wantError(t, ts.do("POST", "/v1/runs/r/rollback", map[string]any{"to": 9}), 400, codeBadRequest, "to")

	r = ts.must(200, "POST", "/v1/runs/r/rollback", map[string]any{"to": 1, "allow_not_undone": true, "request_id": "rb1"})
	wantStatus(t, r, "execute")
	step := r.body["step"].(map[string]any)
	if step["tool"] != "unbook" || step["n"] != float64(0) || step["undoes"].(map[string]any)["tool"] != "book" {
		t.Fatalf("first step: %s", r)
	}
	key0 := step["key"].(string)
	// A begin while the rollback runs is refused.
	wantError(t, ts.do("POST", "/v1/runs/r/attempts", map[string]any{}), 409, codeRunHeld, "")
	// Another client attaches: the handed-out compensation is in doubt to it.
	a := ts.must(200, "POST", "/v1/runs/r/rollback", map[string]any{"to": 1, "allow_not_undone": true})
	if a.str("status") != "in_doubt" || a.str("key") != key0 {
		t.Fatalf("attach: %s", a)
	}
	wantError(t, ts.do("POST", "/v1/runs/r/rollback", map[string]any{"to": 2}), 409, codeRollbackPending, "to")
	// It did not happen: handed out again, same key.
	a = ts.must(200, "POST", "/v1/runs/r/rollback/resolve", map[string]any{"key": key0, "failed": "the downstream never saw it"})
	if a.str("status") != "execute" || a.body["step"].(map[string]any)["key"] != key0 {
		t.Fatalf("resolve failed: %s", a)
	}
	r = ts.must(200, "POST", "/v1/runs/r/rollback/outcome", map[string]any{"step": 0, "result": "unbooked"})
	wantStatus(t, r, "execute")
	if st := r.body["step"].(map[string]any); st["tool"] != "unpay" || st["n"] != float64(1) {
		t.Fatalf("second step: %s", r)
	}
	pend := ts.must(200, "GET", "/v1/runs/r/rollback", nil)
	if pend.body["pending"] != true || pend.num("to") != 1 {
		t.Fatalf("pending: %s", pend)
	}
	r = ts.must(200, "POST", "/v1/runs/r/rollback/outcome", map[string]any{"step": 1, "result": "unpaid"})
	wantStatus(t, r, "done")
	if r.num("seq") != 5 || len(r.body["undone"].([]any)) != 2 || len(r.body["not_undone"].([]any)) != 1 {
		t.Fatalf("done: %s", r)
	}
	// A repeated outcome and a repeated request answer what was done.
	wantStatus(t, ts.must(200, "POST", "/v1/runs/r/rollback", map[string]any{"to": 1, "allow_not_undone": true, "request_id": "rb1"}), "done")
	st := ts.must(200, "GET", "/v1/runs/r/state", nil)
	mem := st.body["memory"].(map[string]any)
	if mem["x"] != "1" || mem["pay"] != nil || mem["book"] != nil || st.num("seq") != 5 {
		t.Fatalf("state after the rollback: %s", st)
	}
	if p := ts.must(200, "GET", "/v1/runs/r/rollback", nil); p.body["pending"] != false {
		t.Fatalf("pending after the rollback: %s", p)
	}
	// Bad requests.
	wantError(t, ts.do("POST", "/v1/runs/r/rollback", map[string]any{}), 400, codeBadRequest, "to")
	wantError(t, ts.do("POST", "/v1/runs/r/rollback/outcome", map[string]any{"step": 0, "result": "x"}), 404, codeRollbackNotFound, "step")
	wantError(t, ts.do("POST", "/v1/runs/r/rollback/resolve", map[string]any{"key": "k", "result": "x"}), 409, codeNotInDoubt, "")
	p, _ = ts.begin("r", nil)
	wantError(t, ts.do("POST", p+"/calls/0", map[string]any{"tool": "t", "compensate": map[string]any{}}), 400, codeBadRequest, "compensate.tool")
	// A repeated call names one action, compensation included.
	call := map[string]any{"tool": "t", "compensate": map[string]any{"tool": "untie", "args": map[string]any{"a": 1}}}
	wantStatus(t, ts.must(200, "POST", p+"/calls/0", call), "execute")
	ts.must(200, "POST", p+"/calls/0", map[string]any{"tool": "t", "compensate": map[string]any{"tool": "untie", "args": map[string]any{"a": 1.0}}})
	wantError(t, ts.do("POST", p+"/calls/0", map[string]any{"tool": "t", "compensate": map[string]any{"tool": "untie", "args": map[string]any{"a": 2}}}), 409, codeCallMismatch, "compensate")
	wantError(t, ts.do("POST", p+"/calls/0", map[string]any{"tool": "t"}), 409, codeCallMismatch, "compensate")
	// A compensation takes no redact_result (the ledger could not apply it).
	wantError(t, ts.do("POST", p+"/calls/1", map[string]any{"tool": "t", "compensate": map[string]any{"tool": "u", "redact_result": []string{"/x"}}}), 400, codeBadRequest, "redact_result")
}

// TestRollbackServerKilled: a rollback with three compensations, the
// server SIGKILLed at seeded points (after a compensation is handed out,
// after it is certified); the client resumes by posting the rollback
// again, resolves what is in doubt from its downstream's record, and no
// compensation takes effect twice.
func TestRollbackServerKilled(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	p := startProc(t, "--store", store, "--socket", sock)
	cl := unixClient(t, sock)
	cl.openRun("r")
	cl.begin("r", map[string]any{"commit": map[string]any{"delta": []map[string]any{{"op": "set", "key": "x", "value": "1"}}}})
	for i := range 3 {
		a, _ := cl.begin("r", nil)
		comp := map[string]any{"tool": "refund", "args": map[string]any{"i": i}, "idempotent": i == 1}
		wantStatus(t, cl.act(a, 0, map[string]any{"tool": "pay", "args": map[string]any{"i": i}, "compensate": comp}, "paid"), "done")
		cl.commit(a, map[string]any{"op": "set", "key": fmt.Sprint("p", i), "value": "paid"})
	}
	effects := map[string]int{}
	kills := 0
	kill := func(where string) bool {
		if rng.IntN(3) != 0 {
			return false
		}
		t.Logf("SIGKILL %s", where)
		kills++
		p.kill()
		cl.cl.CloseIdleConnections()
		p.start()
		return true
	}
	req := map[string]any{"to": 1}
	r := cl.must(200, "POST", "/v1/runs/r/rollback", req)
	for guard := 0; r.str("status") != "done"; guard++ {
		if guard > 100 {
			t.Fatalf("the rollback does not finish: %s", r)
		}
		switch r.str("status") {
		case "execute":
			st := r.body["step"].(map[string]any)
			key := st["key"].(string)
			if kill(fmt.Sprintf("step %v handed out", st["n"])) {
				r = cl.must(200, "POST", "/v1/runs/r/rollback", req)
				continue
			}
			effects[key]++
			r = cl.do("POST", "/v1/runs/r/rollback/outcome", map[string]any{"step": st["n"], "result": "refunded"})
			if r.status != 200 {
				t.Fatalf("outcome: %s", r)
			}
			if kill(fmt.Sprintf("step %v certified", st["n"])) {
				r = cl.must(200, "POST", "/v1/runs/r/rollback", req)
			}
		case "in_doubt":
			key := r.str("key")
			if effects[key] > 0 {
				cl.must(200, "POST", "/v1/runs/r/rollback/resolve", map[string]any{"key": key, "result": "refunded"})
			} else {
				cl.must(200, "POST", "/v1/runs/r/rollback/resolve", map[string]any{"key": key, "failed": "never happened"})
			}
			r = cl.must(200, "POST", "/v1/runs/r/rollback", req)
		case "running":
			r = cl.must(200, "POST", "/v1/runs/r/rollback", req)
		default:
			t.Fatalf("rollback: %s", r)
		}
	}
	if len(effects) != 3 {
		t.Fatalf("effects %v, want 3 keys", effects)
	}
	for k, n := range effects {
		if n != 1 {
			t.Errorf("compensation %s took effect %d times", k, n)
		}
	}
	st := cl.must(200, "GET", "/v1/runs/r/state", nil)
	mem := st.body["memory"].(map[string]any)
	if mem["x"] != "1" || len(mem) != 1 {
		t.Fatalf("state after the rollback: %s", st)
	}
	t.Logf("%d kills", kills)
}

// TestRollbackGracefulRestart: a server stopped (SIGTERM) while a
// compensation waits for its client leaves it in doubt and the rollback
// pending; the next server resumes it once the client resolves it.
func TestRollbackGracefulRestart(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	ts.begin("r", map[string]any{"commit": map[string]any{"delta": []map[string]any{}}})
	p, _ := ts.begin("r", nil)
	wantStatus(t, ts.act(p, 0, map[string]any{"tool": "pay", "compensate": map[string]any{"tool": "refund"}}, "paid"), "done")
	ts.commit(p)
	r := ts.must(200, "POST", "/v1/runs/r/rollback", map[string]any{"to": 1})
	wantStatus(t, r, "execute")
	key := r.body["step"].(map[string]any)["key"].(string)
	ts.restart()
	if pend := ts.must(200, "GET", "/v1/runs/r/rollback", nil); pend.body["pending"] != true {
		t.Fatalf("after a restart: %s", pend)
	}
	wantError(t, ts.do("POST", "/v1/runs/r/attempts", map[string]any{}), 409, codeRollbackPending, "")
	r = ts.must(200, "POST", "/v1/runs/r/rollback", map[string]any{"to": 1})
	if r.str("status") != "in_doubt" || r.str("key") != key {
		t.Fatalf("resumed: %s", r)
	}
	wantStatus(t, ts.must(200, "POST", "/v1/runs/r/rollback/resolve", map[string]any{"key": key, "result": "refunded"}), "resolved")
	r = ts.must(200, "POST", "/v1/runs/r/rollback", map[string]any{"to": 1})
	if r.str("status") != "done" || r.num("seq") != 3 || r.body["resumed"] != true {
		t.Fatalf("resumed after the resolution: %s", r)
	}
}
