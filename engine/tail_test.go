package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/continuumdb/continuum/layout"
)

// TestCloseLeavesShortTails: Close leaves a run whose atoms past its frame
// file are few (maxTailAtoms) to its tail: no frame file, CHECKPOINT's row
// names the older file (or none) and the run's last seq, and the next Open
// builds the run from the file and its atoms in the log, found through the
// atom index, with no frame counted as rebuilt. A run past the limit gets
// its file. Without the snapshot store (removed), the runs are still
// built right, from the log.
func TestCloseLeavesShortTails(t *testing.T) {
	const runs, short, long = 80, 3, 20
	dir := filepath.Join(t.TempDir(), "store")
	db, err := Open(dir, &Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	content := func(i, seq int) string { return fmt.Sprintf("r%d atom %d", i, seq) }
	want := map[string]int{} // run -> atoms
	commit := func(db *DB, i, n int) {
		t.Helper()
		id := fmt.Sprint("r", i)
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			a, err := r.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want[id]++
			if err := a.Commit(ctx, msg(content(i, want[id]))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range runs {
		commit(db, i, short)
	}
	commit(db, runs, long) // past the limit: its frame file is written
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := os.ReadDir(filepath.Join(dir, layout.FramesDir))
	if len(files) != 1 || files[0].Name() != layout.FrameFileBase(fmt.Sprint("r", runs)) {
		t.Fatalf("frame files after Close: %v, want only the long run's", files)
	}
	b, err := os.ReadFile(filepath.Join(dir, layout.CheckpointName))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := layout.ParseCheckpoint("CHECKPOINT", b)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range cp.Runs {
		if n := uint64(want[row.ID]); row.LastSeq != n || row.IndexedSeq != n || (n == short) != (row.FrameSeq == 0) {
			t.Errorf("row of %s: last %d, indexed %d, frame file at %d; want last %d", row.ID, row.LastSeq, row.IndexedSeq, row.FrameSeq, n)
		}
	}

	check := func(db *DB, round string) {
		t.Helper()
		for i := 0; i <= runs; i++ {
			id := fmt.Sprint("r", i)
			r, err := db.Run(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			f, err := r.StateE()
			n := want[id]
			if err != nil || r.LastSeq() != uint64(n) || len(f.Messages) != n {
				t.Fatalf("%s: run %s: seq %d, %d messages, want %d: %v", round, id, r.LastSeq(), len(f.Messages), n, err)
			}
			for s := 1; s <= n; s++ {
				if f.Messages[s-1].Content != content(i, s) {
					t.Fatalf("%s: run %s message %d is %q", round, id, s, f.Messages[s-1].Content)
				}
			}
			if at, err := r.StateAt(ctx, 1); err != nil || len(at.Messages) != 1 || at.Messages[0].Content != content(i, 1) {
				t.Fatalf("%s: run %s StateAt(1): %v", round, id, err)
			}
		}
	}
	// Reopened: the tails come from the atom index; then half the runs
	// take an atom more (a tail of 4) and Close leaves them again.
	db, err = Open(dir, &Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	check(db, "reopened")
	if n := db.Stats().FramesRebuilt; n != 0 {
		t.Errorf("%d frames rebuilt after a clean Close", n)
	}
	for i := range runs {
		if i%8 != 0 {
			commit(db, i, 1) // 70 runs: 4 atoms past no frame file
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if files, _ := os.ReadDir(filepath.Join(dir, layout.FramesDir)); len(files) != 1 {
		t.Errorf("%d frame files after the second Close, want 1", len(files))
	}
	if rep, err := Verify(ctx, dir, &VerifyOptions{Deep: true}); err != nil || !rep.OK {
		t.Fatalf("deep verify of a store with runs left to their tails: %v %+v", err, rep)
	}
	db, err = Open(dir, &Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	check(db, "reopened twice")
	if n := db.Stats().FramesRebuilt; n != 0 {
		t.Errorf("%d frames rebuilt after the second clean Close", n)
	}
	// A few runs moved: Close writes their frame files, as a store with
	// few runs has them (its restart does not wait for the snapshot
	// store); the runs not used since Open keep their tails.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir, &Options{Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		commit(db, i, 1)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if files, _ := os.ReadDir(filepath.Join(dir, layout.FramesDir)); len(files) != 6 {
		t.Errorf("%d frame files after a Close of 5 moved runs, want 6", len(files))
	}
	db, err = Open(dir, &Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	check(db, "reopened thrice")
	if n := db.Stats().FramesRebuilt; n != 0 {
		t.Errorf("%d frames rebuilt after the third clean Close", n)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// The snapshot store, and the atom index with it, gone: the runs are
	// built from the log.
	if err := os.RemoveAll(filepath.Join(dir, layout.SnapshotsDir)); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, &Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	check(db, "without the snapshot store")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
