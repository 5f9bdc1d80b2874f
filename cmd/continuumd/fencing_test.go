package main

import (
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"testing"
	"time"
)

var takeoverTrials = flag.Int("takeover.trials", 0, "trials of TestTakeoverDuringCall (0: 6 with -short, else 40)")

// effects is a downstream that counts effects per key and deduplicates
// nothing.
type effects struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *effects) count(k string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[k]
}

func (e *effects) add(k string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n[k]++
}

// TestTakeoverDuringCall: a client is inside a call (0 to 1 s, a
// check-then-act for an idempotent action, a plain effect for one that is
// not) when another client takes its run over. The new client is never
// told to execute an action the old one may still be executing (it is
// in_doubt; the client reconciles once its own bound on a call, 1 s, has
// passed, and resolves it, with retry if the downstream never saw it),
// and the old client's outcome, reported after the takeover, is never
// certified. No key takes effect twice.
//
//	go test ./cmd/continuumd -run TestTakeoverDuringCall -takeover.trials 300
func TestTakeoverDuringCall(t *testing.T) {
	trials := *takeoverTrials
	if trials == 0 {
		trials = 40
		if testing.Short() {
			trials = 6
		}
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d, %d trials", seed, trials)
	rng := mrand.New(mrand.NewPCG(uint64(seed), 2))
	ts := startServer(t, "", nil)
	d := &effects{n: map[string]int{}}
	const bound = time.Second // the clients' own bound on a call
	calls := []map[string]any{{"tool": "ship", "idempotent": true}, {"tool": "charge"}}
	var inDoubt, executed int
	for trial := range trials {
		run := fmt.Sprintf("f%d", trial)
		ts.openRun(run)
		p, _ := ts.begin(run, nil)
		var takenOver time.Time
		var mu sync.Mutex
		var wg sync.WaitGroup
		durs := []time.Duration{time.Duration(rng.Int64N(int64(bound))), time.Duration(rng.Int64N(int64(bound)))}
		wg.Go(func() { // the old client
			for n, call := range calls {
				r, err := ts.send("POST", fmt.Sprintf("%s/calls/%d", p, n), call)
				if err != nil || r.str("status") != "execute" {
					return // taken over
				}
				key := r.str("key")
				if !(call["idempotent"] == true && d.count(key) > 0) {
					time.Sleep(durs[n])
					d.add(key)
				}
				posted := time.Now()
				o, err := ts.send("POST", fmt.Sprintf("%s/calls/%d/outcome", p, n), map[string]any{"result": "done " + key})
				mu.Lock()
				after := !takenOver.IsZero() && posted.After(takenOver)
				mu.Unlock()
				if err == nil && o.status == 200 && after {
					t.Errorf("trial %d: the old client's outcome of call %d, posted after the takeover, was accepted: %s", trial, n, o)
				}
				if err != nil || o.status != 200 {
					return
				}
			}
		})
		time.Sleep(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
		p2, _ := ts.begin(run, map[string]any{"takeover": true})
		mu.Lock()
		takenOver = time.Now()
		mu.Unlock()
		for n, call := range calls {
			r := ts.must(200, "POST", fmt.Sprintf("%s/calls/%d", p2, n), call)
			key := r.str("key")
			switch r.str("status") {
			case "in_doubt":
				inDoubt++
				time.Sleep(bound) // the old client's call is over
				if d.count(key) > 0 {
					ts.must(200, "POST", fmt.Sprintf("%s/calls/%d/resolve", p2, n), map[string]any{"result": "done " + key})
					continue
				}
				r = ts.must(200, "POST", fmt.Sprintf("%s/calls/%d/resolve", p2, n), map[string]any{"failed": "no effect downstream", "retry": true})
				wantStatus(t, r, "execute")
				fallthrough
			case "execute":
				executed++
				if !(call["idempotent"] == true && d.count(key) > 0) {
					d.add(key)
				}
				wantStatus(t, ts.must(200, "POST", fmt.Sprintf("%s/calls/%d/outcome", p2, n), map[string]any{"result": "done " + key}), "done")
			case "done":
			default:
				t.Fatalf("trial %d: call %d on the new attempt: %s", trial, n, r)
			}
		}
		ts.commit(p2)
		wg.Wait()
		d.mu.Lock()
		for k, c := range d.n {
			if c > 1 {
				t.Errorf("trial %d: key %s took effect %d times", trial, k, c)
			}
		}
		d.mu.Unlock()
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("new attempts: %d calls in doubt, %d executed", inDoubt, executed)
}
