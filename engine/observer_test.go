package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
	"github.com/google/go-cmp/cmp"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu        sync.Mutex
	opens     []OpenInfo
	atoms     []*atomRecord
	groups    wal.GroupCommit // summed
	nGroups   int
	snapshots []SnapshotEvent
}

type atomRecord struct {
	rec     *recorder
	ctx     context.Context
	ev      AtomEvent
	actions []*actionRecord
	commit  *CommitEvent
	fail    string
}

type actionRecord struct {
	ev      ActionEvent
	ctx     context.Context // the call's context, as ActionStarted got it
	outcome ActionOutcome
	err     error
	ends    int
}

type ctxKey struct{}

func (r *recorder) Opened(info OpenInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opens = append(r.opens, info)
}

func (r *recorder) AtomBegun(ctx context.Context, ev AtomEvent) AtomObserver {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := &atomRecord{rec: r, ctx: ctx, ev: ev}
	r.atoms = append(r.atoms, a)
	return a
}

func (r *recorder) GroupCommitted(g wal.GroupCommit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nGroups++
	r.groups.Appends += g.Appends
	r.groups.Records += g.Records
	r.groups.Bytes += g.Bytes
	r.groups.Syncs += g.Syncs
	r.groups.SyncDuration += g.SyncDuration
}

func (r *recorder) SnapshotWritten(ev SnapshotEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snapshots = append(r.snapshots, ev)
}

func (a *atomRecord) ActionStarted(ctx context.Context, ev ActionEvent) (context.Context, ActionObserver) {
	a.rec.mu.Lock()
	defer a.rec.mu.Unlock()
	x := &actionRecord{ev: ev, ctx: ctx}
	a.actions = append(a.actions, x)
	return context.WithValue(ctx, ctxKey{}, x), x
}

func (a *atomRecord) Committed(ev CommitEvent) {
	a.rec.mu.Lock()
	defer a.rec.mu.Unlock()
	a.commit = &ev
}

func (a *atomRecord) Failed(reason string) {
	a.rec.mu.Lock()
	defer a.rec.mu.Unlock()
	a.fail = reason
}

func (x *actionRecord) ActionEnded(o ActionOutcome, err error) {
	x.outcome, x.err = o, err
	x.ends++
}

// summary is what a recorder saw, in order: one line per atom with its
// actions' tools and outcomes and how it ended.
func (r *recorder) summary() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, a := range r.atoms {
		s := fmt.Sprintf("%s/%d", a.ev.Run, a.ev.Seq)
		if a.ev.Interrupted {
			s += " interrupted"
		}
		for _, x := range a.actions {
			verb := "do"
			if x.ev.Resolve {
				verb = "resolve"
			}
			s += fmt.Sprintf(" %s(%s)=%s", verb, x.ev.Tool, x.outcome)
			if x.ends != 1 {
				s += fmt.Sprintf("[ended %d times]", x.ends)
			}
		}
		switch {
		case a.commit != nil:
			s += fmt.Sprintf(" committed(%d actions)", a.commit.Actions)
		case a.fail != "":
			s += " failed(" + a.fail + ")"
		}
		out = append(out, s)
	}
	return out
}

func observed(fs vfs.FS, obs Observer) *Options {
	o := testOptions(fs)
	o.Observer = obs
	return o
}

// TestObserver runs a scripted workload across a crash and checks that the
// Observer hears every atom, action, commit, failure, group commit, Open
// and snapshot, with the figures the engine's Stats and the log hold.
func TestObserver(t *testing.T) {
	tool := func(name string) ledger.Action {
		return ledger.Action{Tool: name, Args: []byte(`{"n":1}`)}
	}
	result := func(s string) ledger.Exec {
		return func(context.Context, string) ([]byte, error) { return []byte(s), nil }
	}
	type spanKey struct{}
	parent := context.WithValue(ctx, spanKey{}, "agent")

	// First process: two atoms commit, one fails and is retried, and the
	// process dies while the last atom's second action runs.
	mem := vfs.NewCrashableMem()
	rec1 := &recorder{}
	db, err := Open("store", observed(mem, rec1))
	if err != nil {
		t.Fatal(err)
	}
	run, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	deltas := map[uint64]*frame.Delta{}
	a, _ := run.Begin(parent)
	var execCtx context.Context
	if _, err := a.Do(ctx, tool("a"), func(ctx context.Context, _ string) ([]byte, error) {
		execCtx = ctx
		return []byte("a"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Do(ctx, tool("b"), result("b")); err != nil {
		t.Fatal(err)
	}
	deltas[1] = msg("one")
	if err := a.Commit(ctx, deltas[1]); err != nil {
		t.Fatal(err)
	}
	a, _ = run.Begin(ctx)
	if _, err := a.Do(ctx, tool("c"), result("c")); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(ctx, "model refused"); err != nil {
		t.Fatal(err)
	}
	a, _ = run.Begin(ctx)
	if _, err := a.Do(ctx, tool("c"), result("other")); err != nil { // certified by the failed attempt
		t.Fatal(err)
	}
	deltas[2] = msg("two")
	if err := a.Commit(ctx, deltas[2]); err != nil {
		t.Fatal(err)
	}
	a, _ = run.Begin(ctx)
	if _, err := a.Do(ctx, tool("e"), result("e")); err != nil {
		t.Fatal(err)
	}
	var crashed *vfs.MemFS
	if _, err := a.Do(ctx, tool("d"), func(context.Context, string) ([]byte, error) {
		crashed = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		return []byte("d"), nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st1 := db.Stats()

	want1 := []string{
		"r/1 do(a)=executed do(b)=executed committed(2 actions)",
		"r/2 do(c)=executed failed(model refused)",
		"r/2 do(c)=cached committed(1 actions)",
		"r/3 do(e)=executed do(d)=executed",
	}
	if diff := cmp.Diff(want1, rec1.summary()); diff != "" {
		t.Errorf("first process (-want +got):\n%s", diff)
	}
	if got := rec1.atoms[0].ctx.Value(spanKey{}); got != "agent" {
		t.Errorf("AtomBegun's context carries %v, want Begin's", got)
	}
	if x, _ := execCtx.Value(ctxKey{}).(*actionRecord); x == nil || x.ev.Tool != "a" {
		t.Errorf("exec ran with a context that is not the one ActionStarted returned")
	}
	if len(rec1.opens) != 1 || !rec1.opens[0].Created || rec1.opens[0] != st1.Open {
		t.Errorf("Opened %+v, want once, with Stats().Open %+v", rec1.opens, st1.Open)
	}
	checkCounts(t, rec1, st1)

	// Second process, after the crash: the interrupted atom finds e cached
	// and d in doubt, resolves d, and commits; more atoms make a snapshot.
	rec2 := &recorder{}
	db2 := openTest(t, crashed, observed(crashed, rec2))
	run2, _ := db2.Run(ctx, "r")
	a, _ = run2.Begin(ctx)
	if _, err := a.Do(ctx, tool("e"), result("not again")); err != nil {
		t.Fatal(err)
	}
	_, err = a.Do(ctx, tool("d"), result("not again"))
	var doubt *ledger.InDoubtError
	if !errors.As(err, &doubt) {
		t.Fatalf("Do of d after the crash: %v, want in doubt", err)
	}
	if err := a.ResolveInDoubt(ctx, doubt, []byte("d")); err != nil {
		t.Fatal(err)
	}
	// Settled: a Do of it (by its key) returns the resolved result.
	settled := tool("d")
	settled.Key = doubt.Key
	if out, err := a.Do(ctx, settled, result("not again")); err != nil || string(out) != "d" {
		t.Fatalf("Do of d once resolved: %q %v", out, err)
	}
	deltas[3] = msg("three")
	if err := a.Commit(ctx, deltas[3]); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(4); seq <= 8; seq++ {
		a, _ := run2.Begin(ctx)
		deltas[seq] = msg(fmt.Sprintf("atom %d", seq))
		if err := a.Commit(ctx, deltas[seq]); err != nil {
			t.Fatal(err)
		}
	}
	// SnapshotEvery is 5: the snapshot store, which opens in the
	// background, takes one of seq 5 or later.
	for deadline := time.Now().Add(30 * time.Second); db2.Stats().Snapshots == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no background snapshot was written")
		}
	}
	db2.Close()
	st2 := db2.Stats()

	want2 := []string{
		"r/3 interrupted do(e)=cached do(d)=in_doubt resolve(d)=resolved do(d)=cached committed(2 actions)",
		"r/4 committed(0 actions)", "r/5 committed(0 actions)", "r/6 committed(0 actions)",
		"r/7 committed(0 actions)", "r/8 committed(0 actions)",
	}
	if diff := cmp.Diff(want2, rec2.summary()); diff != "" {
		t.Errorf("second process (-want +got):\n%s", diff)
	}
	if x := rec2.atoms[0].actions[1]; !errors.Is(x.err, ledger.ErrInDoubt) {
		t.Errorf("in-doubt Do ended with %v, want its ErrInDoubt", x.err)
	}
	if len(rec2.opens) != 1 || rec2.opens[0].Created || rec2.opens[0].Replayed == 0 || rec2.opens[0] != st2.Open {
		t.Errorf("Opened %+v, want once, a restart that replayed records, with Stats().Open %+v", rec2.opens, st2.Open)
	}
	if len(rec2.snapshots) != int(st2.Snapshots) {
		t.Errorf("%d snapshots reported, Stats says %d", len(rec2.snapshots), st2.Snapshots)
	}
	if s := rec2.snapshots[0]; s.Run != "r" || s.Seq < 5 || s.Seq > s.Head || s.Head > 8 || s.Previous != 0 {
		t.Errorf("first snapshot %+v, want one of run r at a seq in 5..8, at or below its head, after none", s)
	}
	checkCounts(t, rec2, st2)

	// Each committed atom's Bytes is its record's size in the log, and
	// DeltaBytes its delta's encoding.
	size := map[uint64]int{}
	if err := Scan(ctx, "store", crashed, func(r *LogRecord) error {
		if r.Kind == "atom" {
			size[r.Seq] = r.Size
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, a := range append(rec1.atoms, rec2.atoms...) {
		if c := a.commit; c != nil {
			if c.Bytes != size[a.ev.Seq] || c.DeltaBytes != len(frame.AppendDelta(nil, deltas[a.ev.Seq])) {
				t.Errorf("atom %d: Bytes %d DeltaBytes %d, the log holds %d bytes for a delta of %d",
					a.ev.Seq, c.Bytes, c.DeltaBytes, size[a.ev.Seq], len(frame.AppendDelta(nil, deltas[a.ev.Seq])))
			}
		}
	}
}

// checkCounts compares what rec heard with the Stats of its DB, read
// after Close: every append of the log went through a reported group.
func checkCounts(t *testing.T, rec *recorder, st Stats) {
	t.Helper()
	var commits, fails, dos, cached int64
	for _, a := range rec.atoms {
		if a.commit != nil {
			commits++
		}
		if a.fail != "" {
			fails++
		}
		for _, x := range a.actions {
			if !x.ev.Resolve {
				dos++
			}
			if x.outcome == ActionCached {
				cached++
			}
		}
	}
	if commits != st.Atoms || fails != st.Fails || dos != st.Actions || cached != st.Deduped {
		t.Errorf("heard %d commits, %d fails, %d Do calls (%d cached); Stats: %d, %d, %d (%d)",
			commits, fails, dos, cached, st.Atoms, st.Fails, st.Actions, st.Deduped)
	}
	g, l := rec.groups, st.Log
	if int64(g.Appends) != l.Appends || int64(g.Records) != l.Records || g.Bytes != l.Bytes ||
		int64(g.Syncs) != l.Syncs-l.Rotations || int64(g.SyncDuration) > l.SyncNanos || rec.nGroups > int(l.Writes) {
		t.Errorf("groups add up to %+v in %d groups; the log's stats: %+v", g, rec.nGroups, l)
	}
}

// TestObserverNil: without an Observer, nothing is reported and atoms
// carry none.
func TestObserverNil(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, nil)
	if db.groupCommitHook() != nil {
		t.Error("a log hook without an Observer")
	}
	run, _ := db.Run(ctx, "r")
	a, _ := run.Begin(ctx)
	if a.obs != nil {
		t.Error("an atom observer without an Observer")
	}
	if !a.commitStart().IsZero() {
		t.Error("a Commit without an Observer reads the clock")
	}
	if err := a.Commit(ctx, msg("x")); err != nil {
		t.Fatal(err)
	}
}

// TestObserverResolveFailed: an in-doubt action closed as not done is
// reported as such, and the Do that runs it again as executed.
func TestObserverResolveFailed(t *testing.T) {
	act := ledger.Action{Tool: "sms.send", Args: []byte(`{"to":"+100"}`)}
	crashed, key := crashInFlight(t, act)
	rec := &recorder{}
	db := openTest(t, crashed, observed(crashed, rec))
	run, _ := db.Run(ctx, "r")
	a, _ := run.Begin(ctx)
	if _, err := a.Do(ctx, act, func(context.Context, string) ([]byte, error) { return nil, nil }); !errors.Is(err, ledger.ErrInDoubt) {
		t.Fatalf("Do: %v, want ErrInDoubt", err)
	}
	if err := a.ResolveFailed(ctx, act, "no trace downstream"); err != nil {
		t.Fatal(err)
	}
	if err := a.ResolveFailed(ctx, act, "again"); !errors.Is(err, ErrNotInDoubt) {
		t.Fatalf("a second ResolveFailed: %v, want ErrNotInDoubt", err) // refused before the ledger: not reported
	}
	again := act
	again.Key = key
	if _, err := a.Do(ctx, again, func(context.Context, string) ([]byte, error) { return []byte("sent"), nil }); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, msg("sent once")); err != nil {
		t.Fatal(err)
	}
	want := []string{"r/1 interrupted do(sms.send)=in_doubt resolve(sms.send)=resolved_failed do(sms.send)=executed committed(1 actions)"}
	if diff := cmp.Diff(want, rec.summary()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if x := rec.atoms[0].actions[1]; x.ev.Key != key || !x.ev.Resolve {
		t.Errorf("the resolve was reported as %+v, want key %q", x.ev, key)
	}
}
