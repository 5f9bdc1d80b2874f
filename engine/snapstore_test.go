package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
)

// TestSnapshotStoreCreatedOnNeed: a store whose runs need no snapshot gets
// no snapshot store, neither from the delayed start after Open nor from
// Close's checkpoint, though that checkpoint names a generation; the first
// snapshot due after a reopen creates it, re-indexes the log into it (the
// atoms of the sessions without it included), and from then on it is
// opened like any other. Every seq reads back at every step, and the
// consistency check verifies the store at the end.
func TestSnapshotStoreCreatedOnNeed(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	opts.SnapshotEvery = 50
	opts.Logger = quiet()
	snapDir := fs.PathJoin("store", layout.SnapshotsDir)
	exists := func() bool {
		_, err := fs.Stat(snapDir)
		return err == nil
	}
	checkStates := func(db *DB, run string, last int) {
		t.Helper()
		r, err := db.Run(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		for seq := 1; seq <= last; seq++ {
			f, err := r.StateAt(ctx, uint64(seq))
			if err != nil {
				t.Fatalf("StateAt(%d): %v", seq, err)
			}
			if len(f.Messages) != seq || f.Messages[seq-1].Content != fmt.Sprint("atom ", seq) {
				t.Fatalf("StateAt(%d) has %d messages", seq, len(f.Messages))
			}
		}
	}

	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, "r", 10)
	// Past the delayed start: it opens only a snapshot store that exists.
	time.Sleep(3 * pebbleDelay)
	if exists() {
		t.Fatal("the delayed start after Open created a snapshot store nothing needed")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if exists() {
		t.Fatal("Close created a snapshot store nothing needed")
	}
	if db.Stats().Checkpoints == 0 {
		t.Fatal("Close wrote no checkpoint")
	}

	// A session without snapshots again, from CHECKPOINT: 10 more atoms.
	db, err = Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, "r", 10)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if exists() {
		t.Fatal("the second Close created a snapshot store nothing needed")
	}

	// A snapshot due creates the store, indexing the log's 20 earlier atoms.
	opts.SnapshotEvery = 5
	db, err = Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	run := commitN(t, db, "r", 10)
	waitSnapshotIdle(t, run)
	if !exists() {
		t.Fatal("a snapshot was due and taken, and there is no snapshot store")
	}
	if err := db.Stats().SnapshotStore; err != nil {
		t.Fatalf("snapshot store: %v", err)
	}
	snaps, err := db.snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seqs, err := snaps.Snapshots("r"); err != nil || len(seqs) == 0 || seqs[len(seqs)-1] <= 20 {
		t.Fatalf("snapshots of r: %v, %v; want one past seq 20", seqs, err)
	}
	if _, err := snaps.Positions("r", 1, 20); err != nil {
		t.Fatalf("the atoms of the sessions without a snapshot store were not indexed: %v", err)
	}
	checkStates(db, "r", 30)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// An existing store is opened by the delayed start, as before.
	opts.SnapshotEvery = 50
	db = openTest(t, fs, opts)
	deadline := time.Now().Add(time.Minute)
	for {
		snap, ok, err := db.snaps.Opened()
		if !ok {
			if time.Now().After(deadline) {
				t.Fatal("the delayed start did not open the existing snapshot store within a minute")
			}
			time.Sleep(time.Millisecond)
			continue
		}
		if snap == nil {
			t.Fatalf("the existing snapshot store did not open: %v", err)
		}
		break
	}
	commitN(t, db, "r", 3)
	checkStates(db, "r", 33)
}

// TestForkBeginDuringSnapshotIndex: the first Begin of a fork after a
// reopen builds the fork's frame from its parent's state under the fork's
// lock; when that read is what creates the snapshot store, whose index
// must then be built from the log (a scan that takes every run's lock),
// the read does not wait for it: it reads the log, and Begin returns. (It
// used to wait for the index, which waited for the fork's lock.)
func TestForkBeginDuringSnapshotIndex(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	opts.SnapshotEvery = 50
	opts.Logger = quiet()
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, "src", 8)
	if _, err := db.Fork(ctx, "src", 5, "f"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil { // CHECKPOINT, no snapshot store
		t.Fatal(err)
	}
	db = openTest(t, fs, opts)
	f, err := db.Run(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		a, err := f.Begin(ctx)
		if err == nil {
			err = a.Commit(ctx, msg("atom 6 of f"))
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the fork's first Begin did not return within a minute: it waits for the snapshot store's index, which waits for the fork")
	}
	st := f.State()
	if len(st.Messages) != 6 || st.Messages[5].Content != "atom 6 of f" || st.Messages[4].Content != "atom 5" {
		t.Fatalf("the fork's frame: %d messages", len(st.Messages))
	}
}
