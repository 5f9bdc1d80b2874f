package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/downstream"
	"github.com/continuumdb/continuum/internal/workload"
)

// Kill plans: where in the child's life a cycle's SIGKILL lands.
const (
	planNone         = "none" // the workload is finished without kills
	planDelay        = "delay"
	planBeforeEffect = "before-effect"
	planAfterEffect  = "after-effect"
	planMidCommit    = "mid-commit"
	planMidSnapshot  = "mid-snapshot"
	planAfterAcks    = "after-acks"
)

var planKinds = []string{planDelay, planBeforeEffect, planAfterEffect, planMidCommit, planMidSnapshot, planAfterAcks}

type killPlan struct {
	kind  string
	k     int           // the k-th call, commit or ack of the incarnation
	delay time.Duration // delay: from the exec; mid-*: after the trigger
}

func (p killPlan) String() string {
	switch p.kind {
	case planNone:
		return planNone
	case planDelay:
		return fmt.Sprintf("%s %v", p.kind, p.delay)
	case planMidSnapshot:
		return fmt.Sprintf("%s +%v", p.kind, p.delay)
	case planMidCommit:
		return fmt.Sprintf("%s #%d +%v", p.kind, p.k, p.delay)
	}
	return fmt.Sprintf("%s #%d", p.kind, p.k)
}

func drawPlan(rng *rand.Rand) killPlan {
	weights := []int{20, 15, 20, 20, 10, 15} // in the order of planKinds
	n := rng.Intn(100)
	kind := planKinds[len(planKinds)-1]
	for i, w := range weights {
		if n < w {
			kind = planKinds[i]
			break
		}
		n -= w
	}
	p := killPlan{kind: kind, k: 1 + rng.Intn(4)}
	switch kind {
	case planDelay:
		p.delay = 5*time.Millisecond + time.Duration(rng.Int63n(int64(75*time.Millisecond)))
	case planMidCommit:
		p.delay = time.Duration(rng.Int63n(int64(300 * time.Microsecond)))
	case planMidSnapshot:
		p.delay = time.Duration(rng.Int63n(int64(3 * time.Millisecond)))
	case planAfterAcks:
		p.k = 1 + rng.Intn(6)
	}
	return p
}

// child is one incarnation of the child process.
type child struct {
	cmd    *exec.Cmd
	plan   killPlan
	start  time.Time
	killed atomic.Bool
	exited chan struct{} // closed once the process is reaped
	calls  atomic.Int64  // downstream calls received (BeforeEffect)
	effect atomic.Int64  // downstream calls that went through (AfterEffect)
	stderr bytes.Buffer
}

// kill sends SIGKILL once and waits until the process is gone, so that a
// hook that kills the child knows it will never see the reply.
func (ch *child) kill() {
	if ch.killed.CompareAndSwap(false, true) {
		ch.cmd.Process.Kill()
	}
	select {
	case <-ch.exited:
	case <-time.After(10 * time.Second):
	}
}

// tally is what the whole run found.
type tally struct {
	cycles      int
	byPlan      map[string]int
	workloads   int
	converged   int
	verified    int
	acks        int
	lost        int
	headChanged int
	dupKeys     map[string]int // key -> effects, for keys with more than one
	keys        int
	inDoubt     map[string]bool // workload/key of every in-doubt action found at a restart
	resolutions map[string]int
	openNs      []time.Duration // engine.Open, in restarts after a kill
	stateNs     []time.Duration // engine.Open and State of every run
	procNs      []time.Duration // exec to "ready", in the parent
	replayed    []int
	torn        int // restarts that trimmed a torn tail
	violations  []string
}

type harness struct {
	c    *config
	out  io.Writer
	rng  *rand.Rand
	exe  string
	base string
	t    tally
	w    int // the current workload

	cur atomic.Pointer[child] // the incarnation the downstream hooks act on
}

func runParent(c *config, out io.Writer) int {
	h := &harness{c: c, out: out, rng: rand.New(rand.NewSource(c.seed))}
	h.t.byPlan = map[string]int{}
	h.t.resolutions = map[string]int{}
	h.t.dupKeys = map[string]int{}
	h.t.inDoubt = map[string]bool{}
	var err error
	if h.exe, err = os.Executable(); err != nil {
		fmt.Fprintf(os.Stderr, "sigkill: %v\n", err)
		return 2
	}
	h.base = c.dir
	if h.base == "" {
		if h.base, err = os.MkdirTemp("", "continuum-sigkill-"); err != nil {
			fmt.Fprintf(os.Stderr, "sigkill: %v\n", err)
			return 2
		}
	} else if err := os.MkdirAll(h.base, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "sigkill: %v\n", err)
		return 2
	}
	mode := "strict"
	if c.mode == engine.Relaxed {
		mode = "relaxed"
	}
	fmt.Fprintf(out, "sigkill: seed %d, %s mode, %d kills, workloads of %d runs x %d atoms, stores under %s\n",
		c.seed, mode, c.cycles, c.runs, c.atoms, h.base)
	begin := time.Now()
	for w := 0; h.t.cycles < c.cycles || w == 0; w++ {
		if err := h.workload(w); err != nil {
			h.violation("workload %d: %v", w, err)
		}
		if len(h.t.violations) > 0 {
			break
		}
	}
	h.report(time.Since(begin))
	if len(h.t.violations) > 0 {
		return 1
	}
	if c.dir == "" && !c.keep {
		os.RemoveAll(h.base)
	}
	return 0
}

func (h *harness) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.t.violations = append(h.t.violations, msg)
	fmt.Fprintf(h.out, "VIOLATION: %s\n", msg)
}

// reference is the workload's outcome in process, without crashes.
type reference struct {
	heads  map[string][]string // run -> hex head at seq-1
	frames map[string][]byte   // run -> frame.AppendFrame of the final frame
}

func runReference(c *config, wseed int64) (*reference, error) {
	ctx := context.Background()
	db, err := engine.Open("ref", storeOptions(vfs.NewMem(), c.mode))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ref := &reference{heads: map[string][]string{}, frames: map[string][]byte{}}
	world := agent.NewWorld()
	for seq := 1; seq <= c.atoms; seq++ {
		for i := 0; i < c.runs; i++ {
			run, err := db.Run(ctx, workload.RunID(i))
			if err != nil {
				return nil, err
			}
			if _, err := agent.Step(ctx, run, wseed, world); err != nil {
				return nil, err
			}
			ref.heads[run.ID()] = append(ref.heads[run.ID()], hexHead(run.Head()))
		}
	}
	for i := 0; i < c.runs; i++ {
		run, err := db.Run(ctx, workload.RunID(i))
		if err != nil {
			return nil, err
		}
		f, err := run.StateE()
		if err != nil {
			return nil, err
		}
		ref.frames[run.ID()] = frame.AppendFrame(nil, f)
	}
	return ref, db.Close()
}

type ack struct {
	seq  uint64
	head string
}

// workload runs one workload to completion through as many kills as the
// remaining cycles allow, then checks convergence and verifies the store.
func (h *harness) workload(w int) error {
	c := h.c
	wseed := c.seed + int64(w)*7919
	dir := filepath.Join(h.base, fmt.Sprintf("w%05d", w))
	ref, err := runReference(c, wseed)
	if err != nil {
		return fmt.Errorf("reference run: %w", err)
	}
	srv, err := downstream.Start(&downstream.Options{
		BeforeEffect: func(downstream.Call) error {
			ch := h.cur.Load()
			if ch == nil {
				return nil
			}
			if n := ch.calls.Add(1); ch.plan.kind == planBeforeEffect && int(n) == ch.plan.k {
				ch.kill()
				return errors.New("the agent was killed before the effect")
			}
			return nil
		},
		AfterEffect: func(downstream.Call) {
			ch := h.cur.Load()
			if ch == nil {
				return
			}
			if n := ch.effect.Add(1); ch.plan.kind == planAfterEffect && int(n) == ch.plan.k {
				ch.kill()
			}
		},
	})
	if err != nil {
		return err
	}
	defer srv.Close()

	h.t.workloads++
	h.w = w
	acked := map[string]ack{}
	restart := false
	for inc := 0; ; inc++ {
		plan := killPlan{kind: planNone}
		if h.t.cycles < c.cycles {
			plan = drawPlan(h.rng)
		}
		done, killed, err := h.incarnation(dir, srv.URL(), wseed, plan, ref, acked, restart)
		if err != nil {
			return fmt.Errorf("incarnation %d (plan %v): %w (store kept in %s)", inc, plan, err, dir)
		}
		for _, e := range srv.Effects() {
			if e.Effects > 1 && h.t.dupKeys[e.Key] == 0 {
				h.t.dupKeys[e.Key] = e.Effects
				h.violation("workload %d: key %s took effect %d times (%d calls)", w, e.Key, e.Effects, e.Calls)
			}
		}
		if killed {
			h.t.cycles++
			h.t.byPlan[plan.kind]++
			restart = true
		}
		if done {
			break
		}
		if !killed {
			return fmt.Errorf("incarnation %d (plan %v) stopped without being killed or finishing (store kept in %s)", inc, plan, dir)
		}
		if inc > c.cycles+c.runs*c.atoms+10 {
			return fmt.Errorf("no progress after %d incarnations (store kept in %s)", inc, dir)
		}
	}
	effects := srv.Effects()
	h.t.keys += len(effects)
	if len(effects) != c.runs*c.atoms {
		h.violation("workload %d: %d keys took effect, want %d", w, len(effects), c.runs*c.atoms)
	}
	if err := h.converge(w, dir, ref); err != nil {
		h.violation("workload %d: %v (store kept in %s)", w, err, dir)
		return nil
	}
	if !h.c.keep {
		os.RemoveAll(dir)
	}
	return nil
}

// incarnation starts the child, applies the kill plan and checks every
// line the child prints. It reports whether the workload finished and
// whether the child was killed.
func (h *harness) incarnation(dir, url string, wseed int64, plan killPlan, ref *reference, acked map[string]ack, restart bool) (done, killed bool, err error) {
	c := h.c
	mode := "strict"
	if c.mode == engine.Relaxed {
		mode = "relaxed"
	}
	cmd := exec.Command(h.exe, "-child", "-dir", dir, "-downstream", url, "-wseed", strconv.FormatInt(wseed, 10),
		"-runs", strconv.Itoa(c.runs), "-atoms", strconv.Itoa(c.atoms), "-mode", mode)
	ch := &child{cmd: cmd, plan: plan, exited: make(chan struct{})}
	cmd.Stderr = &ch.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return false, false, err
	}
	ch.start = time.Now()
	if err := cmd.Start(); err != nil {
		return false, false, err
	}
	// Only a started child is current: a request the previous, killed
	// child sent just before it died can still reach the downstream, and
	// its hooks must not kill a process that does not exist yet.
	h.cur.Store(ch)
	defer h.cur.Store(nil)
	var timers []*time.Timer
	after := func(d time.Duration) { timers = append(timers, time.AfterFunc(d, ch.kill)) }
	if plan.kind == planDelay {
		after(plan.delay)
	}
	var waitErr error
	var once sync.Once
	reap := func() {
		once.Do(func() {
			waitErr = cmd.Wait()
			close(ch.exited)
		})
	}

	var sawDone bool
	commits, acks, snapshotArmed := 0, 0, false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "open":
			if len(f) != 5 {
				break
			}
			if restart {
				o, _ := strconv.ParseInt(f[1], 10, 64)
				s, _ := strconv.ParseInt(f[2], 10, 64)
				r, _ := strconv.Atoi(f[3])
				t, _ := strconv.ParseInt(f[4], 10, 64)
				h.t.openNs = append(h.t.openNs, time.Duration(o))
				h.t.stateNs = append(h.t.stateNs, time.Duration(s))
				h.t.replayed = append(h.t.replayed, r)
				if t > 0 {
					h.t.torn++
				}
			}
		case "head":
			if len(f) != 4 {
				break
			}
			run, head := f[1], f[3]
			seq, _ := strconv.ParseUint(f[2], 10, 64)
			a := acked[run]
			switch {
			case seq < a.seq:
				h.t.lost += int(a.seq - seq)
				h.violation("run %s: acknowledged seq %d lost after the kill (the store is at seq %d; plan %v)", run, a.seq, seq, plan)
			case seq == a.seq && a.seq > 0 && head != a.head:
				h.t.headChanged++
				h.violation("run %s: seq %d has head %s after the kill, acknowledged as %s", run, seq, head, a.head)
			case seq > 0 && (seq > uint64(len(ref.heads[run])) || ref.heads[run][seq-1] != head):
				h.violation("run %s: seq %d has head %s after the kill, unlike the reference", run, seq, head)
			}
		case "indoubt":
			if len(f) == 5 {
				h.t.inDoubt[fmt.Sprintf("%d/%s", h.w, f[3])] = true
			}
		case "ready":
			if restart {
				h.t.procNs = append(h.t.procNs, time.Since(ch.start))
			}
		case "commit":
			commits++
			if plan.kind == planMidCommit && commits == plan.k {
				after(plan.delay)
			}
		case "ack":
			if len(f) != 4 {
				break
			}
			run, head := f[1], f[3]
			seq, _ := strconv.ParseUint(f[2], 10, 64)
			// A gap is an atom that committed but whose ack line the kill
			// cut off; a seq acknowledged twice would be an atom redone.
			if prev := acked[run]; seq <= prev.seq {
				h.violation("run %s: seq %d acknowledged again (after seq %d)", run, seq, prev.seq)
			}
			if seq == 0 || seq > uint64(len(ref.heads[run])) || ref.heads[run][seq-1] != head {
				h.violation("run %s: seq %d acknowledged with head %s, unlike the reference", run, seq, head)
			}
			acked[run] = ack{seq: seq, head: head}
			h.t.acks++
			acks++
			if plan.kind == planAfterAcks && acks == plan.k {
				go ch.kill()
			}
			if plan.kind == planMidSnapshot && !snapshotArmed && seq%snapshotEvery == 0 {
				snapshotArmed = true
				after(plan.delay)
			}
		case "resolve":
			if len(f) == 5 {
				h.t.resolutions[f[4]]++
			}
		case "done":
			sawDone = true
		}
	}
	reap()
	for _, t := range timers {
		t.Stop()
	}
	killed = ch.killed.Load()
	if h.c.v {
		fmt.Fprintf(h.out, "cycle %d: plan %v: killed %v after %v, %d acks\n", h.t.cycles+1, plan, killed, time.Since(ch.start).Round(time.Microsecond), acks)
	}
	switch {
	case killed:
		return false, true, nil
	case waitErr != nil:
		return false, false, fmt.Errorf("child failed: %v: %s", waitErr, strings.TrimSpace(lastLines(ch.stderr.String(), 5)))
	case !sawDone:
		return false, false, errors.New("child exited without finishing")
	}
	return true, false, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// converge opens the finished store in process and compares it with the
// reference, then verifies it deeply.
func (h *harness) converge(w int, dir string, ref *reference) error {
	ctx := context.Background()
	db, err := engine.Open(dir, storeOptions(vfs.Default, h.c.mode))
	if err != nil {
		return fmt.Errorf("open for the final check: %w", err)
	}
	var errs []error
	for i := 0; i < h.c.runs; i++ {
		id := workload.RunID(i)
		run, err := db.Run(ctx, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		want := ref.heads[id][h.c.atoms-1]
		if got := hexHead(run.Head()); run.LastSeq() != uint64(h.c.atoms) || got != want {
			errs = append(errs, fmt.Errorf("run %s at seq %d head %s, the reference at %d %s", id, run.LastSeq(), got, h.c.atoms, want))
			continue
		}
		f, err := run.StateE()
		if err != nil {
			errs = append(errs, fmt.Errorf("run %s: state: %w", id, err))
		} else if !bytes.Equal(frame.AppendFrame(nil, f), ref.frames[id]) {
			errs = append(errs, fmt.Errorf("run %s: frame differs from the reference", id))
		}
	}
	if err := db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("no convergence: %w", err)
	}
	h.t.converged++
	rep, err := engine.Verify(ctx, dir, &engine.VerifyOptions{Deep: true})
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if !rep.OK {
		var msgs []string
		for _, f := range rep.Failures {
			msgs = append(msgs, f.String())
		}
		return fmt.Errorf("verify: %s", strings.Join(msgs, "; "))
	}
	h.t.verified++
	return nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func (h *harness) report(elapsed time.Duration) {
	t, out := &h.t, h.out
	var plans []string
	for _, k := range planKinds {
		plans = append(plans, fmt.Sprintf("%s %d", k, t.byPlan[k]))
	}
	var res []string
	for _, k := range []string{"lookup-found", "lookup-none", "reexec-same-key"} {
		res = append(res, fmt.Sprintf("%s %d", k, t.resolutions[k]))
	}
	maxReplayed := 0
	for _, r := range t.replayed {
		maxReplayed = max(maxReplayed, r)
	}
	dur := func(d []time.Duration) string {
		if len(d) == 0 {
			return "no restarts"
		}
		return fmt.Sprintf("p50 %v  p99 %v  max %v  (%d restarts)", percentile(d, 0.50).Round(time.Microsecond),
			percentile(d, 0.99).Round(time.Microsecond), percentile(d, 1).Round(time.Microsecond), len(d))
	}
	fmt.Fprintf(out, "\ncycles (SIGKILLs)            %d  (%s)\n", t.cycles, strings.Join(plans, ", "))
	fmt.Fprintf(out, "workloads                    %d run, %d converged to the no-crash reference, %d verified (deep)\n", t.workloads, t.converged, t.verified)
	fmt.Fprintf(out, "acknowledged atoms           %d acknowledged, %d lost, %d with a changed head\n", t.acks, t.lost, t.headChanged)
	fmt.Fprintf(out, "effects                      %d keys, %d with more than one effect\n", t.keys, len(t.dupKeys))
	fmt.Fprintf(out, "in-doubt actions at restart  %d; settled: %s\n", len(t.inDoubt), strings.Join(res, ", "))
	fmt.Fprintf(out, "restart: engine.Open         %s\n", dur(t.openNs))
	fmt.Fprintf(out, "restart: Open + State (all)  %s\n", dur(t.stateNs))
	fmt.Fprintf(out, "restart: exec to ready       %s\n", dur(t.procNs))
	fmt.Fprintf(out, "log replayed at restart      max %d records; %d restarts trimmed a torn tail\n", maxReplayed, t.torn)
	fmt.Fprintf(out, "elapsed                      %v\n", elapsed.Round(time.Millisecond))
	if len(t.violations) > 0 {
		fmt.Fprintf(out, "RESULT: FAIL, %d violations (seed %d)\n", len(t.violations), h.c.seed)
		return
	}
	fmt.Fprintf(out, "RESULT: PASS (seed %d)\n", h.c.seed)
}
