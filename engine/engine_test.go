package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/google/go-cmp/cmp"
)

var ctx = context.Background()

// testOptions are small, quiet options on an in-memory filesystem.
func testOptions(fs vfs.FS) *Options {
	return &Options{FS: fs, SegmentSize: 1 << 20, SnapshotEvery: 5, DictSamples: 32, DictSize: 4 << 10}
}

// openTest opens a store and registers a full consistency check of it for
// the end of the test.
func openTest(t testing.TB, fs vfs.FS, opts *Options) *DB {
	t.Helper()
	if opts == nil {
		opts = testOptions(fs)
	}
	db, err := Open("store", opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		db.Close()
		checkStore(t, fs, opts)
	})
	return db
}

// checkStore is the full consistency check run after every engine test:
// the store reopens, every run's chain verifies, and every run's frame at
// its last seq equals the frame rebuilt from the log alone.
func checkStore(t testing.TB, fs vfs.FS, opts *Options) {
	t.Helper()
	o := *opts
	o.FS = fs
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, ChainKey: o.ChainKey, Keyring: o.Keyring, Deep: true})
	if err != nil {
		t.Errorf("consistency check: verify: %v", err)
		return
	}
	if !rep.OK {
		for _, f := range rep.Failures {
			t.Errorf("consistency check: %s", f.String())
		}
	}
}

type counter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *counter) exec(result string) ledger.Exec {
	return func(ctx context.Context, key string) ([]byte, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.calls == nil {
			c.calls = map[string]int{}
		}
		c.calls[key]++
		return []byte(result), nil
	}
}

func (c *counter) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[key]
}

func msg(s string) *frame.Delta {
	return new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: s})
}

func TestBasicRoundTrip(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	db := openTest(t, fs, opts)
	run, err := db.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	var c counter
	for i := 1; i <= 12; i++ {
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if a.Seq() != uint64(i) {
			t.Fatalf("seq %d, want %d", a.Seq(), i)
		}
		out, err := a.Do(ctx, ledger.Action{Tool: "t", Args: []byte(fmt.Sprintf(`{"i":%d}`, i))}, c.exec(fmt.Sprint("result-", i)))
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != fmt.Sprint("result-", i) {
			t.Fatalf("Do returned %q", out)
		}
		if err := a.Commit(ctx, msg(fmt.Sprint("thought ", i)).Set("k", []byte(fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	want := run.State()
	head := run.Head()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if db2.Stats().Open.Replayed != 0 {
		t.Errorf("replayed %d records after a clean close, want 0", db2.Stats().Open.Replayed)
	}
	run2, err := db2.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if run2.LastSeq() != 12 || run2.Head() != head {
		t.Fatalf("after reopen: seq %d head %v, want 12 %v", run2.LastSeq(), run2.Head(), head)
	}
	if diff := cmp.Diff(want, run2.State()); diff != "" {
		t.Fatalf("state after reopen (-want +got):\n%s", diff)
	}
	for seq := uint64(0); seq <= 12; seq++ {
		f, err := run2.StateAt(ctx, seq)
		if err != nil {
			t.Fatalf("StateAt(%d): %v", seq, err)
		}
		if len(f.Messages) != int(seq) {
			t.Fatalf("StateAt(%d) has %d messages", seq, len(f.Messages))
		}
	}
}

func TestBadInput(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, nil)
	for _, id := range []string{"", strings.Repeat("x", MaxRunIDLen+1), "a\nb", "\xff", "a\x7fb", "é\x01", "é\xff"} {
		if _, err := db.Run(ctx, id); !errors.Is(err, ErrInvalidRunID) {
			t.Errorf("Run(%q): %v, want ErrInvalidRunID", id, err)
		}
	}
	for _, id := range []string{"agent-7/task 3", "agent/ünï", strings.Repeat("é", MaxRunIDLen/2)} {
		if _, err := db.Run(ctx, id); err != nil {
			t.Errorf("Run(%q): %v", id, err)
		}
	}
	run, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Begin(ctx); !errors.Is(err, ErrAtomInProgress) {
		t.Errorf("second Begin: %v, want ErrAtomInProgress", err)
	}
	if err := a.Commit(ctx, nil); !errors.Is(err, ErrNilDelta) {
		t.Errorf("Commit(nil): %v", err)
	}
	if err := a.Commit(ctx, new(frame.Delta).SetSubgoalStatus("nope", frame.SubgoalDone)); !errors.Is(err, ErrInvalidDelta) {
		t.Errorf("Commit(bad delta): %v, want ErrInvalidDelta", err)
	}
	if _, err := a.Do(ctx, ledger.Action{Tool: "t", Args: []byte(`{bad`)}, (&counter{}).exec("x")); err == nil {
		t.Error("Do with invalid JSON args succeeded")
	}
	if err := a.Commit(ctx, msg("ok")); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, msg("again")); !errors.Is(err, ErrAtomDone) {
		t.Errorf("Commit twice: %v, want ErrAtomDone", err)
	}
	if _, err := a.Do(ctx, ledger.Action{Tool: "t", Args: []byte(`{}`)}, (&counter{}).exec("x")); !errors.Is(err, ErrAtomDone) {
		t.Errorf("Do after Commit: %v, want ErrAtomDone", err)
	}
	if _, err := run.StateAt(ctx, 5); !errors.Is(err, ErrSeqOutOfRange) {
		t.Errorf("StateAt beyond last: %v", err)
	}
	if _, err := Open("store", testOptions(fs)); !errors.Is(err, ErrLocked) {
		t.Errorf("second Open: %v, want ErrLocked", err)
	}
	db.Close()
	if _, err := db.Run(ctx, "r"); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	if _, err := run.Begin(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Begin after Close: %v", err)
	}
}

// TestFileModes: on a real disk every file of a store is 0600 and every
// directory 0700, whatever the umask.
func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	db, err := Open(dir, &Options{DictSamples: 8, SegmentSize: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, "r", 20)
	// The snapshot store is created on first need: this is one.
	if _, err := db.snapshots(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	n, pebbleFiles := 0, 0
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		n++
		if filepath.Base(filepath.Dir(p)) == layout.SnapshotsDir {
			pebbleFiles++
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 || pebbleFiles < 3 {
		t.Fatalf("only %d files and directories in the store, %d of Pebble's", n, pebbleFiles)
	}
}

// TestSnapshotRetention: Pebble keeps the first snapshot of each window,
// not one per SnapshotEvery atoms; the latest is the run's frame file,
// which Close wrote, not a second copy in Pebble; and StateAt still reaches
// every seq.
func TestSnapshotRetention(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	opts.SnapshotEvery = 100
	db := openTest(t, fs, opts)
	// Which snapshots the background takes depends on how fast it runs
	// beside the commits: on a busy machine the job an atom queues runs
	// hundreds of atoms later (Pebble opens late, the jobs of many seqs
	// coalesce into one), and a window of 1000 seqs can go without a
	// snapshot. So after each atom the test waits until the snapshot it
	// made due, if any, is taken: the snapshots are those of the policy,
	// whatever the machine's load.
	for range 2600 {
		waitSnapshotIdle(t, commitN(t, db, "r", 1))
	}
	if err := db.Close(); err != nil { // the final checkpoint snapshots too
		t.Fatal(err)
	}
	db2 := openTest(t, fs, opts)
	seqs := snapshotSeqs(t, db2, "r")
	t.Logf("snapshots kept: %v", seqs)
	// Windows of 1000 seqs: the first snapshot of [1000,2000) and of
	// [2000,3000) are kept; every other one was dropped (the first
	// window's first is the empty frame at seq 0), and the latest, at
	// 2600, is the frame file's alone.
	if len(seqs) != 2 || seqs[0] < 1000 || seqs[0] >= 2000 || seqs[1] < 2000 || seqs[1] >= 2600 {
		t.Fatalf("snapshots kept: %v; want the first of each window of 1000 seqs after the first, none at 2600 (the frame file's)", seqs)
	}
	if ff := readFrameFileOf(t, fs, db2, "r"); ff.Seq != 2600 {
		t.Fatalf("the frame file is at seq %d, want 2600", ff.Seq)
	}
	run2, _ := db2.Run(ctx, "r")
	for _, seq := range []uint64{1, 999, 1000, 1500, 2599} {
		f, err := run2.StateAt(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Messages) != int(seq) {
			t.Fatalf("StateAt(%d) has %d messages", seq, len(f.Messages))
		}
	}
}

// TestFirstWindowKeepsNoSnapshot: in the first retention window the empty
// frame at seq 0 is the window's first, so each snapshot is dropped once
// a newer one (or the frame file of an engine checkpoint) replaces it: a
// run of fewer than 1,000 atoms keeps no snapshot at rest, and StateAt in
// it replays from seq 0.
func TestFirstWindowKeepsNoSnapshot(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	opts.SnapshotEvery = 40
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	snapshotsOf := func(db *DB) []uint64 { return snapshotSeqs(t, db, "r") }
	var run *Run
	latestOnly := func() {
		t.Helper()
		first := run.LastSeq()
		for range 100 {
			run = commitN(t, db, "r", 1)
			waitSnapshotIdle(t, run)
		}
		if seqs := snapshotsOf(db); len(seqs) != 1 || seqs[0] <= first || seqs[0] > run.LastSeq() {
			t.Fatalf("snapshots at seq %d: %v, want the latest only, after %d", run.LastSeq(), seqs, first)
		}
	}
	run, err = db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	latestOnly()
	if err := db.checkpoint(false); err != nil {
		t.Fatal(err)
	}
	if seqs := snapshotsOf(db); len(seqs) != 0 {
		t.Fatalf("snapshots after a checkpoint at seq %d: %v, want none (the frame file is the latest)", run.LastSeq(), seqs)
	}
	latestOnly()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, fs, opts)
	if seqs := snapshotsOf(db); len(seqs) != 0 {
		t.Fatalf("snapshots after a reopen: %v, want none", seqs)
	}
	if run, err = db.Run(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 45, 150, 199} {
		f, err := run.StateAt(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Messages) != int(seq) || f.Messages[seq-1].Content != fmt.Sprint("atom ", seq) {
			t.Fatalf("StateAt(%d): %d messages", seq, len(f.Messages))
		}
	}
}

// snapshotSeqs returns the seqs of run's snapshots in db's snapshot store.
func snapshotSeqs(t *testing.T, db *DB, run string) []uint64 {
	t.Helper()
	snaps, err := db.snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := snaps.Snapshots(run)
	if err != nil {
		t.Fatal(err)
	}
	return seqs
}

// readFrameFileOf reads and parses run's frame file in db's store.
func readFrameFileOf(t *testing.T, fs vfs.FS, db *DB, run string) *layout.FrameFile {
	t.Helper()
	name := db.frameFileName(run)
	b, err := layout.ReadFile(fs, name)
	if err != nil {
		t.Fatal(err)
	}
	ff, err := layout.ParseFrameFile(name, b)
	if err != nil {
		t.Fatal(err)
	}
	return ff
}

// openCountFS counts the opens of one file.
type openCountFS struct {
	vfs.FS
	name string
	n    atomic.Int64
}

func (fs *openCountFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	if name == fs.name {
		fs.n.Add(1)
	}
	return fs.FS.Open(name, opts...)
}

// TestStateAtFromFrameFile: the frame file is a run's newest snapshot. A
// checkpoint writes the frame there and not in Pebble too, and StateAt of
// a seq at or past it starts from the file (it reads it), not from an
// older snapshot, and gives the frame the log gives.
func TestStateAtFromFrameFile(t *testing.T) {
	mem := vfs.NewMem()
	// The name is set before Open: Pebble's goroutines open files through fs.
	fs := &openCountFS{FS: mem, name: mem.PathJoin("store", layout.FramesDir, layout.FrameFileBase("r"))}
	opts := testOptions(fs)
	opts.SnapshotEvery = 40
	db := openTest(t, fs, opts)
	for range 120 {
		waitSnapshotIdle(t, commitN(t, db, "r", 1))
	}
	if err := db.checkpoint(false); err != nil {
		t.Fatal(err)
	}
	if fs.name != db.frameFileName("r") {
		t.Fatalf("the frame file is %s, the test counts the opens of %s", db.frameFileName("r"), fs.name)
	}
	if ff := readFrameFileOf(t, fs, db, "r"); ff.Seq != 120 {
		t.Fatalf("the frame file is at seq %d, want 120", ff.Seq)
	}
	// 40 was dropped by the snapshot at 80 (the first window's first is
	// the empty frame at seq 0), 80 by the checkpoint, and 120 is the
	// frame file's only.
	if seqs := snapshotSeqs(t, db, "r"); len(seqs) != 0 {
		t.Fatalf("snapshots %v, want none", seqs)
	}
	run := commitN(t, db, "r", 10) // 121..130, none of them in a snapshot
	for _, seq := range []uint64{120, 125, 129} {
		before := fs.n.Load()
		f, err := run.StateAt(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if fs.n.Load() == before {
			t.Errorf("StateAt(%d) did not read the frame file at seq 120", seq)
		}
		if len(f.Messages) != int(seq) {
			t.Fatalf("StateAt(%d) has %d messages", seq, len(f.Messages))
		}
	}
	// Below the file, StateAt starts from seq 0, not the file.
	before := fs.n.Load()
	if f, err := run.StateAt(ctx, 119); err != nil || len(f.Messages) != 119 {
		t.Fatalf("StateAt(119): %v", err)
	}
	if fs.n.Load() != before {
		t.Errorf("StateAt(119) read the frame file at seq 120")
	}

	// A damaged frame file is not used: StateAt starts from seq 0
	// instead, and gives the log's frame all the same.
	name := db.frameFileName("r")
	b, err := layout.ReadFile(mem, name)
	if err != nil {
		t.Fatal(err)
	}
	good := bytes.Clone(b)
	b[len(b)/2] ^= 0xff
	if err := layout.WriteFileAtomic(mem, name, b, true); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{120, 127} {
		f, err := run.StateAt(ctx, seq)
		if err != nil {
			t.Fatalf("StateAt(%d) with the frame file damaged: %v", seq, err)
		}
		if len(f.Messages) != int(seq) || f.Messages[seq-1].Content != fmt.Sprint("atom ", seq) {
			t.Fatalf("StateAt(%d) with the frame file damaged: %d messages, last %q", seq, len(f.Messages), f.Messages[len(f.Messages)-1].Content)
		}
	}
	if err := layout.WriteFileAtomic(mem, name, good, true); err != nil {
		t.Fatal(err)
	}
}

// waitSnapshotIdle waits until no snapshot of run is due: the one its
// last commit made due, if any, has been taken. It waits for a state, not
// for a time it hopes is enough, and fails the test after a minute, or at
// once if the background failed.
func waitSnapshotIdle(t *testing.T, run *Run) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		run.mu.Lock()
		last, snap := run.mu.lastSeq, run.mu.book.SnapSeq
		due := run.mu.book.SnapQueued || last > snap && run.snapshotDueLocked(int(last-snap))
		run.mu.Unlock()
		if !due {
			return
		}
		if err := run.db.backgroundErr(); err != nil {
			t.Fatalf("waiting for the snapshot due at seq %d: %v", last, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the snapshot due at seq %d was not taken after a minute (latest at %d)", last, snap)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestCloseUnchangedKeepsCheckpoint: a store opened from a checkpoint and
// closed without a write keeps its CHECKPOINT byte for byte (Close writes
// no checkpoint, loads no ledger table, opens no snapshot store); one write
// makes Close checkpoint again, with nothing left to replay.
func TestCloseUnchangedKeepsCheckpoint(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	seedStore(t, opts, "r", 3)
	before, err := layout.ReadFile(fs, "store/"+layout.CheckpointName)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		db, err := Open("store", opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		after, err := layout.ReadFile(fs, "store/"+layout.CheckpointName)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Fatalf("reopen %d: Close rewrote CHECKPOINT of a store it did not change", i)
		}
	}
	db := openTest(t, fs, opts)
	commitN(t, db, "r", 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	after, _ := layout.ReadFile(fs, "store/"+layout.CheckpointName)
	if bytes.Equal(before, after) {
		t.Fatal("Close after a commit kept the old CHECKPOINT")
	}
	db2, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if n := db2.Stats().Open.Replayed; n != 0 {
		t.Fatalf("replayed %d records after a clean close", n)
	}
	run, _ := db2.Run(ctx, "r")
	if run.LastSeq() != 4 {
		t.Fatalf("run at seq %d, want 4", run.LastSeq())
	}
}

// TestRunsBuiltOnFirstUse: a restart from a checkpoint builds no run until
// it is used, yet every run is there: counted by Stats, found by Run with
// its seq, head and state, listed by Runs, and kept by the next checkpoint
// whether or not it was used. Concurrent first uses build each run once.
func TestRunsBuiltOnFirstUse(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	const n = 24
	want := map[string]RunInfo{}
	states := map[string]*frame.Frame{}
	for i := range n {
		id := fmt.Sprintf("run-%02d", i)
		run := commitN(t, db, id, i%4)
		want[id], states[id] = run.Info(), run.State()
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for round := range 2 {
		db := openTest(t, fs, opts)
		db.mu.Lock()
		built, lazy := len(db.mu.runs), db.mu.lazy.Left()
		db.mu.Unlock()
		if built != 0 || lazy != n {
			t.Fatalf("round %d: after Open %d runs built, %d not, want 0 and %d", round, built, lazy, n)
		}
		if got := db.Stats().Runs; got != n {
			t.Fatalf("round %d: Stats().Runs = %d, want %d", round, got, n)
		}
		var wg sync.WaitGroup
		got := make([]*Run, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := db.Run(ctx, fmt.Sprintf("run-%02d", i))
				if err != nil {
					t.Error(err)
				}
				got[i] = r
			}()
		}
		wg.Add(1)
		go func() { defer wg.Done(); db.runList() }()
		wg.Wait()
		for i, r := range got {
			id := fmt.Sprintf("run-%02d", i)
			again, _ := db.Run(ctx, id)
			if r != again {
				t.Fatalf("round %d: run %s built twice", round, id)
			}
			w := want[id]
			if r.LastSeq() != w.LastSeq || r.Head() != w.Head {
				t.Fatalf("round %d: run %s at seq %d head %s, want %d %s", round, id, r.LastSeq(), r.Head(), w.LastSeq, w.Head)
			}
			if diff := cmp.Diff(states[id], r.State()); diff != "" {
				t.Fatalf("round %d: run %s state (-want +got):\n%s", round, id, diff)
			}
		}
		infos, err := db.Runs()
		if err != nil || len(infos) != n {
			t.Fatalf("round %d: Runs: %d runs, %v", round, len(infos), err)
		}
		// One run moves; the checkpoint of Close must keep the others.
		if round == 0 {
			run, _ := db.Run(ctx, "run-05")
			commitN(t, db, "run-05", 1)
			w := want["run-05"]
			w.LastSeq, w.Head = run.LastSeq(), run.Head()
			want["run-05"], states["run-05"] = w, run.State()
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
