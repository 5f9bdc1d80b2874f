package engine

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

// randomBytes returns n bytes that do not compress.
func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// TestFrameAtSizeLimitAcrossReopen commits a run's frame up to exactly
// MaxSize, in values that do not compress, reopens the store and reads it
// back (State, StateAt, a new atom); one byte more is refused with
// ErrTooLarge, with nothing written and the log still usable, and a
// shrinking delta then commits.
func TestFrameAtSizeLimitAcrossReopen(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	dir := filepath.Join(t.TempDir(), "store")
	opts := &Options{NoSync: true, Logger: quiet(), SnapshotEvery: 2}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := db.Run(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	commit := func(r *Run, d *frame.Delta) error {
		t.Helper()
		a, err := r.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Commit(ctx, d); err != nil {
			if ferr := a.Fail(ctx, "too large"); ferr != nil {
				t.Fatalf("Fail after a refused Commit: %v", ferr)
			}
			return err
		}
		return nil
	}
	// Two values of 20 MiB, then a third that brings the frame to exactly
	// MaxSize.
	want := newFrame()
	for i, n := range []int{20 << 20, 20 << 20} {
		v := randomBytes(rng, n)
		if err := commit(r, new(frame.Delta).Set(fmt.Sprintf("v%d", i), v)); err != nil {
			t.Fatal(err)
		}
		want.Memory[fmt.Sprintf("v%d", i)] = v
	}
	n := MaxSize - frame.EncodedFrameSize(want) - 8
	for {
		want.Memory["v2"] = make([]byte, n)
		size := frame.EncodedFrameSize(want)
		if size == MaxSize {
			break
		}
		n += MaxSize - size
	}
	v2 := randomBytes(rng, n)
	want.Memory["v2"] = v2
	if err := commit(r, new(frame.Delta).Set("v2", v2)); err != nil {
		t.Fatalf("a delta that brings the frame to exactly MaxSize: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.openInfo.Replayed != 0 {
		t.Errorf("reopen replayed %d records: Close wrote no checkpoint", db.openInfo.Replayed)
	}
	r, err = db.Run(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.StateE()
	if err != nil {
		t.Fatalf("StateE after reopen: %v", err)
	}
	if size := frame.EncodedFrameSize(got); size != MaxSize || !bytes.Equal(got.Memory["v2"], v2) {
		t.Fatalf("frame after reopen: %d bytes, want %d and the same values", size, MaxSize)
	}
	if f, err := r.StateAt(ctx, 3); err != nil || frame.EncodedFrameSize(f) != MaxSize {
		t.Fatalf("StateAt(3) after reopen: %v", err)
	}
	// One byte more: refused, nothing written, the log usable.
	before := db.log.Stats().Appends
	err = commit(r, new(frame.Delta).Set("v3", nil))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), `"big"`) || !strings.Contains(err.Error(), "seq 4") {
		t.Fatalf("a delta past MaxSize: %v, want ErrTooLarge naming the run and seq", err)
	}
	if db.logFailed() != nil {
		t.Fatalf("a refused delta failed the log: %v", db.logFailed())
	}
	if got := db.log.Stats().Appends - before; got != 1 { // the Fail record only
		t.Errorf("a refused delta appended %d records, want only the Fail", got)
	}
	// A delta that shrinks the frame commits.
	if err := commit(r, new(frame.Delta).Delete("v0").Set("v3", []byte("small"))); err != nil {
		t.Fatalf("a shrinking delta at the limit: %v", err)
	}
	if r.LastSeq() != 4 {
		t.Fatalf("last seq %d, want 4", r.LastSeq())
	}
}

// TestOversizedRecordKeepsLog: a delta larger than a record can be (or
// than a segment holds) is refused with ErrTooLarge naming the run, the
// seq and the size; the atom stays running and commits a smaller delta,
// other runs go on, and Close still checkpoints.
func TestOversizedRecordKeepsLog(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem) // 1 MiB segments
	db := openTest(t, mem, opts)
	r, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	other, err := db.Run(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{2 << 20, MaxSize + 1} {
		// Values that do not compress: the record is as large as the value.
		err = a.Commit(ctx, new(frame.Delta).Set("k", randomBytes(rng, n)))
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), `run "r" seq 1`) {
			t.Errorf("a %d-byte value: %v, want ErrTooLarge naming run and seq", n, err)
		}
	}
	if db.logFailed() != nil {
		t.Fatalf("an oversized record failed the log: %v", db.logFailed())
	}
	if err := a.Commit(ctx, msg("small")); err != nil {
		t.Fatalf("the same atom with a small delta: %v", err)
	}
	commitN(t, db, "other", 3)
	_ = other
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	db2, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if n := db2.openInfo.Replayed; n != 0 {
		t.Errorf("reopen replayed %d records: Close skipped its checkpoint", n)
	}
}

// TestDoResultTooLarge: an action too large to record is refused before
// exec; a result too large to certify is certified as failed (not left in
// doubt), and the error says so.
func TestDoResultTooLarge(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, nil) // 1 MiB segments: results up to maxResult
	r, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	exec := func(n int) ledger.Exec {
		return func(context.Context, string) ([]byte, error) {
			calls++
			return bytes.Repeat([]byte{'r'}, n), nil
		}
	}
	blob := randomBytes(rand.New(rand.NewPCG(3, 4)), 2<<20)
	bigArgs := []byte(`{"blob":"` + hex.EncodeToString(blob) + `"}`)
	if _, err := a.Do(ctx, ledger.Action{Tool: "t", Args: bigArgs}, exec(1)); !errors.Is(err, ErrTooLarge) || calls != 0 {
		t.Errorf("an action too large to record: %v, %d exec calls; want ErrTooLarge before exec", err, calls)
	}
	act := ledger.Action{Tool: "fetch", Args: []byte(`{}`), Key: "fetch-1"}
	_, err = a.Do(ctx, act, exec(db.maxResult()+1))
	if !errors.Is(err, ErrTooLarge) || calls != 1 || !strings.Contains(err.Error(), "recorded as failed") {
		t.Fatalf("a result too large to certify: %v (%d exec calls)", err, calls)
	}
	if db.logFailed() != nil {
		t.Fatalf("the log failed: %v", db.logFailed())
	}
	fp, err := act.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := db.ledger.Lookup(fp); !ok || e.Status != ledger.StatusFailed {
		t.Fatalf("the action after a too-large result: %+v, %v; want certified failed", e, ok)
	}
	// Certified failed, not in doubt: Do calls exec again with the same
	// key, and a result at the limit is certified and returned.
	res, err := a.Do(ctx, act, exec(db.maxResult()))
	if err != nil || len(res) != db.maxResult() || calls != 2 {
		t.Fatalf("Do again with a result at the limit: %d bytes, %v, %d exec calls", len(res), err, calls)
	}
	if err := a.Commit(ctx, msg("done")); err != nil {
		t.Fatal(err)
	}
	if d := db.ledger.InDoubt(); len(d) != 0 {
		t.Errorf("actions left in doubt: %v", d)
	}
}
