package engine

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
)

// TestRunEnd: End is final and durable: the status, time and result survive
// a restart (by replay of the log, and through CHECKPOINT after a clean
// Close), Begin and a second End are refused with ErrRunEnded, End with an
// atom in flight is refused, and what End refuses writes nothing.
func TestRunEnd(t *testing.T) {
	for _, clean := range []bool{false, true} {
		t.Run(fmt.Sprint("clean close ", clean), func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			db, err := Open("store", testOptions(mem))
			if err != nil {
				t.Fatal(err)
			}
			run := commitN(t, db, "r", 3)
			a, _ := run.Begin(ctx)
			if err := run.End(ctx, StatusCompleted, nil); !errors.Is(err, ErrAtomInProgress) {
				t.Fatalf("End with an atom in flight: %v, want ErrAtomInProgress", err)
			}
			if err := a.Commit(ctx, msg("four")); err != nil {
				t.Fatal(err)
			}
			for _, s := range []Status{StatusActive, Status(4)} {
				if err := run.End(ctx, s, nil); err == nil {
					t.Fatalf("End(%v) succeeded", s)
				}
			}
			if err := run.End(ctx, StatusCompleted, make([]byte, MaxEndResult+1)); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("End with a result over the limit: %v, want ErrTooLarge", err)
			}
			atomHead := run.Head()
			if err := run.End(ctx, StatusFailed, []byte("gave up")); err != nil {
				t.Fatal(err)
			}
			if run.Status() != StatusFailed || run.LastSeq() != 4 || run.Head() == atomHead {
				t.Fatalf("after End: status %v, last seq %d, head changed %v", run.Status(), run.LastSeq(), run.Head() != atomHead)
			}
			for name, err := range map[string]error{
				"Begin":      func() error { _, err := run.Begin(ctx); return err }(),
				"second End": run.End(ctx, StatusCompleted, nil),
			} {
				if !errors.Is(err, ErrRunEnded) {
					t.Errorf("%s of an ended run: %v, want ErrRunEnded", name, err)
				}
			}
			want := run.Info()
			var fs vfs.FS = mem
			if clean {
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				fs = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
				db.Close()
			}
			db2 := openTest(t, fs, testOptions(fs))
			r2, err := db2.Run(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			got := r2.Info()
			if got.Status != StatusFailed || !bytes.Equal(got.Result, []byte("gave up")) || !got.Ended.Equal(want.Ended) ||
				got.Head != want.Head || got.LastSeq != 4 {
				t.Fatalf("after restart: %+v, want %+v", got, want)
			}
			if _, err := r2.Begin(ctx); !errors.Is(err, ErrRunEnded) {
				t.Fatalf("Begin after restart: %v, want ErrRunEnded", err)
			}
			if f, err := r2.StateE(); err != nil || len(f.Messages) != 4 {
				t.Fatalf("state of the ended run: %v messages, %v", len(f.Messages), err)
			}
		})
	}
}

// TestRunEndVerified: verify checks an end like an atom: a signed store's
// ended runs are reported ended, and an end record whose status or result
// was changed is a broken link at the end's seq.
func TestRunEndVerified(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(nil)
	mem := vfs.NewMem()
	opts := testOptions(mem)
	opts.SigningKey = priv
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	run := commitN(t, db, "r", 2)
	if err := run.End(ctx, StatusCompleted, []byte("shipped")); err != nil {
		t.Fatal(err)
	}
	commitN(t, db, "other", 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true, PublicKey: priv.Public().(ed25519.PublicKey)})
	if err != nil || !rep.OK {
		t.Fatalf("verify: %v, %+v", err, rep)
	}
	for _, rr := range rep.Runs {
		if (rr.RunID == "r") != rr.Ended {
			t.Errorf("run %q reported ended=%v", rr.RunID, rr.Ended)
		}
	}
	// Change the end's status in place: same length, same framing CRC
	// recomputed by rewriting the record through the log's own encoder is
	// not possible, so the damage is made where the CRC stops it least: a
	// second end is appended instead, by a writer that knows the format.
	db, err = Open("store", testOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := db.Run(ctx, "other")
	r.mu.Lock()
	seq, prev := r.mu.lastSeq+1, r.mu.head
	r.mu.Unlock()
	payload := record.AppendEndPayload(nil, record.EndCompleted, 1, []byte("ok"))
	head := db.hasher.Link("other", seq, prev, payload)
	forged := record.AppendEnd(nil, "other", seq, head, record.EndCancelled, 1, []byte("ok")) // status differs from what the head links
	if _, err := db.append(ctx, forged); err != nil {
		t.Fatal(err)
	}
	db.Close()
	rep, err = Verify(ctx, "store", &VerifyOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, f := range rep.Failures {
		if f.RunID == "other" && f.Seq == seq {
			found = true
		}
	}
	if rep.OK || !found {
		t.Fatalf("a forged end status: OK %v, failures %v; want run other seq %d reported", rep.OK, rep.Failures, seq)
	}
}

// TestRunEndPowerLoss cuts the power at every filesystem operation of End,
// in both durability modes: after the restart the run is active at its last
// atom or ended as End said, never anything else; an End that returned nil
// is never lost; and the store verifies.
func TestRunEndPowerLoss(t *testing.T) {
	base := vfs.NewCrashableMem()
	seedStore(t, testOptions(base), "r", 3)
	everyPowerCut(t, 2, 1, "End", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		return endTrial(t, base, mode, pct, target)
	})
}

func endTrial(t *testing.T, base *vfs.MemFS, mode Durability, pct int, target uint64) uint64 {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("crash at op %d: "+format, append([]any{target}, args...)...)
	}
	mem, cut := newPowerCut(base, pct, target)
	opts := testOptions(mem)
	opts.Durability = mode
	opts.FS = errorfs.Wrap(cut.mem, cut)
	acked := false
	if db, err := Open("store", opts); err == nil {
		if run, err := db.Run(ctx, "r"); err == nil {
			acked = run.End(ctx, StatusCompleted, []byte("done")) == nil && !cut.cutBefore()
		}
		db.Close()
	} else if !cut.cutBefore() {
		fail("open: %v", err)
	}
	fs := cut.survivor(mem)
	o := testOptions(fs)
	o.Durability = mode
	db, err := Open("store", o)
	if err != nil {
		fail("reopen: %v", err)
	}
	run, err := db.Run(ctx, "r")
	if err != nil {
		fail("run: %v", err)
	}
	switch info := run.Info(); {
	case info.LastSeq != 3:
		fail("last seq %d, want 3", info.LastSeq)
	case info.Status == StatusActive && acked:
		fail("End returned nil, the run is active after the restart")
	case info.Status == StatusActive:
		if err := run.End(ctx, StatusCompleted, []byte("done")); err != nil {
			fail("End after the restart: %v", err)
		}
	case info.Status != StatusCompleted || string(info.Result) != "done":
		fail("after the restart: status %v result %q", info.Status, info.Result)
	}
	if err := db.Close(); err != nil {
		fail("close: %v", err)
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: true})
	if err != nil || !rep.OK {
		fail("verify: %v %v", err, rep.Failures)
	}
	return cut.n.Load()
}

var _ = chain.Hash{}

// TestRunsByStatus: Runs selects by status; without one it lists all.
func TestRunsByStatus(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, testOptions(mem))
	for i, s := range []Status{StatusActive, StatusCompleted, StatusFailed, StatusCancelled, StatusCompleted} {
		r := commitN(t, db, fmt.Sprint("r", i), 1)
		if s != StatusActive {
			if err := r.End(ctx, s, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(s ...Status) int {
		infos, err := db.Runs(s...)
		if err != nil {
			t.Fatal(err)
		}
		return len(infos)
	}
	if all, done, active, ended := count(), count(StatusCompleted), count(StatusActive), count(StatusFailed, StatusCancelled); all != 5 || done != 2 || active != 1 || ended != 2 {
		t.Fatalf("runs: all %d, completed %d, active %d, failed or cancelled %d", all, done, active, ended)
	}
}

// TestRowForged: RunInfo serves a run's creation time, fork origin and
// end (status, time, result) from CHECKPOINT's row until the run is
// replayed, so the row must say what the log's records say, not only
// carry the right heads: verify reports a row so changed (its checksum
// recomputed), and the reconciliation of the table with the log serves
// the log's word.
func TestRowForged(t *testing.T) {
	for _, forge := range []struct {
		name, run string
		edit      func(*layout.CheckpointRun)
	}{
		{"end result", "r", func(r *layout.CheckpointRun) { r.Result = []byte("refunded") }},
		{"end time", "r", func(r *layout.CheckpointRun) { r.Ended++ }},
		{"end status", "r", func(r *layout.CheckpointRun) { r.Status = uint8(StatusCancelled) }},
		{"creation time", "r", func(r *layout.CheckpointRun) { r.Created -= 3600e9 }},
		{"fork point", "f", func(r *layout.CheckpointRun) { r.ForkedAt = 1 }},
		{"fork genesis", "f", func(r *layout.CheckpointRun) { r.BaseHead[0] ^= 1 }},
	} {
		t.Run(forge.name, func(t *testing.T) {
			mem := vfs.NewMem()
			db, err := Open("store", testOptions(mem))
			if err != nil {
				t.Fatal(err)
			}
			run := commitN(t, db, "r", 2)
			if err := run.End(ctx, StatusCompleted, []byte("shipped")); err != nil {
				t.Fatal(err)
			}
			commitN(t, db, "other", 3)
			if _, err := db.Fork(ctx, "other", 2, "f"); err != nil {
				t.Fatal(err)
			}
			want := map[string]RunInfo{}
			for _, id := range []string{"r", "f"} {
				r, _ := db.Run(ctx, id)
				want[id] = r.Info()
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			forgeCheckpoint(t, mem, func(cp *layout.Checkpoint) {
				var forged bool
				for i := range cp.Runs {
					if cp.Runs[i].ID == forge.run {
						forge.edit(&cp.Runs[i])
						forged = true
					}
				}
				if !forged {
					t.Fatalf("CHECKPOINT does not list run %s", forge.run)
				}
			})

			rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem})
			if err != nil {
				t.Fatal(err)
			}
			var reported bool
			for _, f := range rep.Failures {
				reported = reported || f.RunID == forge.run && f.Kind == chain.KindCheckpointMismatch
			}
			if rep.OK || !reported {
				t.Fatalf("verify of a forged row: OK %v, failures %v; want run %s reported", rep.OK, rep.Failures, forge.run)
			}

			o := testOptions(mem)
			o.Logger = slog.New(slog.DiscardHandler)
			db2, err := Open("store", o)
			if err != nil {
				t.Fatal(err)
			}
			defer db2.Close()
			if err := db2.checkRegistry(); err != nil {
				t.Fatal(err)
			}
			if st := db2.Stats(); !strings.Contains(st.CheckpointMismatch, fmt.Sprintf("%q", forge.run)) {
				t.Errorf("Stats.CheckpointMismatch %q does not name run %s", st.CheckpointMismatch, forge.run)
			}
			infos, err := db2.Runs()
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range infos {
				w, ok := want[got.ID]
				if ok && (got.Status != w.Status || !bytes.Equal(got.Result, w.Result) || !got.Ended.Equal(w.Ended) ||
					!got.Created.Equal(w.Created) || got.Parent != w.Parent || got.ForkedAt != w.ForkedAt || got.Head != w.Head) {
					t.Errorf("after the reconciliation, run %s is %+v; want %+v, as the log says", got.ID, got, w)
				}
			}
		})
	}
}

// TestRowForgedParentDropped: a fork built from its row before the
// reconciliation, whose parent's row was removed from CHECKPOINT, is
// served from its parent once the reconciliation adds the parent back
// from the log (not reported as forked from a run the store lacks).
func TestRowForgedParentDropped(t *testing.T) {
	mem := vfs.NewMem()
	db, err := Open("store", testOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, "other", 3)
	f, err := db.Fork(ctx, "other", 2, "f")
	if err != nil {
		t.Fatal(err)
	}
	want, err := f.StateE()
	if err != nil {
		t.Fatal(err)
	}
	wantBytes := frame.AppendFrame(nil, want)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	forgeCheckpoint(t, mem, func(cp *layout.Checkpoint) {
		var rows []layout.CheckpointRun
		for _, r := range cp.Runs {
			if r.ID != "other" {
				rows = append(rows, r)
			}
		}
		cp.Runs = rows
	})
	// No frame file: the fork's state must come from its parent's history.
	if err := mem.Remove("store/" + layout.FramesDir + "/" + layout.FrameFileBase("f")); err != nil && !layout.NotExist(err) {
		t.Fatal(err)
	}

	o := testOptions(mem)
	o.Logger = slog.New(slog.DiscardHandler)
	db2, err := Open("store", o)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	f2, err := db2.Run(ctx, "f") // listed: built from its row, before the check
	if err != nil {
		t.Fatal(err)
	}
	if err := db2.checkRegistry(); err != nil {
		t.Fatal(err)
	}
	got, err := f2.StateE()
	if err != nil {
		t.Fatalf("state of the fork after the reconciliation: %v", err)
	}
	if !bytes.Equal(frame.AppendFrame(nil, got), wantBytes) {
		t.Fatal("the fork's state differs from its state before Close")
	}
}

// forgeCheckpoint rewrites the store's CHECKPOINT as edit changes it, its
// checksum recomputed: what a forger who knows the format writes.
func forgeCheckpoint(t *testing.T, fs vfs.FS, edit func(*layout.Checkpoint)) {
	t.Helper()
	b, err := layout.ReadFile(fs, "store/CHECKPOINT")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := layout.ParseCheckpoint("CHECKPOINT", b)
	if err != nil {
		t.Fatal(err)
	}
	edit(cp)
	if err := layout.WriteFileAtomic(fs, "store/CHECKPOINT", cp.Marshal(), true); err != nil {
		t.Fatal(err)
	}
}
