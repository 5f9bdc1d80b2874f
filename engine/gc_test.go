package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
)

// gcOptions are testOptions with small segments, so that a few dozen
// atoms fill several.
func gcOptions(fs vfs.FS) *Options {
	o := testOptions(fs)
	o.SegmentSize = 16 << 10
	return o
}

// fillRun commits n atoms of run id, each with one action and a value of
// about 600 bytes that does not compress, and returns the run.
func fillRun(t testing.TB, db *DB, id string, n int) *Run {
	t.Helper()
	run, err := db.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(len(id)), uint64(n)))
	for i := 0; i < n; i++ {
		if err := commitFilled(run, rng); err != nil {
			t.Fatal(err)
		}
	}
	return run
}

// commitFilled commits one atom of fillRun's kind.
// agentBeside commits up to n atoms (commitFilled) to run id of db on a
// goroutine, an agent beside the operation a power-loss trial cuts: it
// stops at the first error, and sets *acked to the run's last seq after
// each commit that returned before the cut started. Read *acked only once
// the returned channel is closed.
func agentBeside(db *DB, id string, rng *rand.Rand, n int, cut *powerCut, acked *uint64) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		run, err := db.Run(ctx, id)
		for range n {
			if err != nil || commitFilled(run, rng) != nil {
				return
			}
			if !cut.cutBefore() {
				*acked = run.LastSeq()
			}
		}
	}()
	return done
}

func commitFilled(run *Run, rng *rand.Rand) error {
	a, err := run.Begin(ctx)
	if err != nil {
		return err
	}
	seq := a.Seq()
	if _, err := a.Do(ctx, ledger.Action{Tool: "t", Args: []byte(fmt.Sprintf(`{"run":%q,"seq":%d}`, run.ID(), seq))},
		func(context.Context, string) ([]byte, error) { return []byte(fmt.Sprint("r", seq)), nil }); err != nil {
		return err
	}
	val := make([]byte, 600)
	for i := range val {
		val[i] = byte(rng.Uint32())
	}
	return a.Commit(ctx, new(frame.Delta).Set(fmt.Sprint("k", seq%7), val))
}

// TestDeleteAndGC: Delete refuses what it must, a deleted run is gone from
// the API for good, GC removes the segments that held only its records,
// and the live run and the store survive a restart whole.
func TestDeleteAndGC(t *testing.T) {
	mem := vfs.NewMem()
	opts := gcOptions(mem)
	db := openTest(t, mem, opts)
	old := fillRun(t, db, "old", 60)
	live := fillRun(t, db, "live", 3)

	if _, err := db.Delete(ctx, "old"); !errors.Is(err, ErrRunNotEnded) {
		t.Fatalf("Delete of an active run: %v, want ErrRunNotEnded", err)
	}
	if err := old.End(ctx, StatusCompleted, []byte("done")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Fork(ctx, "old", 10, "fork"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Delete(ctx, "old"); !errors.Is(err, ErrRunHasForks) {
		t.Fatalf("Delete of a run with a live fork: %v, want ErrRunHasForks", err)
	}
	// A policy keeps a run whose fork it does not select.
	if got, err := db.DeleteRuns(ctx, DeleteOptions{Status: []Status{StatusCompleted}}); err != nil || len(got) != 0 {
		t.Fatalf("policy deleted %v, %v; want nothing (the fork lives)", got, err)
	}
	if _, err := db.DeleteRuns(ctx, DeleteOptions{}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("DeleteRuns without a selection: %v", err)
	}
	if err := mustRun(db, "fork").End(ctx, StatusCancelled, nil); err != nil {
		t.Fatal(err)
	}
	got, err := db.DeleteRuns(ctx, DeleteOptions{EndedBefore: time.Now().Add(time.Minute), Reason: "30 days"})
	if err != nil || len(got) != 2 || got[0].ID != "fork" || got[1].ID != "old" || got[1].Reason != "30 days" || got[1].Seq != 62 {
		t.Fatalf("deleted %+v, %v", got, err)
	}
	if infos, _ := db.Runs(); len(infos) != 1 || infos[0].ID != "live" {
		t.Fatalf("runs after the deletion: %+v", infos)
	}
	for _, id := range []string{"old", "fork"} {
		if _, err := db.Run(ctx, id); !errors.Is(err, ErrRunDeleted) {
			t.Fatalf("Run(%q) after its deletion: %v, want ErrRunDeleted", id, err)
		}
	}
	if _, err := db.Fork(ctx, "live", 1, "old"); !errors.Is(err, ErrRunDeleted) {
		t.Fatalf("Fork onto a deleted id: %v", err)
	}

	before := db.log.Segments()
	st, err := db.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Segments == 0 || st.Bytes == 0 || st.Floor <= 1 || st.Forgotten == 0 {
		t.Fatalf("GC: %+v (segments before: %d)", st, len(before))
	}
	if segs := db.log.Segments(); segs[0].ID != st.Floor || len(segs) != len(before)-st.Segments {
		t.Fatalf("segments after GC: first %d, %d of them; stats %+v", segs[0].ID, len(segs), st)
	}
	if st2, err := db.GC(ctx); err != nil || st2.Segments != 0 {
		t.Fatalf("second GC: %+v, %v; want nothing to remove", st2, err)
	}
	if snaps, err := db.usableSnapshots(ctx); err != nil || snaps == nil {
		t.Fatalf("snapshot store: %v", err)
	} else if seqs, err := snaps.Snapshots("old"); err != nil || len(seqs) != 0 {
		t.Fatalf("snapshots of the deleted run after GC: %v, %v", seqs, err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for range 3 {
		if err := commitFilled(live, rng); err != nil {
			t.Fatal(err)
		}
	}
	want := live.State()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Twice: from CHECKPOINT, then from the whole log (CHECKPOINT gone).
	for _, whole := range []bool{false, true} {
		if whole {
			if err := mem.Remove("store/" + layout.CheckpointName); err != nil {
				t.Fatal(err)
			}
		}
		db2, err := Open("store", opts)
		if err != nil {
			t.Fatalf("reopen (whole replay %v): %v", whole, err)
		}
		r, err := db2.Run(ctx, "live")
		if err != nil || r.LastSeq() != 6 || !framesEqual(r.State(), want) {
			t.Fatalf("live run after the restart (whole replay %v): seq %d, %v", whole, r.LastSeq(), err)
		}
		if _, err := r.StateAt(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := db2.Run(ctx, "old"); !errors.Is(err, ErrRunDeleted) {
			t.Fatalf("Run(old) after the restart: %v", err)
		}
		if d, err := db2.Deleted(); err != nil || len(d) != 2 || d[1].ID != "old" || d[1].Reason != "30 days" {
			t.Fatalf("Deleted after the restart: %+v, %v", d, err)
		}
		if err := db2.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// The read-only tools read the trimmed log: the live run, not the
	// reclaimed one.
	in, err := Inspect(ctx, "store", &InspectOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if runs := in.Runs(); len(runs) != 1 || runs[0].ID != "live" || runs[0].LastSeq != 6 {
		t.Fatalf("inspect of the collected store: %+v", runs)
	}
	n := 0
	if err := Scan(ctx, "store", mem, func(*LogRecord) error { n++; return nil }); err != nil || n == 0 {
		t.Fatalf("scan of the collected store: %d records, %v", n, err)
	}
}

func mustRun(db *DB, id string) *Run {
	r, err := db.Run(ctx, id)
	if err != nil {
		panic(err)
	}
	return r
}

func framesEqual(a, b *frame.Frame) bool {
	return string(frame.AppendFrame(nil, a)) == string(frame.AppendFrame(nil, b))
}

// TestGCPowerLoss cuts the power at every filesystem operation of a
// Delete and the GC after it, with a live run committing beside them, in
// both durability modes: after the restart every atom the live run had
// acknowledged is there, the deleted run is gone if its Delete returned
// (and otherwise gone or whole), the store verifies, and a GC run to its
// end then removes the dead segments.
func TestGCPowerLoss(t *testing.T) {
	base := vfs.NewCrashableMem()
	db, err := Open("store", gcOptions(base))
	if err != nil {
		t.Fatal(err)
	}
	old := fillRun(t, db, "old", 60)
	if err := old.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	fillRun(t, db, "live", 3)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	everyPowerCut(t, 3, 1, "the trial", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		return gcTrial(t, base, mode, pct, target)
	})
}

func gcTrial(t *testing.T, base *vfs.MemFS, mode Durability, pct int, target uint64) uint64 {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("crash at op %d: "+format, append([]any{target}, args...)...)
	}
	mem, cut := newPowerCut(base, pct, target)
	opts := gcOptions(mem)
	opts.Durability = mode
	opts.FS = errorfs.Wrap(cut.mem, cut)
	acked := uint64(3) // the live run's last acknowledged seq
	deleteAcked, gcDone := false, false
	if db, err := Open("store", opts); err == nil {
		done := agentBeside(db, "live", rand.New(rand.NewPCG(1, target)), 4, cut, &acked) // beside the collection
		if _, err := db.Delete(ctx, "old"); err == nil {
			deleteAcked = !cut.cutBefore()
			st, err := db.GC(ctx)
			gcDone = err == nil && st.Segments > 0 && !cut.cutBefore()
		}
		<-done
		db.Close()
	} else if !cut.cutBefore() {
		fail("open: %v", err)
	}
	fs := cut.survivor(mem)
	o := gcOptions(fs)
	o.Durability = mode
	db, err := Open("store", o)
	if err != nil {
		fail("reopen: %v", err)
	}
	live, err := db.Run(ctx, "live")
	if err != nil || live.LastSeq() < acked {
		fail("live run after the restart: seq %d, %v; %d were acknowledged", live.LastSeq(), err, acked)
	}
	for seq := uint64(1); seq <= live.LastSeq(); seq++ {
		if _, err := live.StateAt(ctx, seq); err != nil {
			fail("live run seq %d: %v", seq, err)
		}
	}
	switch r, err := db.Run(ctx, "old"); {
	case errors.Is(err, ErrRunDeleted):
	case err != nil:
		fail("old run: %v", err)
	case deleteAcked:
		fail("Delete returned nil, the run is there after the restart")
	case r.LastSeq() != 60 || r.Status() != StatusCompleted:
		fail("the run whose Delete did not return is neither gone nor whole: seq %d, %v", r.LastSeq(), r.Status())
	default:
		if _, err := db.Delete(ctx, "old"); err != nil {
			fail("Delete after the restart: %v", err)
		}
	}
	if gcDone && db.log.Segments()[0].ID == 1 {
		fail("GC returned, the log starts at segment 1 after the restart")
	}
	if st, err := db.GC(ctx); err != nil || db.log.Segments()[0].ID == 1 {
		fail("GC after the restart: %+v, %v", st, err)
	}
	if err := db.Close(); err != nil {
		fail("close: %v", err)
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: true})
	if err != nil || !rep.OK {
		fail("verify: %v %v", err, rep.Failures)
	}
	if len(rep.Deleted) != 1 || rep.Deleted[0].RunID != "old" || !rep.Deleted[0].Reclaimed {
		fail("verify's deleted runs: %+v", rep.Deleted)
	}
	return cut.n.Load()
}

// TestDeleteBesideTheEngine: deletions, collections, forks of the runs
// being deleted and engine checkpoints at every few records, all at once
// (run it with -race): a fork either wins (and its parent stays) or fails
// with ErrRunDeleted, a deleted run never comes back, and the store
// verifies after a restart.
func TestDeleteBesideTheEngine(t *testing.T) {
	mem := vfs.NewMem()
	opts := gcOptions(mem)
	opts.RestartTail = 16 << 10 // an engine checkpoint every few atoms
	db := openTest(t, mem, opts)
	const n = 8
	for i := range n {
		r := fillRun(t, db, fmt.Sprint("r", i), 4)
		if err := r.End(ctx, StatusCompleted, nil); err != nil {
			t.Fatal(err)
		}
	}
	live := fillRun(t, db, "live", 1)
	forked := make([]bool, n)
	done := make(chan struct{})
	go func() { // the agent
		defer close(done)
		rng := rand.New(rand.NewPCG(5, 6))
		for range 30 {
			if err := commitFilled(live, rng); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	forks := make(chan error, n)
	for i := range n {
		go func() {
			_, err := db.Fork(ctx, fmt.Sprint("r", i), 2, fmt.Sprint("f", i))
			forked[i] = err == nil
			forks <- err
		}()
	}
	deleted := map[string]bool{}
	for i := range n {
		got, err := db.Delete(ctx, fmt.Sprint("r", i))
		switch {
		case errors.Is(err, ErrRunHasForks):
		case err != nil:
			t.Fatal(err)
		default:
			deleted[got[0].ID] = true
		}
		if i%3 == 0 {
			if _, err := db.GC(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range n {
		if err := <-forks; err != nil && !errors.Is(err, ErrRunDeleted) {
			t.Fatalf("fork: %v", err)
		}
	}
	<-done
	for i := range n {
		id := fmt.Sprint("r", i)
		if forked[i] && deleted[id] {
			t.Fatalf("run %s was both forked and deleted", id)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	for id := range deleted {
		if _, err := db2.Run(ctx, id); !errors.Is(err, ErrRunDeleted) {
			t.Fatalf("deleted run %s after the restart: %v", id, err)
		}
	}
	if r, err := db2.Run(ctx, "live"); err != nil || r.LastSeq() != 31 {
		t.Fatalf("live run after the restart: %v", err)
	}
}

// TestGCKeepsSharedActions: an action with an explicit key that a deleted
// run performed and a live run repeated (the ledger gave the live run the
// deleted run's certificate) stays: GC stops at its records, the live
// run's chain still links its result, and a third Do of it is still
// answered from the certificate, after a restart too.
func TestGCKeepsSharedActions(t *testing.T) {
	mem := vfs.NewMem()
	opts := gcOptions(mem)
	db := openTest(t, mem, opts)
	shared := ledger.Action{Tool: "pay", Args: []byte(`{"amount":5}`), Key: "invoice-7"}
	calls := 0
	exec := func(context.Context, string) ([]byte, error) { calls++; return []byte("paid"), nil }
	do := func(run *Run) {
		t.Helper()
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := a.Do(ctx, shared, exec); err != nil || string(out) != "paid" {
			t.Fatalf("Do: %q, %v", out, err)
		}
		if err := a.Commit(ctx, new(frame.Delta).Set("paid", []byte("yes"))); err != nil {
			t.Fatal(err)
		}
	}
	old := fillRun(t, db, "old", 40)
	do(old)
	rng := rand.New(rand.NewPCG(7, 7))
	for range 20 {
		if err := commitFilled(old, rng); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	live := fillRun(t, db, "live", 1)
	do(live)
	if calls != 1 {
		t.Fatalf("exec called %d times, want 1", calls)
	}
	if _, err := db.Delete(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	st, err := db.GC(ctx)
	if err != nil || st.Segments == 0 {
		t.Fatalf("GC: %+v, %v", st, err)
	}
	if _, err := db.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true})
	if err != nil || !rep.OK {
		t.Fatalf("verify: %v %v", err, rep.Failures)
	}
	db2, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	r, err := db2.Run(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	do(r)
	if calls != 1 {
		t.Fatalf("exec called %d times after the collection, want 1 (the certificate is gone)", calls)
	}
}

// TestGCNothingToCollect: a store with no deleted run keeps its log and
// writes no RETENTION; GC and Delete after Close fail with ErrClosed.
func TestGCNothingToCollect(t *testing.T) {
	mem := vfs.NewMem()
	opts := gcOptions(mem)
	db := openTest(t, mem, opts)
	fillRun(t, db, "a", 40)
	segs := len(db.log.Segments())
	st, err := db.GC(ctx)
	if err != nil || st.Segments != 0 || st.Floor != 1 || len(db.log.Segments()) != segs {
		t.Fatalf("GC: %+v, %v", st, err)
	}
	if _, err := mem.Stat("store/" + layout.RetentionName); err == nil {
		t.Fatal("RETENTION written by a GC that removed nothing")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GC(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("GC after Close: %v", err)
	}
	if _, err := db.Delete(ctx, "a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Delete after Close: %v", err)
	}
}

// TestDeletedAfterReplayPosition: a run deleted after CHECKPOINT's replay
// position is still in CHECKPOINT's rows at the restart; that row is no
// mismatch, and the other runs the restart has not built yet stay (it
// once counted the deleted run's row out of the lazy rows twice, and the
// last unbuilt run vanished).
func TestDeletedAfterReplayPosition(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("s", testOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	commitOne(t, db, "a", "k", "v")
	commitOne(t, db, "b", "k", "v")
	if err := mustRun(db, "a").End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open("s", testOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	crash(db) // no checkpoint after the delete record
	db, err = Open("s", testOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.checkRegistry(); err != nil {
		t.Fatal(err)
	}
	if why := db.registryMismatch(); why != "" {
		t.Fatalf("the registry found a mismatch: %s", why)
	}
	if b, err := db.Run(ctx, "b"); err != nil || b.LastSeq() != 1 {
		t.Fatalf("run b after the restart: %v", err)
	}
	if _, err := db.Run(ctx, "a"); !errors.Is(err, ErrRunDeleted) {
		t.Fatalf("run a after the restart: %v", err)
	}
}
