package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
)

func mustBranch(t *testing.T, r *Run, name string, reads ...StateKey) *Atom {
	t.Helper()
	a, err := r.Branch(ctx, name, reads...)
	if err != nil {
		t.Fatalf("Branch %q: %v", name, err)
	}
	return a
}

// TestBranchesCommitInCommitOrder: branches begun at the same base that
// write different keys all commit; each takes the next seq when it
// commits, in commit order; the frame holds every delta; each atom
// records its base, which the chain covers and verify checks (openTest's
// cleanup).
func TestBranchesCommitInCommitOrder(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, nil)
	run := mustRun(db, "r")
	fillRun(t, db, "r", 2)
	a, b, c := mustBranch(t, run, "a"), mustBranch(t, run, "b"), mustBranch(t, run, "c")
	for _, x := range []*Atom{a, b, c} {
		if x.Base() != 2 || x.Seq() != 0 {
			t.Fatalf("branch %s: base %d seq %d, want 2 and 0", x.Branch(), x.Base(), x.Seq())
		}
	}
	if info := run.Info(); info.Branches != 3 || info.Running != 0 {
		t.Fatalf("Info with 3 branches: %+v", info)
	}
	for i, x := range []*Atom{c, a, b} {
		if err := x.Commit(ctx, new(frame.Delta).Set("out-"+x.Branch(), []byte(x.Branch()))); err != nil {
			t.Fatalf("commit %s: %v", x.Branch(), err)
		}
		if want := uint64(3 + i); x.Seq() != want || run.LastSeq() != want {
			t.Fatalf("branch %s committed at seq %d (last %d), want %d", x.Branch(), x.Seq(), run.LastSeq(), want)
		}
	}
	st := run.State()
	for _, n := range []string{"a", "b", "c"} {
		if string(st.Memory["out-"+n]) != n {
			t.Fatalf("memory out-%s = %q", n, st.Memory["out-"+n])
		}
	}
	if info := run.Info(); info.Branches != 0 {
		t.Fatalf("Info after the commits: %+v", info)
	}
	// The atom records its base: read it back from the log.
	info, err := run.Atom(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if info.Branch != "b" || info.Base != 2 {
		t.Fatalf("atom 5: branch %q base %d, want b and 2", info.Branch, info.Base)
	}
	// Begin works again once no branch is in flight, with base seq-1.
	at, err := run.Begin(ctx)
	if err != nil || at.Base() != 5 || at.Branch() != "" {
		t.Fatalf("Begin after the branches: %v", err)
	}
	if err := at.Commit(ctx, new(frame.Delta).Set("after", []byte("x"))); err != nil {
		t.Fatal(err)
	}
}

// TestBranchConflict: a branch whose delta writes, or who declared it
// reads, a key that an atom committed after its base wrote fails with a
// *ConflictError matching ErrConflict that names that atom and key, and
// applies nothing; the branch is over and its name free.
func TestBranchConflict(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, nil)
	run := mustRun(db, "r")
	for _, c := range []struct {
		name   string
		reads  []StateKey
		mine   *frame.Delta
		theirs *frame.Delta
		key    StateKey
	}{
		{"same memory key", nil, new(frame.Delta).Set("x", []byte("1")), new(frame.Delta).Set("x", []byte("2")), MemoryKey("x")},
		{"declared read", []StateKey{MemoryKey("plan")}, new(frame.Delta).Set("y", []byte("1")), new(frame.Delta).Delete("plan"), MemoryKey("plan")},
		{"objective", nil, new(frame.Delta).SetObjective("a"), new(frame.Delta).SetObjective("b"), ObjectiveKey()},
		{"messages", nil, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleUser, Content: "a"}),
			new(frame.Delta).ToolOutput("c1", "t", []byte("out")), MessagesKey()},
		{"scratchpad", nil, new(frame.Delta).ClearScratch(), new(frame.Delta).AppendScratch([]byte("s")), ScratchpadKey()},
		{"subgoal", nil, new(frame.Delta).AddSubgoal("g", "x"), new(frame.Delta).AddSubgoal("g", "y"), SubgoalKey("g")},
		{"whole frame read", []StateKey{FrameKey()}, new(frame.Delta).Set("z", []byte("1")), new(frame.Delta).Set("w", []byte("2")), MemoryKey("w")},
	} {
		t.Run(c.name, func(t *testing.T) {
			mine, theirs := mustBranch(t, run, "mine", c.reads...), mustBranch(t, run, "theirs")
			if err := theirs.Commit(ctx, c.theirs); err != nil {
				t.Fatal(err)
			}
			before, last := run.State(), run.LastSeq()
			err := mine.Commit(ctx, c.mine)
			var ce *ConflictError
			if !errors.Is(err, ErrConflict) || !errors.As(err, &ce) {
				t.Fatalf("Commit = %v, want a ConflictError", err)
			}
			if ce.Seq != theirs.Seq() || ce.Key != c.key || ce.Base != mine.Base() || ce.Branch != "mine" || ce.Lost {
				t.Fatalf("conflict %+v, want atom %d and key %v", ce, theirs.Seq(), c.key)
			}
			if run.LastSeq() != last || !framesEqual(run.State(), before) {
				t.Fatal("a conflicting Commit changed the run")
			}
			if err := mine.Commit(ctx, c.mine); !errors.Is(err, ErrAtomDone) {
				t.Fatalf("Commit after the conflict = %v, want ErrAtomDone", err)
			}
			if _, err := mine.Do(ctx, ledger.Action{Tool: "t"}, func(context.Context, string) ([]byte, error) { return nil, nil }); !errors.Is(err, ErrAtomDone) {
				t.Fatalf("Do after the conflict = %v, want ErrAtomDone", err)
			}
			if err := mustBranch(t, run, "mine").Fail(ctx, "not needed"); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Keys that differ do not conflict, whatever their kinds.
	a, b := mustBranch(t, run, "a", MemoryKey("ra"), SubgoalKey("g")), mustBranch(t, run, "b", MemoryKey("rb"))
	if err := a.Commit(ctx, new(frame.Delta).Set("wa", nil).SetSubgoalStatus("g", frame.SubgoalDone)); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx, new(frame.Delta).Set("wb", nil).AddPending(frame.Pending{CallID: "c9", Tool: "t"})); err != nil {
		t.Fatal(err)
	}
}

// TestBranchRetryGetsCachedResults: the retry of a branch that lost a
// conflict (Branch again with its name) repeats the earlier attempt's
// actions under the same default keys, ledger.BranchKey's, and gets their
// certified results: no second effect. After a restart too.
func TestBranchRetryGetsCachedResults(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem)
	db := openTest(t, mem, opts)
	run := mustRun(db, "r")
	down := &downstream{effects: map[string]int{}, results: map[string][]byte{}}
	act := ledger.Action{Tool: "search", Args: []byte(`{"q":"go"}`)}
	work := func(name string) (*Atom, []byte) {
		a := mustBranch(t, run, name)
		out, err := a.Do(ctx, act, down.exec("found"))
		if err != nil {
			t.Fatal(err)
		}
		return a, out
	}
	a, _ := work("fetch")
	other := mustBranch(t, run, "other")
	if err := other.Commit(ctx, new(frame.Delta).Set("result", []byte("theirs"))); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("result", []byte("found"))); !errors.Is(err, ErrConflict) {
		t.Fatalf("Commit = %v, want ErrConflict", err)
	}
	key := ledger.BranchKey("r", "fetch", 0)
	a, out := work("fetch")
	if down.effects[key] != 1 || string(out) != "found" {
		t.Fatalf("retry: %d effects under %q, result %q; want 1 and the cached result", down.effects[key], key, out)
	}
	// A branch of another name is another piece of work: its own key.
	b, _ := work("fetch-2")
	if err := b.Fail(ctx, "abandoned"); err != nil {
		t.Fatal(err)
	}
	if down.effects[ledger.BranchKey("r", "fetch-2", 0)] != 1 {
		t.Fatalf("effects: %v", down.effects)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("result2", out)); err != nil {
		t.Fatal(err)
	}
	// A branch in flight at a restart is lost; its certified action stays.
	lost := mustBranch(t, run, "lost")
	if _, err := lost.Do(ctx, act, down.exec("found")); err != nil {
		t.Fatal(err)
	}
	last := run.LastSeq()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := openTest(t, mem, opts)
	run2 := mustRun(db2, "r")
	if run2.LastSeq() != last {
		t.Fatalf("last seq after the restart %d, want %d", run2.LastSeq(), last)
	}
	if seq, _, err := run2.Interrupted(ctx); seq != 0 || err != nil {
		t.Fatalf("a lost branch is reported as an interrupted atom: %d, %v", seq, err)
	}
	again := mustBranch(t, run2, "lost")
	if _, err := again.Do(ctx, act, down.exec("found")); err != nil {
		t.Fatal(err)
	}
	if n := down.effects[ledger.BranchKey("r", "lost", 0)]; n != 1 {
		t.Fatalf("the lost branch's action ran %d times across the restart", n)
	}
	if err := again.Commit(ctx, new(frame.Delta).Set("lost", []byte("found"))); err != nil {
		t.Fatal(err)
	}
}

// TestBranchAndBegin: Begin keeps its single-atom meaning. Begin is
// refused while branches are in flight, Branch while Begin's atom runs,
// End while either does; two branches in flight cannot share a name; a
// failed branch writes nothing and frees its name.
func TestBranchAndBegin(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, nil)
	run := mustRun(db, "r")
	at, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Branch(ctx, "b"); !errors.Is(err, ErrAtomInProgress) {
		t.Fatalf("Branch beside Begin's atom = %v", err)
	}
	if err := at.Commit(ctx, new(frame.Delta).Set("k", nil)); err != nil {
		t.Fatal(err)
	}
	b := mustBranch(t, run, "b")
	if _, err := run.Begin(ctx); !errors.Is(err, ErrAtomInProgress) {
		t.Fatalf("Begin beside a branch = %v", err)
	}
	if _, err := run.Branch(ctx, "b"); !errors.Is(err, ErrAtomInProgress) {
		t.Fatalf("a second branch b = %v", err)
	}
	if err := run.End(ctx, StatusCompleted, nil); !errors.Is(err, ErrAtomInProgress) {
		t.Fatalf("End beside a branch = %v", err)
	}
	for _, bad := range []string{"", "a\x00b"} {
		if _, err := run.Branch(ctx, bad); err == nil {
			t.Fatalf("Branch(%q) accepted", bad)
		}
	}
	if _, err := run.Branch(ctx, "x", StateKey{Kind: 99}); err == nil {
		t.Fatal("a read of an unknown kind accepted")
	}
	if err := b.Send(ctx, "r", []byte("hi")); !errors.Is(err, ErrBranchMessage) {
		t.Fatalf("Send of a branch = %v, want ErrBranchMessage", err)
	}
	if _, _, err := b.TryReceive(ctx); !errors.Is(err, ErrBranchMessage) {
		t.Fatalf("TryReceive of a branch = %v, want ErrBranchMessage", err)
	}
	appends := db.log.Stats().Appends
	if err := b.Fail(ctx, "no"); err != nil {
		t.Fatal(err)
	}
	if db.log.Stats().Appends != appends {
		t.Fatal("a branch's Fail wrote to the log")
	}
	if err := b.Fail(ctx, "again"); !errors.Is(err, ErrAtomDone) {
		t.Fatalf("second Fail = %v", err)
	}
	at, err = run.Begin(ctx)
	if err != nil {
		t.Fatalf("Begin once the branch failed: %v", err)
	}
	if err := at.Fail(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	if err := run.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Branch(ctx, "late"); !errors.Is(err, ErrRunEnded) {
		t.Fatalf("Branch of an ended run = %v", err)
	}
}

// TestBranchWindowLost: a branch whose base fell out of the write sets the
// run keeps conflicts, conservatively, with Lost set.
func TestBranchWindowLost(t *testing.T) {
	defer func(n int) { branchWindow = n }(branchWindow)
	branchWindow = 3
	mem := vfs.NewMem()
	db := openTest(t, mem, nil)
	run := mustRun(db, "r")
	old := mustBranch(t, run, "old")
	for i := range 4 {
		if err := mustBranch(t, run, fmt.Sprint("w", i)).Commit(ctx, new(frame.Delta).Set(fmt.Sprint("k", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	var ce *ConflictError
	if err := old.Commit(ctx, new(frame.Delta).Set("mine", nil)); !errors.As(err, &ce) || !ce.Lost || ce.Base != 0 || ce.Seq != 2 {
		t.Fatalf("Commit of a branch 4 atoms behind a window of 3 = %v (%+v)", err, ce)
	}
	// Within the window, the same delta commits.
	young := mustBranch(t, run, "young")
	for i := range 3 {
		if err := mustBranch(t, run, fmt.Sprint("v", i)).Commit(ctx, new(frame.Delta).Set(fmt.Sprint("j", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := young.Commit(ctx, new(frame.Delta).Set("mine", nil)); err != nil {
		t.Fatal(err)
	}
}

// TestBranchesConcurrent runs branches of one run from many goroutines
// (run it with -race): some write keys of their own, some share one and
// retry until they win. Every acknowledged commit is in the frame, every
// action ran once, seqs are 1..n in commit order, and the store verifies.
func TestBranchesConcurrent(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem)
	opts.RestartTail = 8 << 10 // engine checkpoints beside the branches
	db := openTest(t, mem, opts)
	run := mustRun(db, "r")
	down := &downstream{effects: map[string]int{}, results: map[string][]byte{}}
	const workers, rounds = 6, 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	conflicts := 0
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				name := fmt.Sprintf("w%d-%d", w, i)
				key := fmt.Sprintf("own-%d", w)
				if w%2 == 0 {
					key = "shared" // every even worker writes it: they conflict
				}
				for {
					a, err := run.Branch(ctx, name)
					if err != nil {
						t.Error(err)
						return
					}
					out, err := a.Do(ctx, ledger.Action{Tool: "t", Args: []byte(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))}, down.exec(name))
					if err != nil {
						t.Error(err)
						return
					}
					err = a.Commit(ctx, new(frame.Delta).Set(key, out).Set("done-"+name, nil))
					if errors.Is(err, ErrConflict) {
						mu.Lock()
						conflicts++
						mu.Unlock()
						continue
					}
					if err != nil {
						t.Error(err)
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	st := run.State()
	if run.LastSeq() != workers*rounds {
		t.Fatalf("last seq %d, want %d", run.LastSeq(), workers*rounds)
	}
	for w := range workers {
		for i := range rounds {
			name := fmt.Sprintf("w%d-%d", w, i)
			if _, ok := st.Memory["done-"+name]; !ok {
				t.Fatalf("branch %s acknowledged, not in the frame", name)
			}
			if n := down.effects[ledger.BranchKey("r", name, 0)]; n != 1 {
				t.Fatalf("branch %s's action ran %d times", name, n)
			}
		}
	}
	t.Logf("%d conflicts retried", conflicts)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := openTest(t, mem, opts)
	if r := mustRun(db2, "r"); !framesEqual(r.State(), st) {
		t.Fatal("the frame after a restart differs")
	}
}

// TestBranchInspectExportVerify: the atom DAG is in the log, covered by
// the chain: inspect and export show a branch's name, base and reads (and
// nothing for an atom of Begin), and verify reports a base that is not
// before its atom, even with the chain recomputed over it.
func TestBranchInspectExportVerify(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem)
	db := openTest(t, mem, opts)
	run := mustRun(db, "r")
	fillRun(t, db, "r", 1)
	a, b := mustBranch(t, run, "a", MemoryKey("plan"), ObjectiveKey()), mustBranch(t, run, "b")
	if err := a.Commit(ctx, new(frame.Delta).Set("a", nil)); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx, new(frame.Delta).Set("b", nil)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := Inspect(ctx, "store", &InspectOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for _, c := range []struct {
		seq    uint64
		branch string
		base   uint64
		reads  string
	}{{1, "", 0, ""}, {2, "a", 1, "objective memory:plan"}, {3, "b", 1, ""}} {
		info, err := in.Atom(ctx, "r", c.seq)
		if err != nil {
			t.Fatal(err)
		}
		if info.Branch != c.branch || info.Base != c.base || keyString(info.Reads) != c.reads {
			t.Fatalf("inspect atom %d: branch %q base %d reads %q; want %q %d %q", c.seq, info.Branch, info.Base, keyString(info.Reads), c.branch, c.base, c.reads)
		}
	}
	var out strings.Builder
	if _, err := in.Export(ctx, &out, "r", 1, 0); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || strings.Contains(lines[0], `"branch"`) ||
		!strings.Contains(lines[1], `"branch":{"name":"a","base":1,"reads":["objective","memory:plan"]}`) ||
		!strings.Contains(lines[2], `"branch":{"name":"b","base":1,"reads":[]}`) {
		t.Fatalf("export:\n%s", out.String())
	}

	// A forger writes an atom whose base is its own seq, chained as the
	// engine would chain it.
	forged := vfs.NewMem()
	db2, err := Open("store", testOptions(forged))
	if err != nil {
		t.Fatal(err)
	}
	r2 := mustRun(db2, "f")
	r2.mu.Lock()
	prev := r2.mu.head
	r2.mu.Unlock()
	ext := record.AtomExt{Tag: record.ExtTagBase, Data: record.AppendBranchBase(nil, &record.BranchBase{Base: 1, Branch: "x"})}
	enc, err := db2.encodeAtom(getBuf(), "f", 1, prev, nil, new(frame.Delta).Set("k", nil), []record.AtomExt{ext}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db2.append(ctx, enc.rec); err != nil {
		t.Fatal(err)
	}
	// And one that breaks the conflict rule: a branch at base 0 writing
	// the key atom 1 wrote, which only a deep verify reads again.
	g := mustRun(db2, "g")
	fillRun(t, db2, "g", 1) // atom 1 writes k1
	g.mu.Lock()
	prev = g.mu.head
	g.mu.Unlock()
	ext = record.AtomExt{Tag: record.ExtTagBase, Data: record.AppendBranchBase(nil, &record.BranchBase{Base: 0, Branch: "late"})}
	enc, err = db2.encodeAtom(getBuf(), "g", 2, prev, nil, new(frame.Delta).Set("k1", nil), []record.AtomExt{ext}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db2.append(ctx, enc.rec); err != nil {
		t.Fatal(err)
	}
	db2.Close()
	conflict := func(deep bool) bool {
		rep, err := Verify(ctx, "store", &VerifyOptions{FS: forged, Deep: deep})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range rep.Failures {
			if f.RunID == "g" && f.Seq == 2 && strings.Contains(f.Detail, `branch "late" (base seq 0) committed after atom 1, which wrote memory:k1`) {
				return true
			}
		}
		return false
	}
	if !conflict(true) || conflict(false) {
		t.Fatalf("the broken conflict rule: reported by deep verify %v, by verify %v; want only deep", conflict(true), conflict(false))
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: forged})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range rep.Failures {
		found = found || f.RunID == "f" && f.Seq == 1 && strings.Contains(f.Detail, "a base is before its atom")
	}
	if rep.OK || !found {
		t.Fatalf("verify of a base at its own seq: OK %v, failures %v", rep.OK, rep.Failures)
	}
}

func keyString(keys []StateKey) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.String()
	}
	return strings.Join(s, " ")
}

// TestBranchKeepsFrameResident: the frame cache never drops the frame of
// a run with branches in flight (their commits check against it and apply
// to it), and drops it once they are done.
func TestBranchKeepsFrameResident(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	opts.FrameCache = 1 // every idle frame over budget
	db := openTest(t, fs, opts)
	run := mustRun(db, "r")
	fillRun(t, db, "r", 2)
	other := mustRun(db, "o")
	fillRun(t, db, "o", 2)
	b := mustBranch(t, run, "b")
	checkpointAndDrop(t, db, db.Stats().FramesDropped+1) // o's
	if !resident(run) {
		t.Fatal("the frame of a run with a branch in flight was dropped")
	}
	if resident(other) {
		t.Fatal("the idle run's frame stayed")
	}
	if err := b.Commit(ctx, new(frame.Delta).Set("b", []byte("1"))); err != nil {
		t.Fatal(err)
	}
	checkpointAndDrop(t, db, db.Stats().FramesDropped+1)
	if resident(run) {
		t.Fatal("the run's frame stayed once its branches were done")
	}
	if string(run.State().Memory["b"]) != "1" {
		t.Fatal("the branch's write is not in the frame read back")
	}
}

// TestBranchAndRollbackExclude: a rollback is refused while a branch is
// in flight (TestRollbackPending: no branch starts while a rollback is
// pending).
func TestBranchAndRollbackExclude(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, nil)
	r := mustRun(db, "r")
	for i := range 2 {
		commitDelta(t, r, msg(fmt.Sprint("atom ", i)))
	}
	b, err := r.Branch(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	noExec := RollbackOptions{Exec: func(Undo) ledger.Exec { return nil }}
	if _, err := r.Rollback(ctx, 1, noExec); !errors.Is(err, ErrAtomInProgress) {
		t.Fatalf("Rollback with a branch in flight: %v, want ErrAtomInProgress", err)
	}
	if err := b.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Rollback(ctx, 1, noExec); err != nil {
		t.Fatalf("Rollback once the branch committed: %v", err)
	}
	if st := r.State(); st.Memory["k"] != nil || len(st.Messages) != 1 {
		t.Fatalf("after the rollback to 1: %+v", st)
	}
}

// TestRollbackUndoesBranchActions: the actions of a branch's atom are
// certified with seq 0 (a branch has no seq until it commits); a rollback
// past that atom undoes them as any atom's.
func TestRollbackUndoesBranchActions(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, nil)
	w := newWorld()
	r := mustRun(db, "r")
	commitStep(t, r, w)
	b, err := r.Branch(ctx, "charge")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Do(ctx, pay(1, true), w.exec(false, "paid")); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx, new(frame.Delta).Set("paid", []byte("1"))); err != nil {
		t.Fatal(err)
	}
	res, err := r.Rollback(ctx, 1, RollbackOptions{Exec: w.undoExec})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Undone) != 1 || res.Undone[0].Tool != "pay" || len(res.NotUndone) != 0 {
		t.Fatalf("the rollback undid %+v (not undone %+v), want the branch's pay", res.Undone, res.NotUndone)
	}
	if st := r.State(); st.Memory["paid"] != nil {
		t.Fatalf("after the rollback: %+v", st.Memory)
	}
}

// TestForkRepeatsBranchAction: a fork's branch that repeats a branch of
// its lineage (same name, same call at the same index) gets the
// certificate of that call (I10), through forks of forks; a branch of
// another name is another piece of work, with keys of its own.
func TestForkRepeatsBranchAction(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, nil)
	w := newWorld()
	p := mustRun(db, "p")
	commitStep(t, p, w)
	branchPay := func(r *Run, name string) {
		t.Helper()
		b, err := r.Branch(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Do(ctx, pay(1, true), w.exec(false, "paid")); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(ctx, new(frame.Delta).Set("paid", []byte(name))); err != nil {
			t.Fatal(err)
		}
	}
	branchPay(p, "charge")
	key := ledger.BranchKey("p", "charge", 0)
	f, err := db.Fork(ctx, "p", 1, "f")
	if err != nil {
		t.Fatal(err)
	}
	branchPay(f, "charge")
	g, err := db.Fork(ctx, "f", 1, "g")
	if err != nil {
		t.Fatal(err)
	}
	branchPay(g, "charge")
	if n := w.count(key); n != 1 {
		t.Fatalf("the lineage's payment ran %d times under the root's key, want once", n)
	}
	for _, k := range []string{ledger.BranchKey("f", "charge", 0), ledger.BranchKey("g", "charge", 0)} {
		if n := w.count(k); n != 0 {
			t.Fatalf("a fork's repeat ran under its own key %s (%d effects)", k, n)
		}
	}
	branchPay(f, "charge-again")
	if n := w.count(ledger.BranchKey("f", "charge-again", 0)); n != 1 {
		t.Fatalf("a branch of another name: %d effects under its own key, want 1", n)
	}
}
