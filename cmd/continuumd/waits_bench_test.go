package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

var (
	waitBench       = flag.Bool("waitbench", false, "run TestWaitWakeLatency: an event's post to its waiting run's wake, over the wire and in process")
	waitBenchRounds = flag.Int("waitbench.rounds", 5, "alternating rounds of TestWaitWakeLatency")
	waitBenchN      = flag.Int("waitbench.n", 200, "events per round and side of TestWaitWakeLatency")
)

// TestWaitWakeLatency measures the latency from an event's post to the
// wake of the run waiting for it, over the wire (continuumd as a process
// of its own, its Unix socket, the waiter in a long poll of GET
// /v1/runs/{run}/wait or GET /v1/ready) beside in process (the engine on
// a store of the same disk, the waiter in Run.WaitEnded, or in DB.Ready
// after DB.ReadyChanged), in alternating rounds; both stores fsync (the
// event is durable when its post is answered). Each sample: the run
// waits, the waiter blocks, then the clock starts, the event is sent, and
// the clock stops when the waiter has the ended wait; then an atom of the
// run commits, taking the wait.
// It prints p50 and p99 per round and side, and the medians of the
// rounds. Behind -waitbench:
//
//	go test ./cmd/continuumd -run TestWaitWakeLatency -waitbench -v [-waitbench.rounds 5 -waitbench.n 200]
func TestWaitWakeLatency(t *testing.T) {
	if !*waitBench {
		t.Skip("a measurement: -waitbench runs it")
	}
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	startProc(t, "--store", store, "--socket", sock)
	cl := unixClient(t, sock)
	db, err := engine.Open(filepath.Join(dir, "lib"), &engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	type side struct {
		name   string
		sample func(i int, byReady bool) time.Duration
	}
	wireRun := func(id string) { cl.openRun(id) }
	wireRun("wire-w")
	wireRun("wire-r")
	wire := side{"wire (Unix socket)", func(i int, byReady bool) time.Duration {
		id := "wire-w"
		if byReady {
			id = "wire-r"
		}
		// The atom after the wait takes it (after the clock stops), so that
		// no wait but this one is ready.
		defer func() {
			p, _ := cl.begin(id, nil)
			cl.commit(p)
		}()
		cl.must(200, "POST", "/v1/runs/"+id+"/wait", map[string]any{"name": "go"})
		woke := make(chan time.Time, 1)
		go func() {
			for {
				if byReady {
					r := cl.must(200, "GET", "/v1/ready?wait_ms=4000", nil)
					if len(r.body["ready"].([]any)) > 0 {
						woke <- time.Now()
						return
					}
					continue
				}
				r := cl.must(200, "GET", "/v1/runs/"+id+"/wait?wait_ms=4000", nil)
				if w, _ := r.body["wait"].(map[string]any); w != nil && w["outcome"] != "open" {
					woke <- time.Now()
					return
				}
			}
		}()
		time.Sleep(3 * time.Millisecond) // the long poll is blocked
		t0 := time.Now()
		cl.must(200, "POST", "/v1/runs/"+id+"/events", map[string]any{"name": "go", "sender": fmt.Sprint("s", i), "payload": "ok"})
		return (<-woke).Sub(t0)
	}}
	libRuns := map[bool]*engine.Run{}
	for _, byReady := range []bool{false, true} {
		r, err := db.Run(ctx, fmt.Sprint("lib-", byReady))
		if err != nil {
			t.Fatal(err)
		}
		libRuns[byReady] = r
	}
	lib := side{"in process", func(i int, byReady bool) time.Duration {
		run := libRuns[byReady]
		defer func() {
			a, err := run.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Commit(ctx, new(frame.Delta)); err != nil {
				t.Fatal(err)
			}
		}()
		if _, err := run.Wait(ctx, "go", time.Time{}); err != nil {
			t.Fatal(err)
		}
		woke := make(chan time.Time, 1)
		go func() {
			if byReady {
				for {
					ch := db.ReadyChanged()
					ws, err := db.Ready(ctx, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if len(ws) > 0 {
						woke <- time.Now()
						return
					}
					<-ch
				}
			}
			if _, err := run.WaitEnded(ctx); err != nil {
				t.Error(err)
			}
			woke <- time.Now()
		}()
		time.Sleep(3 * time.Millisecond)
		t0 := time.Now()
		if _, err := db.SendEvent(ctx, run.ID(), "go", fmt.Sprint("s", i), []byte("ok")); err != nil {
			t.Fatal(err)
		}
		return (<-woke).Sub(t0)
	}}

	pct := func(ds []time.Duration, p float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, int(float64(len(s))*p))]
	}
	type key struct {
		side    string
		byReady bool
	}
	p50s, p99s := map[key][]time.Duration{}, map[key][]time.Duration{}
	n := 0
	for round := 0; round < *waitBenchRounds; round++ {
		order := []side{wire, lib}
		if round%2 == 1 {
			order = []side{lib, wire}
		}
		for _, byReady := range []bool{false, true} {
			for _, sd := range order {
				var ds []time.Duration
				for i := 0; i < *waitBenchN; i++ {
					ds = append(ds, sd.sample(n, byReady))
					n++
				}
				k := key{sd.name, byReady}
				p50s[k] = append(p50s[k], pct(ds, 0.50))
				p99s[k] = append(p99s[k], pct(ds, 0.99))
				t.Logf("round %d %-18s waiter %-9s p50 %8v p99 %8v", round, sd.name, waiter(byReady), pct(ds, 0.50).Round(time.Microsecond), pct(ds, 0.99).Round(time.Microsecond))
			}
		}
	}
	med := func(ds []time.Duration) time.Duration { return pct(ds, 0.5) }
	for _, byReady := range []bool{false, true} {
		w, l := key{wire.name, byReady}, key{lib.name, byReady}
		t.Logf("median of %d rounds, waiter %s: over the wire p50 %v p99 %v; in process p50 %v p99 %v; wire/in-process p50 %.2fx, p99 %.2fx",
			*waitBenchRounds, waiter(byReady), med(p50s[w]).Round(time.Microsecond), med(p99s[w]).Round(time.Microsecond),
			med(p50s[l]).Round(time.Microsecond), med(p99s[l]).Round(time.Microsecond),
			float64(med(p50s[w]))/float64(med(p50s[l])), float64(med(p99s[w]))/float64(med(p99s[l])))
	}
}

func waiter(byReady bool) string {
	if byReady {
		return "ready"
	}
	return "run-wait"
}
