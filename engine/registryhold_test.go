package engine

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
)

// holdRegistryCheck holds Open's background check of CHECKPOINT's runs
// back until the test ends (a call that needs it runs it itself).
func holdRegistryCheck(t *testing.T) {
	t.Helper()
	release := make(chan struct{})
	registryCheckHold = func(*DB) { <-release }
	t.Cleanup(func() {
		registryCheckHold = nil
		close(release)
	})
}

// deletedBeforeReplay makes a store whose run "gone" was deleted before
// CHECKPOINT's replay position (its delete record is in the log, not in
// the tail), and reopens it with the background check held back.
func deletedBeforeReplay(t *testing.T, o func(vfs.FS) *Options) *DB {
	t.Helper()
	fs := vfs.NewMem()
	db, err := Open("s", o(fs))
	if err != nil {
		t.Fatal(err)
	}
	commitSets(t, db, "gone", "email", emailSecret)
	if err := mustRun(db, "gone").End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	commitSets(t, db, "kept", "email", emailSecret)
	if err := db.checkpoint(false); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	holdRegistryCheck(t)
	db, err = Open("s", o(fs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if db.reg == nil || db.reg.Checked() {
		t.Fatal("the store did not open from a CHECKPOINT with its check pending: the test is blind")
	}
	return db
}

// TestEraseKeyBeforeRegistryCheck: EraseKey of a run deleted before
// CHECKPOINT's replay position, called before Open's background check
// ran, says the run is deleted (the log's word), not that it is unknown.
func TestEraseKeyBeforeRegistryCheck(t *testing.T) {
	ring := testRing(t, "k1", "k1")
	db := deletedBeforeReplay(t, func(fs vfs.FS) *Options { return erasableOpts(fs, ring) })
	if _, err := db.EraseKey(ctx, "gone", "email", ""); !errors.Is(err, ErrRunDeleted) {
		t.Fatalf("EraseKey of a run deleted before the replay position: %v, want ErrRunDeleted", err)
	}
	if !db.reg.Checked() {
		t.Fatal("EraseKey decided without the check")
	}
	if _, err := db.EraseKey(ctx, "kept", "email", ""); err != nil {
		t.Fatalf("EraseKey of a live run: %v", err)
	}
}

// TestSendBeforeRegistryCheck: a message sent, before Open's background
// check ran, to a run deleted before CHECKPOINT's replay position is
// refused with ErrRunDeleted (the log's word), as after the check.
func TestSendBeforeRegistryCheck(t *testing.T) {
	db := deletedBeforeReplay(t, func(fs vfs.FS) *Options { return &Options{FS: fs, NoSync: true, DictSamples: -1} })
	r := mustRun(db, "kept")
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Send(ctx, "gone", []byte("hi")); !errors.Is(err, ErrRunDeleted) {
		t.Fatalf("Send to a run deleted before the replay position: %v, want ErrRunDeleted", err)
	}
	if err := a.Send(ctx, "new-run", []byte("hi")); err != nil {
		t.Fatalf("Send to a run not created yet: %v", err)
	}
	if err := a.Commit(ctx, new(frame.Delta)); err != nil {
		t.Fatal(err)
	}
}
