package main

import (
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
	"testing"
	"time"
)

// The points of a wait's life at which TestWaitServerKilled kills the
// server.
var waitKillPoints = []string{
	"after the wait",                // declared and acknowledged, no event yet
	"while the event is posted",     // the post races the SIGKILL; the sender retries after
	"after the event",               // acknowledged, the run not resumed yet
	"after the outcome was read",    // the next attempt read it and did not commit
	"while the deadline passes",     // the deadline passes while no server holds the store
	"while the wait is declared",    // the declaration races the SIGKILL; the client declares it again after
	"while the timeout is recorded", // a long poll of ready records the timeout; the SIGKILL races it
}

// TestWaitServerKilled: the server SIGKILLed at seeded points of a wait
// (after it, while its event is posted, after the event, after the next
// attempt read the outcome, while its deadline passes, while it is
// declared, while its timeout is recorded): after each
// restart the wait has ended exactly once (the event delivered once, the
// timeout once), the resumed atom reads that outcome, a repeat of the
// sender's event is a duplicate, no copy of the event is left for a later
// wait, and the store verifies.
func TestWaitServerKilled(t *testing.T) {
	rounds := 2 * len(waitKillPoints)
	if testing.Short() {
		rounds = len(waitKillPoints)
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := mrand.New(mrand.NewPCG(uint64(seed), 7))
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	p := startProc(t, "--store", store, "--socket", sock)
	cl := unixClient(t, sock)
	restart := func() {
		p.kill()
		cl.cl.CloseIdleConnections()
		p.start()
	}
	for i := 0; i < rounds; i++ {
		point := i % len(waitKillPoints)
		if !testing.Short() && i >= len(waitKillPoints) {
			point = rng.IntN(len(waitKillPoints))
		}
		run := fmt.Sprintf("w-%d", i)
		what := fmt.Sprintf("round %d, %s, run %s", i, waitKillPoints[point], run)
		cl.openRun(run)
		a, _ := cl.begin(run, nil)
		cl.commit(a, map[string]any{"op": "set", "key": "asked", "value": "yes"})
		timedOut := point == 4 || point == 6
		timeout := 3_600_000
		if timedOut {
			timeout = 30 + rng.IntN(50)
		}
		decl := map[string]any{"name": "approval", "timeout_ms": timeout, "seq": 1}
		// killRacing SIGKILLs the server a seeded moment after it starts
		// while the request is sent, and starts it again.
		killRacing := func(method, path string, body any) {
			killed := make(chan struct{})
			go func(d time.Duration) {
				time.Sleep(d)
				p.kill()
				close(killed)
			}(time.Duration(rng.IntN(1200)) * time.Microsecond)
			r, ok := tryDo(cl, method, path, body)
			<-killed
			cl.cl.CloseIdleConnections()
			p.start()
			t.Logf("%s: the request before the kill answered: %v %s", what, ok, r)
		}
		if point == 5 {
			killRacing("POST", "/v1/runs/"+run+"/wait", decl)
		}
		w := cl.must(200, "POST", "/v1/runs/"+run+"/wait", decl)
		if w.str("outcome") != "open" {
			t.Fatalf("%s: wait: %s", what, w)
		}
		ev := map[string]any{"name": "approval", "sender": "human-" + run, "payload": "approved " + run}
		var a2 string
		switch point {
		case 0:
			restart()
			if r := cl.must(200, "GET", "/v1/runs/"+run+"/wait", nil); r.body["wait"].(map[string]any)["outcome"] != "open" {
				t.Fatalf("%s: the wait after the restart: %s", what, r)
			}
			cl.must(200, "POST", "/v1/runs/"+run+"/events", ev)
		case 1:
			killRacing("POST", "/v1/runs/"+run+"/events", ev)
			r := cl.must(200, "POST", "/v1/runs/"+run+"/events", ev)
			t.Logf("%s: the retry: %s", what, r)
		case 2:
			if r := cl.must(200, "POST", "/v1/runs/"+run+"/events", ev); r.body["delivered"] != true {
				t.Fatalf("%s: event: %s", what, r)
			}
			restart()
		case 3:
			cl.must(200, "POST", "/v1/runs/"+run+"/events", ev)
			a2, _ = cl.begin(run, nil)
			if r := cl.must(200, "GET", a2+"/wait", nil); r.str("outcome") != "delivered" {
				t.Fatalf("%s: outcome before the kill: %s", what, r)
			}
			restart()
		case 4:
			p.kill()
			time.Sleep(time.Duration(timeout+20) * time.Millisecond)
			cl.cl.CloseIdleConnections()
			p.start()
		case 5:
			cl.must(200, "POST", "/v1/runs/"+run+"/events", ev)
		case 6:
			time.Sleep(time.Duration(timeout+20) * time.Millisecond)
			killRacing("GET", "/v1/ready", nil)
		}
		want := "delivered"
		if timedOut {
			want = "timed_out"
		}
		// The host finds the run ready, once, by a long poll.
		var found map[string]any
		waitFor(t, hangGuard, what+": the run listed ready", func() bool {
			r := cl.must(200, "GET", "/v1/ready?wait_ms=1000", nil)
			n := 0
			for _, x := range r.body["ready"].([]any) {
				if m := x.(map[string]any); m["run"] == run {
					found = m
					n++
				}
			}
			if n > 1 {
				t.Fatalf("%s: the run listed %d times: %s", what, n, r)
			}
			return n == 1
		})
		if found["outcome"] != want || found["seq"] != 1.0 {
			t.Fatalf("%s: ready %v, want %s after seq 1", what, found, want)
		}
		a2, b := cl.begin(run, nil)
		if int(b.num("seq")) != 2 {
			t.Fatalf("%s: begin after the wait: %s", what, b)
		}
		out := cl.must(200, "GET", a2+"/wait", nil)
		if out.str("outcome") != want {
			t.Fatalf("%s: the resumed atom's wait: %s", what, out)
		}
		if want == "delivered" {
			e := out.body["event"].(map[string]any)
			if e["sender"] != ev["sender"] || e["payload"] != ev["payload"] {
				t.Fatalf("%s: the event delivered: %s", what, out)
			}
			if r := cl.must(200, "POST", "/v1/runs/"+run+"/events", ev); r.body["duplicate"] != true {
				t.Fatalf("%s: a repeat of the event after the restart: %s", what, r)
			}
		}
		cl.commit(a2, map[string]any{"op": "set", "key": "answer", "value": want})
		// No copy of the event is kept for a later wait of its name.
		if w := cl.must(200, "POST", "/v1/runs/"+run+"/wait", map[string]any{"name": "approval", "seq": 2}); w.str("outcome") != "open" {
			t.Fatalf("%s: a second wait of the name: %s", what, w)
		}
		cl.must(200, "POST", "/v1/runs/"+run+"/wait/cancel", map[string]any{})
	}
	if rep := cl.must(200, "POST", "/v1/verify", map[string]any{"deep": true}); rep.body["ok"] != true {
		t.Fatalf("verify after the kills: %s", rep)
	}
	if r := cl.must(200, "GET", "/v1/ready", nil); len(r.body["ready"].([]any)) != 0 {
		t.Fatalf("ready after every run resumed: %s", r)
	}
}
