package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
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
