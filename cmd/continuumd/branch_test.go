package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"
)

// branch begins a branch and returns its attempt's path prefix and answer.
func (ts *testServer) branch(run string, req map[string]any) (string, reply) {
	ts.t.Helper()
	r := ts.must(201, "POST", "/v1/runs/"+run+"/branches", req)
	return "/v1/runs/" + run + "/attempts/" + r.str("attempt"), r
}

// TestBranches: two branches of a run in flight at once; the one that
// writes what the other wrote after its base conflicts (409 conflict with
// the atom and key), writes nothing, and its retry under the same name
// gets its certified action back without executing it; a declared read
// conflicts as a write does; disjoint branches both commit.
func TestBranches(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	ts.begin("r", map[string]any{"commit": map[string]any{"delta": []map[string]any{{"op": "set", "key": "x", "value": "0"}}}})

	a, ra := ts.branch("r", map[string]any{"name": "a"})
	b, rb := ts.branch("r", map[string]any{"name": "b", "reads": []string{"memory:y"}})
	if ra.str("branch") != "a" || ra.num("base") != 1 || ra.num("seq") != 0 || rb.num("base") != 1 {
		t.Fatalf("branch answers: %s, %s", ra, rb)
	}
	// A second open attempt of a name is run_held; takeover is not asked.
	wantError(t, ts.do("POST", "/v1/runs/r/branches", map[string]any{"name": "a"}), 409, codeRunHeld, "name")
	// A begin while branches are in flight is refused as in Go.
	wantError(t, ts.do("POST", "/v1/runs/r/attempts", map[string]any{}), 409, codeRunHeld, "")

	r := ts.act(b, 0, map[string]any{"tool": "mail.send", "args": map[string]any{"to": "x"}}, "sent-1")
	wantStatus(t, r, "done")
	keyB := r.str("key")
	ca := ts.commit(a, map[string]any{"op": "set", "key": "y", "value": "from a"})
	if ca.num("seq") != 2 {
		t.Fatalf("commit a: %s", ca)
	}
	// b read y, which a (seq 2, after b's base) wrote: conflict.
	cb := ts.do("POST", b+"/commit", map[string]any{"delta": []map[string]any{{"op": "set", "key": "z", "value": "from b"}}})
	wantError(t, cb, 409, codeConflict, "")
	det, _ := cb.body["error"].(map[string]any)["details"].(map[string]any)
	if det["key"] != "memory:y" || det["seq"] != float64(2) || det["base"] != float64(1) || det["branch"] != "b" {
		t.Fatalf("conflict details: %s", cb)
	}
	// Repeated, the commit answers the same conflict.
	wantError(t, ts.do("POST", b+"/commit", map[string]any{"delta": []map[string]any{{"op": "set", "key": "z", "value": "from b"}}}), 409, codeConflict, "")
	st := ts.must(200, "GET", "/v1/runs/r/state", nil)
	if mem := st.body["memory"].(map[string]any); mem["z"] != nil {
		t.Fatalf("a conflicting branch wrote: %s", st)
	}

	// The retry under the same name: its action answers done, not execute.
	b2, rb2 := ts.branch("r", map[string]any{"name": "b", "reads": []string{"memory:y"}})
	if rb2.num("base") != 2 {
		t.Fatalf("retry's base: %s", rb2)
	}
	r = ts.must(200, "POST", b2+"/calls/0", map[string]any{"tool": "mail.send", "args": map[string]any{"to": "x"}})
	wantStatus(t, r, "done")
	if r.str("key") != keyB || r.str("result") != "sent-1" {
		t.Fatalf("retry's call: %s (first key %s)", r, keyB)
	}
	if c := ts.commit(b2, map[string]any{"op": "set", "key": "z", "value": "from b"}); c.num("seq") != 3 {
		t.Fatalf("retry's commit: %s", c)
	}

	// A write-write conflict, and disjoint branches that both commit.
	c1, _ := ts.branch("r", map[string]any{"name": "c1"})
	c2, _ := ts.branch("r", map[string]any{"name": "c2"})
	c3, _ := ts.branch("r", map[string]any{"name": "c3"})
	ts.commit(c1, map[string]any{"op": "set", "key": "w", "value": "1"})
	wantError(t, ts.do("POST", c2+"/commit", map[string]any{"delta": []map[string]any{{"op": "set", "key": "w", "value": "2"}}}), 409, codeConflict, "")
	if c := ts.commit(c3, map[string]any{"op": "set", "key": "v", "value": "3"}); c.num("seq") != 5 {
		t.Fatalf("disjoint branch: %s", c)
	}

	// A branch that rides its commit on its begin, and bad requests.
	if r := ts.must(201, "POST", "/v1/runs/r/branches", map[string]any{"name": "d", "commit": map[string]any{"delta": []map[string]any{}}}); r.body["commit"] == nil {
		t.Fatalf("riding commit: %s", r)
	}
	wantError(t, ts.do("POST", "/v1/runs/r/branches", map[string]any{"name": ""}), 400, codeBadRequest, "name")
	wantError(t, ts.do("POST", "/v1/runs/r/branches", map[string]any{"name": "e", "reads": []string{"memory"}}), 400, codeBadRequest, "reads[0]")
	wantError(t, ts.do("POST", "/v1/runs/r/branches", map[string]any{"name": "e", "reads": []string{"objective:x"}}), 400, codeBadRequest, "reads[0]")
	wantError(t, ts.do("POST", "/v1/runs/r/branches", map[string]any{"name": "e", "reads": []string{"tools"}}), 400, codeBadRequest, "reads[0]")
}

// TestBranchLeaseAndTakeover: a branch whose client vanishes is abandoned
// when its lease runs out (its waiting call in doubt), and its name is
// free; takeover abandons an open one at once.
func TestBranchLeaseAndTakeover(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	a, _ := ts.branch("r", map[string]any{"name": "a", "lease_ms": 200})
	wantStatus(t, ts.must(200, "POST", a+"/calls/0", map[string]any{"tool": "t", "args": map[string]any{}}), "execute")
	waitFor(t, 30*time.Second, "the branch's lease to run out", func() bool {
		return ts.do("GET", a, nil).str("state") == "abandoned"
	})
	a2, _ := ts.branch("r", map[string]any{"name": "a"})
	wantStatus(t, ts.must(200, "POST", a2+"/calls/0", map[string]any{"tool": "t", "args": map[string]any{}}), "in_doubt")
	a3, _ := ts.branch("r", map[string]any{"name": "a", "takeover": true})
	if ts.do("GET", a2, nil).str("state") != "abandoned" {
		t.Fatalf("takeover left the branch's attempt open")
	}
	wantStatus(t, ts.must(200, "POST", a3+"/calls/0", map[string]any{"tool": "t", "args": map[string]any{}}), "in_doubt")
	wantStatus(t, ts.must(200, "POST", a3+"/calls/0/resolve", map[string]any{"result": "it happened"}), "done")
	ts.commit(a3)
}

// TestBranchServerKilled: branches of one run with actions, the server
// SIGKILLed at seeded points; every branch is retried under its name until
// it commits, and no action certified before a kill is executed again
// (the downstream counts effects per key).
func TestBranchServerKilled(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	p := startProc(t, "--store", store, "--socket", sock)
	cl := unixClient(t, sock)
	cl.openRun("r")
	effects := map[string]int{}
	results := map[string]string{}
	kills := 0
	maybeKill := func(where string) bool {
		if rng.IntN(4) != 0 {
			return false
		}
		t.Logf("SIGKILL %s", where)
		kills++
		p.kill()
		cl.cl.CloseIdleConnections()
		p.start()
		return true
	}
	const branches, actions = 4, 3
	for i := range branches {
		name := fmt.Sprintf("b%d", i)
	retry:
		for {
			path, _ := cl.branch("r", map[string]any{"name": name, "takeover": true})
			for n := range actions {
				r := cl.do("POST", fmt.Sprintf("%s/calls/%d", path, n), map[string]any{"tool": "pay", "args": map[string]any{"b": i, "n": n}})
				if r.status != 200 {
					continue retry // lease_lost or attempt_not_found after a kill
				}
				switch r.str("status") {
				case "execute":
					key := r.str("key")
					if maybeKill(fmt.Sprintf("branch %s call %d executing", name, n)) {
						continue retry // the intent is durable, the effect never happened
					}
					effects[key]++
					results[key] = fmt.Sprintf("paid %s/%d", name, n)
					o := cl.do("POST", fmt.Sprintf("%s/calls/%d/outcome", path, n), map[string]any{"result": results[key]})
					if o.status != 200 {
						t.Fatalf("outcome: %s", o)
					}
					if maybeKill(fmt.Sprintf("branch %s call %d certified", name, n)) {
						continue retry
					}
				case "done":
					if r.str("result") != results[r.str("key")] {
						t.Fatalf("branch %s call %d: %s, want %q", name, n, r, results[r.str("key")])
					}
				case "in_doubt":
					key := r.str("key")
					if effects[key] == 0 {
						res := cl.must(200, "POST", fmt.Sprintf("%s/calls/%d/resolve", path, n), map[string]any{"failed": "never happened", "retry": true})
						if res.str("status") != "execute" {
							t.Fatalf("resolve with retry: %s", res)
						}
						effects[key]++
						results[key] = fmt.Sprintf("paid %s/%d", name, n)
						cl.must(200, "POST", fmt.Sprintf("%s/calls/%d/outcome", path, n), map[string]any{"result": results[key]})
					} else {
						cl.must(200, "POST", fmt.Sprintf("%s/calls/%d/resolve", path, n), map[string]any{"result": results[key]})
					}
				default:
					t.Fatalf("call: %s", r)
				}
			}
			c := cl.do("POST", path+"/commit", map[string]any{"delta": []map[string]any{{"op": "set", "key": name, "value": "done"}}})
			if c.status == 200 {
				break
			}
			if c.code() != codeAttemptNotFound && c.code() != codeLeaseLost {
				t.Fatalf("commit: %s", c)
			}
		}
	}
	for k, n := range effects {
		if n != 1 {
			t.Errorf("key %s executed %d times", k, n)
		}
	}
	if len(effects) != branches*actions {
		t.Errorf("%d effects, want %d", len(effects), branches*actions)
	}
	st := cl.must(200, "GET", "/v1/runs/r/state", nil)
	mem := st.body["memory"].(map[string]any)
	for i := range branches {
		if mem[fmt.Sprintf("b%d", i)] != "done" {
			t.Errorf("branch b%d's write is missing: %s", i, st)
		}
	}
	t.Logf("%d kills", kills)
}

// TestBranchGracefulRestart: a server stopped (SIGTERM) with a branch whose
// call waits for its outcome closes the store; the next server branches
// again under the name, and the call answers in doubt under its key.
func TestBranchGracefulRestart(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	a, _ := ts.branch("r", map[string]any{"name": "a"})
	r := ts.must(200, "POST", a+"/calls/0", map[string]any{"tool": "t", "args": map[string]any{}})
	wantStatus(t, r, "execute")
	ts.restart()
	a2, _ := ts.branch("r", map[string]any{"name": "a"})
	r2 := ts.must(200, "POST", a2+"/calls/0", map[string]any{"tool": "t", "args": map[string]any{}})
	if r2.str("status") != "in_doubt" || r2.str("key") != r.str("key") {
		t.Fatalf("after a restart: %s (first %s)", r2, r)
	}
	ts.must(200, "POST", a2+"/calls/0/resolve", map[string]any{"result": "done before"})
	if c := ts.commit(a2, map[string]any{"op": "set", "key": "k", "value": "v"}); c.num("seq") != 1 {
		t.Fatalf("commit: %s", c)
	}
}
