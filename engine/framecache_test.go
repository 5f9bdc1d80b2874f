package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
)

// checkpointAndDrop has the background goroutine write an engine
// checkpoint (after which it drops idle frames) and waits until at least
// want frames were dropped.
func checkpointAndDrop(t *testing.T, db *DB, want int64) {
	t.Helper()
	before := db.Stats().Checkpoints
	db.bg.ckptReq <- struct{}{}
	deadline := time.Now().Add(30 * time.Second)
	for db.Stats().Checkpoints == before || db.Stats().FramesDropped < want {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d checkpoints (was %d), %d frames dropped, want %d", db.Stats().Checkpoints, before, db.Stats().FramesDropped, want)
		}
		time.Sleep(time.Millisecond)
	}
}

func resident(r *Run) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.frame != nil
}

// TestFrameCacheDropsIdleFrames: past Options.FrameCache, the frames of
// idle runs leave memory once a checkpoint has written them, least
// recently used first, and come back exactly as the log has them: from
// the file this process wrote, or from the log when that file changed.
func TestFrameCacheDropsIdleFrames(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	opts.FrameCache = 1 // every idle frame over budget
	db := openTest(t, fs, opts)
	ids := []string{"a", "b", "c", "d"}
	want := map[string]*frame.Frame{}
	for _, id := range ids {
		r := mustRun(db, id)
		for i := range 4 {
			commitDelta(t, r, new(frame.Delta).Set("k", []byte(fmt.Sprint(id, i))).AppendMessage(frame.Message{Role: frame.RoleUser, Content: id}))
		}
		want[id] = r.State()
	}
	// The run in use keeps its frame: an atom of d is running.
	inUse, err := mustRun(db, "d").Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkpointAndDrop(t, db, 3)
	for _, id := range ids {
		if got, wantIn := resident(mustRun(db, id)), id == "d"; got != wantIn {
			t.Fatalf("run %s resident %v after the checkpoint, want %v", id, got, wantIn)
		}
	}
	if err := inUse.Commit(ctx, msg("d's fifth")); err != nil {
		t.Fatal(err)
	}
	want["d"] = mustRun(db, "d").State()

	// Read back from the frame file: the same frame, then it moves on.
	a := mustRun(db, "a")
	if got := a.State(); !framesEqual(got, want["a"]) {
		t.Fatalf("a after its frame came back: %+v, want %+v", got, want["a"])
	}
	commitDelta(t, a, msg("a's fifth"))
	if got, err := a.StateAt(ctx, 4); err != nil || !framesEqual(got, want["a"]) {
		t.Fatalf("a.StateAt(4) = %+v, %v", got, err)
	}

	// A frame file replaced while its frame was out of memory, with a
	// valid file of the same run, seq and head: not used, the frame is
	// the log's.
	b := mustRun(db, "b")
	forged := want["b"].Clone()
	forged.Memory["k"] = []byte("forged")
	ff := layout.FrameFile{Run: "b", Seq: 4, Head: b.Head(), Frame: db.comp.CompressWith(nil, frame.AppendFrame(nil, forged), frame.CodecS2, 0)}
	if err := layout.WriteFileAtomic(fs, db.frameFileName("b"), ff.Marshal(), true); err != nil {
		t.Fatal(err)
	}
	rebuilt := db.Stats().FramesRebuilt
	if got := b.State(); !framesEqual(got, want["b"]) {
		t.Fatalf("b from a replaced frame file: memory %q, want the log's %q", got.Memory["k"], want["b"].Memory["k"])
	}
	if n := db.Stats().FramesRebuilt; n != rebuilt+1 {
		t.Fatalf("FramesRebuilt %d, want %d", n, rebuilt+1)
	}

	// The least recently used go first: with room for about one frame,
	// the one just used stays.
	db.frameBudget.Store(mustRun(db, "c").residentOrMeasure() + 1)
	checkpointAndDrop(t, db, db.Stats().FramesDropped+1)
	mustRun(db, "c").State()
	checkpointAndDrop(t, db, db.Stats().FramesDropped)
	if !resident(mustRun(db, "c")) {
		t.Fatal("the run used last was dropped")
	}
}

// residentOrMeasure is the encoded size of r's frame.
func (r *Run) residentOrMeasure() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.materializeLocked(); err != nil {
		panic(err)
	}
	return r.residentBytesLocked()
}

// TestFrameCacheOff: a negative FrameCache keeps every frame.
func TestFrameCacheOff(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	opts.FrameCache = -1
	db := openTest(t, fs, opts)
	for _, id := range []string{"a", "b"} {
		commitDelta(t, mustRun(db, id), msg(id))
	}
	before := db.Stats().Checkpoints
	db.bg.ckptReq <- struct{}{}
	for db.Stats().Checkpoints == before {
		time.Sleep(time.Millisecond)
	}
	db.dropIdleFrames()
	if n := db.Stats().FramesDropped; n != 0 || !resident(mustRun(db, "a")) || !resident(mustRun(db, "b")) {
		t.Fatalf("%d frames dropped with the cache off", n)
	}
}

// commitDelta commits d as the next atom of r.
func commitDelta(t *testing.T, r *Run, d *frame.Delta) {
	t.Helper()
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, d); err != nil {
		t.Fatal(err)
	}
}
