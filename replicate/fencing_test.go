package replicate

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/nats-io/nats.go"
)

var (
	fencingTrials = flag.Int("fencing.trials", 0, "failovers of TestFencedCallsNeverDouble (0: 3 with -short, else 12)")
	fencingSeed   = flag.Int64("fencing.seed", 0, "seed of TestFencedCallsNeverDouble (0: the time)")
	fencingBefore = flag.Bool("fencing.before", false, "TestFencedCallsNeverDouble without the wait for the previous writer's calls: it must find duplicates")
)

// counter is a downstream that counts the effects of each key and
// deduplicates nothing.
type counter struct {
	mu      sync.Mutex
	effects map[string]int
}

func (d *counter) count(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.effects[key]
}

func (d *counter) effect(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.effects == nil {
		d.effects = map[string]int{}
	}
	d.effects[key]++
}

func (d *counter) duplicates() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var dup []string
	for k, n := range d.effects {
		if n > 1 {
			dup = append(dup, fmt.Sprintf("%s x%d", k, n))
		}
	}
	slices.Sort(dup)
	return dup
}

// call is one tool call lasting dur: it stops at its context's end unless
// stubborn (it then lands its effect after the writer lost the store, as
// a call that ignores cancellation does). checkFirst makes it idempotent
// by asking the downstream first, dur before its effect lands (a
// check-then-act whose check races with an earlier call still in flight).
// late is set if it returned after its context ended.
func (d *counter) call(dur time.Duration, stubborn, checkFirst bool, late *atomic.Bool) ledger.Exec {
	return func(ctx context.Context, key string) ([]byte, error) {
		if _, ok := engine.FencingToken(ctx); !ok {
			return nil, errors.New("exec's context carries no fencing token")
		}
		if checkFirst && d.count(key) > 0 {
			return []byte("done " + key), nil
		}
		if stubborn {
			time.Sleep(dur)
		} else {
			select {
			case <-time.After(dur):
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		d.effect(key)
		if ctx.Err() != nil {
			late.Store(true)
		}
		return []byte("done " + key), nil
	}
}

// fencedStep is one atom of an agent on a fenced writer: an idempotent
// call (check-then-act), a call that is not (the agent reconciles it with
// the downstream when it is in doubt), and a commit. It reports whether
// its atom was interrupted with an action in doubt.
func fencedStep(run *engine.Run, d *counter, rng *rand.Rand, t *testing.T) (seq uint64, inDoubt bool, err error) {
	if _, acts, err := run.Interrupted(ctx); err == nil {
		for _, a := range acts {
			inDoubt = inDoubt || a.Status == ledger.StatusIntent
		}
	}
	a, err := run.Begin(ctx)
	if err != nil {
		return 0, inDoubt, err
	}
	seq = a.Seq()
	args := fmt.Appendf(nil, `{"run":%q,"seq":%d}`, run.ID(), seq)
	var late atomic.Bool
	dur := func() time.Duration { return time.Duration(rng.Int63n(int64(time.Second))) }
	if _, err := a.Do(ctx, ledger.Action{Tool: "ship", Args: args, Idempotent: true}, d.call(dur(), rng.Intn(3) == 0, true, &late)); err != nil {
		return seq, inDoubt, err
	}
	if late.Load() {
		t.Errorf("run %s seq %d: a call that returned after its writer lost the store was certified", run.ID(), seq)
	}
	out, err := a.Do(ctx, ledger.Action{Tool: "charge", Args: args}, d.call(dur(), rng.Intn(3) == 0, false, &late))
	var e *ledger.InDoubtError
	if errors.As(err, &e) && !errors.Is(err, engine.ErrLeaseLost) {
		// Reported in doubt once the previous writer's call is over: the
		// downstream's answer is final.
		out = []byte("done " + e.Key)
		if d.count(e.Key) == 0 {
			d.effect(e.Key)
		}
		err = a.ResolveInDoubt(ctx, e, out)
	}
	if err != nil {
		return seq, inDoubt, err
	}
	if late.Load() {
		t.Errorf("run %s seq %d: a call that returned after its writer lost the store was certified", run.ID(), seq)
	}
	delta := new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleTool, Content: string(out)}).
		Set(fmt.Sprintf("step-%d", seq), fmt.Appendf(nil, "%s at %d", run.ID(), seq))
	return seq, inDoubt, a.Commit(ctx, delta)
}

// fencedWriter is a writer of TestFencedCallsNeverDouble, connected
// through a proxy that a partition cuts.
type fencedWriter struct {
	r  *Replicator
	db *engine.DB
	p  *proxy
}

func openFenced(t *testing.T, c *cluster, node string, i int, dir string, takeover, before bool) *fencedWriter {
	t.Helper()
	p := newProxy(t, c.urls[i][len("nats://"):])
	nc, err := nats.Connect(p.url(), nats.UserInfo("app", "app"), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond), nats.IgnoreDiscoveredServers())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cfg := c.config("fenced", node, i)
	cfg.Conn, cfg.Takeover, cfg.noQuiet = nc, takeover, before
	cfg.CallBound = 1200 * time.Millisecond // calls last at most 1 s
	cfg.LeaseTTL = time.Second              // renewals every 333 ms on a loaded machine
	cfg.Timeout = 4 * time.Second
	r, err := Open(ctx, dir, cfg)
	if err != nil {
		t.Fatalf("replicate.Open for %s: %v", node, err)
	}
	db, err := engine.Open(dir, engineOptions(r))
	if err != nil {
		t.Fatalf("engine.Open for %s: %v", node, err)
	}
	return &fencedWriter{r: r, db: db, p: p}
}

// TestFencedCallsNeverDouble: a writer whose tool calls last 0 to 1 s
// (some of them ignoring their context's end) loses the store while calls
// are in flight: its renewals stop (the next node takes the lease once it
// expired), another node takes it over (Takeover), or its network is cut.
// The next writer resumes every run. Against a downstream that counts
// effects per key and deduplicates nothing: no effect twice, no
// acknowledged atom lost, no call that returned after its writer lost the
// store certified. With -fencing.before (the next writer does not wait
// for the previous one's calls) it finds the duplicates of issue 35.
//
//	go test ./replicate -run TestFencedCallsNeverDouble -fencing.trials 300 -timeout 60m
func TestFencedCallsNeverDouble(t *testing.T) {
	trials := *fencingTrials
	if trials == 0 {
		trials = 12
		if testing.Short() {
			trials = 3
		}
	}
	seed := *fencingSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (-fencing.seed), %d trials", seed, trials)
	rng := rand.New(rand.NewSource(seed))
	c := newCluster(t, true)
	root := t.TempDir()
	nodes := []string{"a", "b"}
	var d counter
	var k acked
	w := openFenced(t, c, "a", 0, filepath.Join(root, "a"), false, *fencingBefore)
	modes := []string{"renewal stopped", "takeover", "partition"}
	var waits [2][]time.Duration // first atom on the new writer: runs without, with an action in doubt
	var failovers []time.Duration
	for trial := range trials {
		mode := modes[trial%len(modes)]
		var ids []string
		for j := range 3 {
			ids = append(ids, fmt.Sprintf("t%d-%d", trial, j))
		}
		// The old writer's agents: atom after atom until the writer fails.
		var old sync.WaitGroup
		for _, id := range ids {
			run, err := w.db.Run(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			arng := rand.New(rand.NewSource(rng.Int63()))
			old.Go(func() {
				for {
					seq, _, err := fencedStep(run, &d, arng, t)
					if err != nil {
						return
					}
					k.add(run, seq)
				}
			})
		}
		time.Sleep(time.Duration(100+rng.Intn(900)) * time.Millisecond)
		next := nodes[(trial+1)%2]
		t0 := time.Now()
		switch mode {
		case "renewal stopped":
			w.r.noRenew.Store(true)
		case "partition":
			w.p.cut()
		}
		n := openFenced(t, c, next, (trial+1)%3, filepath.Join(root, next), mode == "takeover", *fencingBefore)
		failovers = append(failovers, time.Since(t0))
		resumed := time.Now()
		var mu sync.Mutex
		var fresh sync.WaitGroup
		for _, id := range ids {
			run, err := n.db.Run(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			arng := rand.New(rand.NewSource(rng.Int63()))
			fresh.Go(func() {
				for i := range 2 {
					seq, inDoubt, err := fencedStep(run, &d, arng, t)
					if err != nil {
						t.Errorf("trial %d (%s): run %s on the new writer: %v", trial, mode, id, err)
						return
					}
					k.add(run, seq)
					if i == 0 {
						mu.Lock()
						waits[b2i(inDoubt)] = append(waits[b2i(inDoubt)], time.Since(resumed))
						mu.Unlock()
					}
				}
			})
		}
		if mode == "partition" {
			w.p.heal()
		}
		fresh.Wait()
		old.Wait() // every call of the old writer has returned
		w.db.Close()
		w.r.Abandon()
		k.check(t, n.db)
		if dup := d.duplicates(); len(dup) > 0 {
			t.Fatalf("trial %d (%s): duplicate effects: %v", trial, mode, dup)
		}
		w = n
	}
	defer w.r.Close()
	defer w.db.Close()
	slices.Sort(failovers)
	t.Logf("failover (old writer stopped to new writer open): p50 %v p99 %v over %d", percentile(failovers, 0.5), percentile(failovers, 0.99), len(failovers))
	for i, what := range []string{"without", "with"} {
		slices.Sort(waits[i])
		if len(waits[i]) > 0 {
			t.Logf("first atom on the new writer, runs %s an action in doubt: p50 %v p99 %v over %d", what,
				percentile(waits[i], 0.5), percentile(waits[i], 0.99), len(waits[i]))
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

var fencingMeasure = flag.Int("fencing.measure", 0, "forced failovers of TestFailoverWait per variant (0: skip)")

// TestFailoverWait measures failover with and without the wait for the
// previous writer's calls (Config.noQuiet: the behaviour before it),
// alternating one failover of each: the writer crashes (Abandon: its
// renewals stop) while one run has a call in flight and another has none;
// the next node opens once the lease expired and resumes both. It reports
// p50 and p99 of kill to resumed and lease free to resumed, per variant and
// per run. Skipped unless -fencing.measure N.
//
//	go test ./replicate -run TestFailoverWait -fencing.measure 100 -v -timeout 60m
func TestFailoverWait(t *testing.T) {
	if *fencingMeasure == 0 {
		t.Skip("-fencing.measure N runs N forced failovers per variant")
	}
	const bound = 400 * time.Millisecond
	c := newCluster(t, true)
	root := t.TempDir()
	openW := func(node string, i int, before bool) *fencedWriter {
		cfg := c.config("wait", node, i)
		cfg.CallBound, cfg.noQuiet, cfg.LeaseTTL = bound, before, time.Second
		dir := filepath.Join(root, node)
		r, err := Open(ctx, dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		db, err := engine.Open(dir, engineOptions(r))
		if err != nil {
			t.Fatal(err)
		}
		return &fencedWriter{r: r, db: db}
	}
	var refused atomic.Int64
	atom := func(run *engine.Run, act ledger.Action, exec ledger.Exec) error {
		a, err := run.Begin(ctx)
		if err != nil {
			return err
		}
		// A loaded machine can delay a renewal past the lease: the writer
		// then refuses calls until the next renewal proves it again.
		for range 50 {
			if _, err = a.Do(ctx, act, exec); !errors.Is(err, engine.ErrLeaseLost) || errors.Is(err, ledger.ErrInDoubt) {
				break
			}
			refused.Add(1)
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return err
		}
		return a.Commit(ctx, new(frame.Delta).Set(fmt.Sprintf("step-%d", a.Seq()), []byte("x")))
	}
	fast := func(context.Context, string) ([]byte, error) { return []byte("ok"), nil }
	// [variant][busy/idle]: kill to resumed, lease free to resumed.
	var kill, free [2][2][]time.Duration
	var added [2][]time.Duration // per failover: the busy run resumed after the idle one by
	var open [2][]time.Duration  // per failover: the new writer's Open (replicate and engine)
	w := openW("a", 0, false)
	for i := range 2 * *fencingMeasure {
		before := i%2 == 0
		busy, err := w.db.Run(ctx, fmt.Sprintf("busy-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		idle, _ := w.db.Run(ctx, fmt.Sprintf("idle-%d", i))
		if err := atom(idle, ledger.Action{Tool: "t", Args: []byte(`{}`)}, fast); err != nil {
			t.Fatal(err)
		}
		// A call in flight at the crash.
		inCall := make(chan struct{})
		go func() {
			a, err := busy.Begin(ctx)
			if err != nil {
				close(inCall)
				return
			}
			a.Do(ctx, ledger.Action{Tool: "slow", Args: []byte(`{}`), Idempotent: true}, func(ctx context.Context, _ string) ([]byte, error) {
				close(inCall)
				<-ctx.Done()
				return nil, ctx.Err()
			})
		}()
		<-inCall
		tKill := time.Now()
		w.r.Abandon()
		next := []string{"a", "b"}[(i+1)%2]
		t0 := time.Now()
		n := openW(next, (i+1)%3, before)
		open[b2i(!before)] = append(open[b2i(!before)], time.Since(t0))
		n.r.mu.Lock()
		expired := time.Unix(0, n.r.mu.lease.Quiet).Add(-bound) // the old lease's expiry
		n.r.mu.Unlock()
		var wg sync.WaitGroup
		var at [2]time.Time
		for j, run := range []string{busy.ID(), idle.ID()} {
			wg.Go(func() {
				r, err := n.db.Run(ctx, run)
				if err != nil {
					t.Error(err)
					return
				}
				// The busy run's in-doubt action, or a new one.
				if err := atom(r, ledger.Action{Tool: "slow", Args: []byte(`{}`), Idempotent: true}, fast); err != nil {
					t.Error(err)
					return
				}
				now := time.Now()
				at[j] = now
				kill[b2i(!before)][j] = append(kill[b2i(!before)][j], now.Sub(tKill))
				free[b2i(!before)][j] = append(free[b2i(!before)][j], now.Sub(expired))
			})
		}
		wg.Wait()
		added[b2i(!before)] = append(added[b2i(!before)], at[0].Sub(at[1]))
		w.db.Close()
		w = n
	}
	w.db.Close()
	w.r.Close()
	t.Logf("calls refused for a lease not proven in time (renewal late on a loaded machine), retried: %d", refused.Load())
	for v, variant := range []string{"before (no wait)", "after (wait)"} {
		slices.Sort(added[v])
		slices.Sort(open[v])
		t.Logf("%s: the run with a call in flight resumed after the other by p50 %v p99 %v; Open p50 %v p99 %v", variant,
			percentile(added[v], 0.5).Round(time.Millisecond), percentile(added[v], 0.99).Round(time.Millisecond),
			percentile(open[v], 0.5).Round(time.Millisecond), percentile(open[v], 0.99).Round(time.Millisecond))
		for j, run := range []string{"call in flight", "no call in flight"} {
			k, f := kill[v][j], free[v][j]
			slices.Sort(k)
			slices.Sort(f)
			t.Logf("%s, run with %s: kill to resumed p50 %v p99 %v; lease free to resumed p50 %v p99 %v (%d failovers)",
				variant, run, percentile(k, 0.5).Round(time.Millisecond), percentile(k, 0.99).Round(time.Millisecond),
				percentile(f, 0.5).Round(time.Millisecond), percentile(f, 0.99).Round(time.Millisecond), len(k))
		}
	}
}
