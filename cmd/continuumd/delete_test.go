package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"
)

// TestDeleteAndGC: delete of an ended run is durable when answered, and
// repeats answer the deletion; the run answers run_deleted from then on;
// an active run, a run with a live fork, and an unknown run are refused
// with the engine's codes; GC answers what it did.
func TestDeleteAndGC(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("a")
	p, _ := ts.begin("a", nil)
	ts.act(p, 0, map[string]any{"tool": "t"}, "ok")
	ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "v"})
	wantError(t, ts.do("POST", "/v1/runs/a/delete", nil), 409, codeRunNotEnded, "-")
	ts.must(201, "POST", "/v1/runs/a/fork", map[string]any{"at": 1, "id": "f"})
	ts.must(200, "POST", "/v1/runs/a/end", map[string]any{"status": "completed"})
	wantError(t, ts.do("POST", "/v1/runs/a/delete", nil), 409, codeRunHasForks, "-")
	ts.must(200, "POST", "/v1/runs/f/end", map[string]any{"status": "cancelled"})
	d := ts.must(200, "POST", "/v1/runs/f/delete", map[string]any{"reason": "fork abandoned"})
	if d.str("id") != "f" || d.str("reason") != "fork abandoned" {
		t.Fatalf("delete: %s", d)
	}
	d1 := ts.must(200, "POST", "/v1/runs/a/delete", nil)
	d2 := ts.must(200, "POST", "/v1/runs/a/delete", nil) // a repeat answers the deletion
	if d1.str("head") != d2.str("head") || d1.str("reason") != "deleted by request" {
		t.Fatalf("a repeated delete: %s, first %s", d2, d1)
	}
	wantError(t, ts.do("GET", "/v1/runs/a/state", nil), 410, codeRunDeleted, "run")
	wantError(t, ts.do("POST", "/v1/runs/nope/delete", nil), 404, codeRunNotFound, "run")
	g := ts.must(200, "POST", "/v1/gc", nil)
	if _, ok := g.body["segments"]; !ok {
		t.Fatalf("gc: %s", g)
	}
	ts.restart()
	wantError(t, ts.do("GET", "/v1/runs/a", nil), 410, codeRunDeleted, "run")
	if d3 := ts.must(200, "POST", "/v1/runs/a/delete", nil); d3.str("head") != d1.str("head") {
		t.Fatalf("the deletion after a restart: %s, first %s", d3, d1)
	}
}

// TestDeleteServerKilled: the server is SIGKILLed at a seeded moment
// around a delete; after the restart the run is either deleted (and the
// repeat answers the deletion) or whole (and the repeat deletes it):
// never half.
func TestDeleteServerKilled(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	p := startProc(t, "--store", store, "--socket", sock)
	cl := unixClient(t, sock)
	rounds := 4
	if testing.Short() {
		rounds = 2
	}
	for i := range rounds {
		id := fmt.Sprint("run-", i)
		cl.openRun(id)
		a, _ := cl.begin(id, nil)
		cl.commit(a, map[string]any{"op": "set", "key": "k", "value": id})
		cl.must(200, "POST", "/v1/runs/"+id+"/end", map[string]any{"status": "completed"})
		done := make(chan struct{})
		go func() {
			defer close(done)
			cl.send("POST", "/v1/runs/"+id+"/delete", nil) // may be cut by the kill
		}()
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		p.kill()
		<-done
		cl.cl.CloseIdleConnections()
		p.start()
		d := cl.must(200, "POST", "/v1/runs/"+id+"/delete", nil)
		if d.str("id") != id {
			t.Fatalf("round %d: delete after the kill: %s", i, d)
		}
		wantError(t, cl.do("GET", "/v1/runs/"+id, nil), 410, codeRunDeleted, "run")
	}
	cl.must(200, "POST", "/v1/gc", nil)
}
