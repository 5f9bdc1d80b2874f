package engine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/snapshot"
)

// TestForgedSnapshotStoreValues writes values into the snapshot store that
// pass its own checks (checksums included) but disagree with the log: a
// snapshot under another seq (its chain head is not that seq's), an atom
// position pointing at the next
// atom. The engine ignores them, counts them, reads exactly what the log
// says, and rebuilds the store at its next Open; verify --deep names them.
func TestForgedSnapshotStoreValues(t *testing.T) {
	mem := vfs.NewMem()
	const dir = "store"
	db, err := engine.Open(dir, &engine.Options{FS: mem, SnapshotEvery: 5, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	stepAtoms(t, db, 1, 30, 1, 3, agent.NewWorld(), map[string][]chain.Hash{})
	// The forgeries need the snapshot store and its atom positions, which
	// the first background snapshot creates: wait for one (on a busy
	// machine Close may come first, and Close writes frame files, not
	// snapshots). A hang guard, not a deadline the test counts on.
	for start := time.Now(); db.Stats().Snapshots == 0; time.Sleep(time.Millisecond) {
		if time.Since(start) > 2*time.Minute {
			t.Fatal("no background snapshot after two minutes")
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	want, _ := readView(t, mem, dir)
	run := workload.RunID(0)

	forge := func(t *testing.T, fs vfs.FS, what string) {
		t.Helper()
		st, err := snapshot.Open(dir+"/snapshots", &snapshot.Options{FS: fs, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		b := st.NewBatch()
		switch what {
		case "head":
			// The run's newest state, its frame file, copied into the
			// store under the seq before its own: its checksum is right
			// for its key, its head is its own seq's. (What the store
			// itself holds of the run depends on when the background
			// took its snapshots; the latest is the frame file.)
			data, err := layout.ReadFile(fs, dir+"/"+layout.FramesDir+"/"+layout.FrameFileBase(run))
			if err != nil {
				t.Fatal(err)
			}
			ff, err := layout.ParseFrameFile(run, data)
			if err != nil {
				t.Fatal(err)
			}
			dicts := frame.NewDicts()
			if _, err := layout.LoadDicts(fs, dir, dicts); err != nil {
				t.Fatal(err)
			}
			raw, err := frame.NewCompressor(dicts).Decompress(nil, ff.Frame)
			if err != nil {
				t.Fatal(err)
			}
			s := &snapshot.Snapshot{RunID: run, Seq: ff.Seq - 1, Head: ff.Head, Frame: raw, Plain: true, Created: time.Now()}
			if err := b.PutSnapshot(s); err != nil {
				t.Fatal(err)
			}
		case "position":
			p, err := st.Positions(run, 3, 4)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.PutPositions(run, 3, []snapshot.Pos{p[1]}); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
	}
	for _, what := range []string{"head", "position"} {
		t.Run(what, func(t *testing.T) {
			fs := copyStore(t, mem, dir)
			forge(t, fs, what)
			rep, err := engine.Verify(ctx, dir, &engine.VerifyOptions{FS: fs, Deep: true})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range rep.Failures {
				found = found || strings.Contains(f.Detail, "snapshot store")
			}
			if rep.OK || !found {
				t.Errorf("verify --deep: OK=%v, failures %v; want the forged %s named", rep.OK, rep.Failures, what)
			}
			got, st := readView(t, fs, dir)
			if diff := want.diff(got); diff != "" {
				t.Fatalf("the engine reads the forged store differently: %s", diff)
			}
			if st.SnapshotMismatches == 0 || !errors.Is(st.SnapshotStore, snapshot.ErrCorrupt) {
				t.Errorf("Stats: %d mismatches, SnapshotStore %v; want the forgery counted and the store failed as damaged", st.SnapshotMismatches, st.SnapshotStore)
			}
			again, st := readView(t, fs, dir)
			if diff := want.diff(again); diff != "" {
				t.Fatalf("reopened, the engine reads the store differently: %s", diff)
			}
			if st.SnapshotMismatches != 0 || st.SnapshotStore != nil {
				t.Errorf("reopened: %d mismatches, SnapshotStore %v; want a rebuilt store in use", st.SnapshotMismatches, st.SnapshotStore)
			}
			if rep, err := engine.Verify(ctx, dir, &engine.VerifyOptions{FS: fs, Deep: true}); err != nil || !rep.OK {
				t.Errorf("verify --deep of the rebuilt store: %v %v", err, rep.Failures)
			}
		})
	}
}

// TestVerifySaysSnapshotStoreUnchecked: without --deep verify says it did
// not check the snapshot store; with --deep beside a running engine that
// has the store open, it says why it could not, and passes.
func TestVerifySaysSnapshotStoreUnchecked(t *testing.T) {
	// One filesystem for the engine and verify, with its locks in memory:
	// Pebble's lock is held by the engine's store.
	fs := &faultLockFS{FS: vfs.NewMem()}
	const dir = "store"
	db, err := engine.Open(dir, &engine.Options{FS: fs, SnapshotEvery: 2, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stepAtoms(t, db, 1, 6, 1, 3, agent.NewWorld(), map[string][]chain.Hash{})
	r, err := db.Run(ctx, workload.RunID(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.StateAt(ctx, 3); err != nil { // opens the snapshot store
		t.Fatal(err)
	}
	// Pebble's lock on the operating system's filesystem is a LOCK file;
	// faultLockFS keeps locks in memory, so the file is made here (verify
	// does not open a snapshot store without one).
	if f, err := fs.Create(fs.PathJoin(dir, "snapshots", "LOCK"), vfs.WriteCategoryUnspecified); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	for _, deep := range []bool{false, true} {
		rep, err := engine.Verify(ctx, dir, &engine.VerifyOptions{FS: fs, Deep: deep})
		if err != nil {
			t.Fatal(err)
		}
		want := "the snapshot store (its snapshots"
		if deep {
			want = "the snapshot store (a running process has it open"
		}
		found := false
		for _, u := range rep.Unchecked {
			found = found || strings.HasPrefix(u, want)
		}
		if !rep.OK || !found {
			t.Errorf("deep=%v: OK=%v unchecked %q, want a note %q...", deep, rep.OK, rep.Unchecked, want)
		}
	}
}
