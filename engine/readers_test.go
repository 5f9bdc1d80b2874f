package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/google/go-cmp/cmp"
)

// Nothing that reads a run waits on the log's fsync: while a Commit (or
// Fail) of the run waits for its group commit, the readers return the last
// committed view, and the writers of the run wait for the outcome. These
// tests hold the commit inside its fdatasync (syncGate) and read meanwhile;
// a reader that waited for the fsync would never return while the test
// holds it, and fails the test at its deadline (a deadlock, not a timing
// threshold).

// syncGate is an errorfs injector that holds one fdatasync of a log
// segment: once armed, the next one closes held, waits for release and
// then fails with fail (nil: it goes on and syncs).
type syncGate struct {
	mu      sync.Mutex
	armed   bool
	held    chan struct{}
	release chan struct{}
	fail    error
}

func (g *syncGate) String() string { return "sync gate" }

func (g *syncGate) MaybeError(op errorfs.Op) error {
	// A segment's file handle keeps the name it was created under
	// (NNN.wal.tmp, renamed once its header is durable); the spare's is
	// next.spare, and synced with Sync.
	if op.Kind != errorfs.OpFileSyncData || !strings.Contains(op.Path, ".wal") {
		return nil
	}
	g.mu.Lock()
	if !g.armed {
		g.mu.Unlock()
		return nil
	}
	g.armed = false
	held, release, fail := g.held, g.release, g.fail
	g.mu.Unlock()
	close(held)
	<-release
	return fail
}

// arm holds the next fdatasync of a log segment: held is closed once it
// waits, and release lets it go (with fail, if not nil). The test's
// cleanup releases it too, before the store is closed.
func (g *syncGate) arm(t *testing.T, fail error) (held <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.fail = true, fail
	g.held, g.release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	rel := g.release
	release = func() { once.Do(func() { close(rel) }) }
	t.Cleanup(release)
	return g.held, release
}

// deadline returns a channel that fires a little before the test's
// deadline (never, without one), so that a test that would hang fails with
// a message instead.
func deadline(t *testing.T) <-chan time.Time {
	d, ok := t.Deadline()
	if !ok {
		return nil
	}
	return time.After(time.Until(d) * 9 / 10)
}

// await waits for ch, or fails the test at its deadline.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-deadline(t):
		t.Fatalf("still waiting for %s at the test's deadline", what)
		panic("unreachable")
	}
}

// waitingCtx is a context that reports when it is first waited on (Done
// called): the engine's writers select on Done only while they wait for a
// Commit or Fail in flight (Run.lockIdle).
type waitingCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func newWaitingCtx() *waitingCtx {
	return &waitingCtx{Context: context.Background(), waiting: make(chan struct{})}
}

func (c *waitingCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// runView is what the readers of a run return.
type runView struct {
	lastSeq uint64
	head    chain.Hash
	info    RunInfo
	state   *frame.Frame
	stateE  *frame.Frame
	stateAt *frame.Frame // StateAt(LastSeq)
	err     error
}

func readView(r *Run) runView {
	v := runView{lastSeq: r.LastSeq(), head: r.Head(), info: r.Info(), state: r.State()}
	if v.stateE, v.err = r.StateE(); v.err == nil {
		v.stateAt, v.err = r.StateAt(ctx, v.lastSeq)
	}
	return v
}

// check compares v with the view of a run at seq, head and frame f, with
// the atom at running (0: none) running.
func (v runView) check(t *testing.T, when string, seq uint64, head chain.Hash, f *frame.Frame, running uint64) {
	t.Helper()
	if v.err != nil {
		t.Fatalf("%s: %v", when, v.err)
	}
	if v.lastSeq != seq || v.head != head || v.info.LastSeq != seq || v.info.Head != head || v.info.Running != running {
		t.Errorf("%s: LastSeq %d Head %x Info{LastSeq %d Head %x Running %d}, want seq %d head %x running %d",
			when, v.lastSeq, v.head[:4], v.info.LastSeq, v.info.Head[:4], v.info.Running, seq, head[:4], running)
	}
	for name, got := range map[string]*frame.Frame{"State": v.state, "StateE": v.stateE, "StateAt(LastSeq)": v.stateAt} {
		if diff := cmp.Diff(f, got); diff != "" {
			t.Errorf("%s: %s (-want +got):\n%s", when, name, diff)
		}
	}
}

// holdCommit begins the next atom of run, performs one action, and starts
// its Commit with a delta that sets "k": it returns once the commit's
// record waits in the held fdatasync, with the Commit's outcome to come on
// committed.
func holdCommit(t *testing.T, db *DB, run *Run, gate *syncGate, fail error) (a *Atom, committed <-chan error, release func()) {
	t.Helper()
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	act := ledger.Action{Tool: "t", Args: []byte(fmt.Sprintf(`{"seq":%d}`, a.Seq()))}
	if _, err := a.Do(ctx, act, (&counter{}).exec("ok")); err != nil {
		t.Fatal(err)
	}
	held, release := gate.arm(t, fail)
	done := make(chan error, 1)
	go func() { done <- a.Commit(ctx, msg(fmt.Sprint("atom ", a.Seq())).Set("k", []byte(fmt.Sprint(a.Seq())))) }()
	await(t, held, "the commit's fdatasync")
	// Only this Commit writes now: its write is the one registered with
	// the checkpoint's replay floor, so it is past its checks and waits.
	db.active.Lock()
	n := len(db.active.pos)
	db.active.Unlock()
	if n != 1 {
		t.Fatalf("%d log writes in flight while the commit's fdatasync is held, want 1 (the commit)", n)
	}
	return a, done, release
}

// TestReadersDoNotWaitForCommitFsync: while a Commit waits for its fsync,
// LastSeq, Head, Info, State, StateE and StateAt of its run return the
// view before the atom; once the Commit returns, all of them show it.
func TestReadersDoNotWaitForCommitFsync(t *testing.T) {
	var gate syncGate
	fs := errorfs.Wrap(vfs.NewMem(), &gate)
	db := openTest(t, fs, testOptions(fs))
	run := commitN(t, db, "r", 1)
	head1, state1 := run.Head(), run.State()

	a, committed, release := holdCommit(t, db, run, &gate, nil)
	read := make(chan runView, 1)
	go func() { read <- readView(run) }()
	select {
	case v := <-read:
		v.check(t, "during the commit's fsync", 1, head1, state1, a.Seq())
	case err := <-committed:
		t.Fatalf("Commit returned (%v) while its fdatasync was held", err)
	case <-deadline(t):
		t.Fatal("the readers of the run waited for the commit's fsync")
	}

	release()
	if err := await(t, committed, "the commit"); err != nil {
		t.Fatal(err)
	}
	want := state1.Clone()
	if err := want.Apply(msg("atom 2").Set("k", []byte("2"))); err != nil {
		t.Fatal(err)
	}
	v := readView(run)
	if v.head == head1 {
		t.Fatalf("Head unchanged after the commit returned")
	}
	v.check(t, "after the commit", 2, v.head, want, 0)
	if f, err := run.StateAt(ctx, 1); err != nil || !cmp.Equal(f, state1) {
		t.Errorf("StateAt(1) after the commit: %v, want the state before it (-want +got):\n%s", err, cmp.Diff(state1, f))
	}
}

// TestWritersWaitForCommitInFlight: Begin, Do, Fail and a second Commit
// that come while a Commit waits for its fsync wait for its outcome, as
// they waited for the run's lock before: after a commit that succeeded,
// Begin gets the next seq and the atom's own calls find it done.
func TestWritersWaitForCommitInFlight(t *testing.T) {
	var gate syncGate
	fs := errorfs.Wrap(vfs.NewMem(), &gate)
	db := openTest(t, fs, testOptions(fs))
	run := commitN(t, db, "r", 1)
	a, committed, release := holdCommit(t, db, run, &gate, nil)

	type result struct {
		seq uint64
		err error
	}
	calls := map[string]func(context.Context) result{
		"Begin": func(c context.Context) result {
			b, err := run.Begin(c)
			if err != nil {
				return result{err: err}
			}
			return result{seq: b.Seq()}
		},
		"Do": func(c context.Context) result {
			_, err := a.Do(c, ledger.Action{Tool: "late", Args: []byte(`{}`)}, (&counter{}).exec("x"))
			return result{err: err}
		},
		"Fail":   func(c context.Context) result { return result{err: a.Fail(c, "late")} },
		"Commit": func(c context.Context) result { return result{err: a.Commit(c, msg("again"))} },
	}
	out := map[string]chan result{}
	for name, call := range calls {
		c := newWaitingCtx()
		ch := make(chan result, 1)
		out[name] = ch
		go func() { ch <- call(c) }()
		await(t, c.waiting, name+" waiting for the commit in flight")
	}
	release()
	if err := await(t, committed, "the commit"); err != nil {
		t.Fatal(err)
	}
	if r := await(t, out["Begin"], "Begin"); r.err != nil || r.seq != 3 {
		t.Errorf("Begin during the commit of seq 2: seq %d, %v; want seq 3", r.seq, r.err)
	}
	for _, name := range []string{"Do", "Fail", "Commit"} {
		if r := await(t, out[name], name); !errors.Is(r.err, ErrAtomDone) {
			t.Errorf("%s of the atom during its commit: %v, want ErrAtomDone", name, r.err)
		}
	}
	if n := db.Stats().Atoms; n != 2 {
		t.Errorf("Stats().Atoms = %d, want 2", n)
	}
}

// TestCommitFsyncFailureLeavesAtomRunning: a Commit whose fsync fails
// returns the error and leaves everything as it was before it (the atom
// running, the run at its previous seq, head and frame), readers seeing
// that view throughout; a Begin that waited for it finds the atom still
// running, and the log refuses writes from then on (I8).
func TestCommitFsyncFailureLeavesAtomRunning(t *testing.T) {
	var gate syncGate
	fs := errorfs.Wrap(vfs.NewMem(), &gate)
	db := openTest(t, fs, testOptions(fs))
	run := commitN(t, db, "r", 1)
	head1, state1 := run.Head(), run.State()
	injected := errors.New("injected EIO")

	a, committed, release := holdCommit(t, db, run, &gate, injected)
	readView(run).check(t, "during the failing fsync", 1, head1, state1, a.Seq())
	c := newWaitingCtx()
	begun := make(chan error, 1)
	go func() {
		_, err := run.Begin(c)
		begun <- err
	}()
	await(t, c.waiting, "Begin waiting for the commit in flight")
	release()
	if err := await(t, committed, "the commit"); !errors.Is(err, injected) {
		t.Fatalf("Commit with a failed fsync: %v, want the injected error", err)
	}
	if err := await(t, begun, "Begin"); !errors.Is(err, ErrAtomInProgress) {
		t.Errorf("Begin that waited for the failed commit: %v, want ErrAtomInProgress (the atom still runs)", err)
	}
	readView(run).check(t, "after the failed commit", 1, head1, state1, a.Seq())
	if err := a.Commit(ctx, msg("retry")); err == nil || errors.Is(err, ErrAtomDone) {
		t.Errorf("second Commit after the log failed: %v, want the log's failure", err)
	}
	if err := a.Fail(ctx, "give up"); err == nil || errors.Is(err, ErrAtomDone) {
		t.Errorf("Fail after the log failed: %v, want the log's failure", err)
	}
	if n := db.Stats().Atoms; n != 1 {
		t.Errorf("Stats().Atoms = %d, want 1", n)
	}
}

// TestStateNeverEmptyOnFailure: a run whose frame cannot be had returns
// nil from State (never an empty frame, for a run with atoms or without),
// and the error from StateE; State logs nothing.
func TestStateNeverEmptyOnFailure(t *testing.T) {
	fs := vfs.NewMem()
	logged := &runLogs{}
	opts := testOptions(fs)
	opts.Logger = slog.New(logged)
	db := openTest(t, fs, opts)
	for _, atoms := range []int{0, 2} {
		run := commitN(t, db, fmt.Sprint("r", atoms), atoms)
		broken := fmt.Errorf("engine: run %q: test damage", run.id)
		run.mu.Lock()
		run.mu.broken = broken
		run.mu.Unlock()
		if f := run.State(); f != nil {
			t.Errorf("run with %d atoms: State of a broken run = %+v, want nil", atoms, f)
		}
		if f, err := run.StateE(); f != nil || !errors.Is(err, broken) {
			t.Errorf("run with %d atoms: StateE = %+v, %v; want nil and the run's error", atoms, f, err)
		}
		run.mu.Lock()
		run.mu.broken = nil // so that the store closes and verifies
		run.mu.Unlock()
	}
	for _, id := range []string{"r0", "r2"} {
		if msgs := logged.of(id); len(msgs) > 0 {
			t.Errorf("logged about run %q: %q", id, msgs)
		}
	}
}

// runLogs is a slog.Handler that keeps the messages of the records that
// name a run (attribute "run").
type runLogs struct {
	mu    sync.Mutex
	byRun map[string][]string
}

func (h *runLogs) Enabled(context.Context, slog.Level) bool { return true }
func (h *runLogs) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *runLogs) WithGroup(string) slog.Handler            { return h }

func (h *runLogs) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "run" {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.byRun == nil {
				h.byRun = map[string][]string{}
			}
			h.byRun[a.Value.String()] = append(h.byRun[a.Value.String()], r.Message)
		}
		return true
	})
	return nil
}

func (h *runLogs) of(run string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byRun[run]
}

// TestCheckpointDuringCommitInFlight: an engine checkpoint taken while a
// Commit waits for its fsync records the run as it was before the atom (a
// power loss then keeps neither the atom nor a CHECKPOINT that names it),
// and replays from below the atom's record (a power loss after the Commit
// returned keeps the atom).
func TestCheckpointDuringCommitInFlight(t *testing.T) {
	var gate syncGate
	mem := vfs.NewCrashableMem()
	fs := errorfs.Wrap(mem, &gate)
	opts := testOptions(fs)
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Pebble open before any crash clone (MemFS.Lock and CrashClone
	// deadlock when they meet: see faultLockFS).
	if err := db.waitLedger(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.snapshots(ctx); err != nil {
		t.Fatal(err)
	}
	run := commitN(t, db, "r", 2)
	head2, state2 := run.Head(), run.State()

	_, committed, release := holdCommit(t, db, run, &gate, nil)
	before := db.counters.checkpoints.Load()
	db.bg.ckptReq <- struct{}{}
	for db.counters.checkpoints.Load() == before {
		select {
		case err := <-committed:
			t.Fatalf("Commit returned (%v) while its fdatasync was held", err)
		case <-deadline(t):
			t.Fatal("the engine checkpoint waited for the commit's fsync")
		case <-time.After(time.Millisecond): // poll the counter
		}
		if err := db.backgroundErr(); err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
	}
	lost := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	release()
	if err := await(t, committed, "the commit"); err != nil {
		t.Fatal(err)
	}
	head3, state3 := run.Head(), run.State()
	kept := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})

	for _, c := range []struct {
		name string
		fs   *vfs.MemFS
		seq  uint64
		head chain.Hash
		f    *frame.Frame
	}{
		{"power loss during the fsync", lost, 2, head2, state2},
		{"power loss after the commit returned", kept, 3, head3, state3},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := openTest(t, c.fs, testOptions(c.fs))
			if db.openGen == 0 {
				t.Fatal("reopened without the checkpoint taken during the commit")
			}
			r, err := db.Run(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			f, err := r.StateE()
			if err != nil {
				t.Fatal(err)
			}
			if r.LastSeq() != c.seq || r.Head() != c.head {
				t.Errorf("seq %d head %x, want %d %x", r.LastSeq(), r.Head().String()[:8], c.seq, c.head.String()[:8])
			}
			if diff := cmp.Diff(c.f, f); diff != "" {
				t.Errorf("frame (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCloseDuringCommitInFlight: Close while a Commit waits for its fsync
// lets the commit finish, anchors and captures its atom: the store reopens
// at the atom with nothing to replay.
func TestCloseDuringCommitInFlight(t *testing.T) {
	var gate syncGate
	mem := vfs.NewMem()
	fs := errorfs.Wrap(mem, &gate)
	opts := testOptions(fs)
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	run := commitN(t, db, "r", 1)
	_, committed, release := holdCommit(t, db, run, &gate, nil)
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	release()
	if err := await(t, committed, "the commit"); err != nil {
		t.Fatal(err)
	}
	head := run.Head()
	if err := await(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
	db2 := openTest(t, fs, testOptions(fs))
	if n := db2.Stats().Open.Replayed; n != 0 {
		t.Errorf("reopen after a Close that raced a commit replayed %d records, want 0", n)
	}
	r, err := db2.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if r.LastSeq() != 2 || r.Head() != head {
		t.Errorf("after Close: seq %d head %x, want 2 %x", r.LastSeq(), r.Head().String()[:8], head.String()[:8])
	}
}

// TestReadersDuringCommits runs two agents and readers of their runs at
// once, with snapshots and engine checkpoints in the background (for the
// race detector): every view a reader gets is one committed atom's,
// whole (the frame, its seq and its head together), and never goes back.
func TestReadersDuringCommits(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	opts.RestartTail = 8 << 10 // and more engine checkpoints on their own
	db := openTest(t, fs, opts)
	atoms := 40
	if testing.Short() {
		atoms = 20
	}
	ids := []string{"a", "b"}
	runs := make([]*Run, len(ids))
	heads := make([][]chain.Hash, len(ids)) // heads[run][seq], each written by its agent alone
	for i, id := range ids {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		runs[i], heads[i] = r, []chain.Hash{r.Head()}
	}
	var agents, readers sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 16)
	for k, r := range runs {
		agents.Add(1)
		go func() {
			defer agents.Done()
			for i := 1; i <= atoms; i++ {
				a, err := r.Begin(ctx)
				if err != nil {
					errs <- err
					return
				}
				act := ledger.Action{Tool: "t", Args: []byte(fmt.Sprintf(`{"run":%q,"i":%d}`, r.id, i))}
				if _, err := a.Do(ctx, act, (&counter{}).exec("ok")); err != nil {
					errs <- err
					return
				}
				if err := a.Commit(ctx, msg(fmt.Sprint(i)).Set("n", []byte(fmt.Sprint(i)))); err != nil {
					errs <- err
					return
				}
				heads[k] = append(heads[k], r.Head())
				if k == 0 && i == atoms/2 {
					// An engine checkpoint while the other agent commits.
					before := db.counters.checkpoints.Load()
					db.bg.ckptReq <- struct{}{}
					for db.counters.checkpoints.Load() == before {
						if err := db.backgroundErr(); err != nil {
							errs <- err
							return
						}
						time.Sleep(time.Millisecond)
					}
				}
			}
		}()
	}
	type seen struct {
		seq  uint64
		head chain.Hash
	}
	views := make([][]seen, 4)
	for i := range views {
		r := runs[i%len(runs)]
		readers.Add(1)
		go func() {
			defer readers.Done()
			var last uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				info := r.Info()
				f, err := r.StateE()
				if err != nil {
					errs <- err
					return
				}
				if info.LastSeq < last {
					errs <- fmt.Errorf("run %q: Info went back from seq %d to %d", r.id, last, info.LastSeq)
					return
				}
				last = info.LastSeq
				views[i] = append(views[i], seen{info.LastSeq, info.Head})
				// The frame is one atom's: its messages and its "n" agree,
				// and it is at or past the Info read before it.
				n := uint64(len(f.Messages))
				if got := string(f.Memory["n"]); n > 0 && got != fmt.Sprint(n) || n < info.LastSeq {
					errs <- fmt.Errorf("run %q: State has %d messages and n=%q, Info said seq %d", r.id, n, got, info.LastSeq)
					return
				}
				if info.LastSeq > 0 {
					at, err := r.StateAt(ctx, info.LastSeq)
					if err != nil {
						errs <- err
						return
					}
					if uint64(len(at.Messages)) != info.LastSeq {
						errs <- fmt.Errorf("run %q: StateAt(%d) has %d messages", r.id, info.LastSeq, len(at.Messages))
						return
					}
				}
			}
		}()
	}
	agents.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, vs := range views {
		k := i % len(runs)
		for _, v := range vs {
			if v.seq >= uint64(len(heads[k])) || heads[k][v.seq] != v.head {
				t.Fatalf("run %q: a reader saw seq %d with head %x, not the head the agent got at that seq", ids[k], v.seq, v.head[:4])
			}
		}
	}
}
