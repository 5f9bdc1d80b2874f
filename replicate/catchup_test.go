package replicate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// stepAll runs n atoms of every run of db, recording what was acknowledged.
func stepAll(t *testing.T, db *engine.DB, runs []string, n int, d *downstream, k *acked) {
	t.Helper()
	for _, id := range runs {
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			seq, err := step(run, d)
			if err != nil {
				t.Fatalf("run %s: %v", id, err)
			}
			k.add(run, seq)
		}
	}
}

// closeBoth closes a DB and then its Replicator, which must both succeed.
func closeBoth(t *testing.T, db *engine.DB, r *Replicator) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// finish checks the history of a store at its end: every acknowledged atom
// present, no effect twice, the same frames and heads as runs that never
// failed (after a few more atoms), and a deep verify.
func finish(t *testing.T, r *Replicator, db *engine.DB, dir string, runs []string, d *downstream, k *acked) {
	t.Helper()
	k.check(t, db)
	stepAll(t, db, runs, 3, d, k)
	if dup := d.duplicates(); len(dup) > 0 {
		t.Errorf("duplicate effects: %v", dup)
	}
	n := map[string]uint64{}
	for _, id := range runs {
		run, _ := db.Run(ctx, id)
		n[id] = run.LastSeq()
	}
	converged(t, db, reference(t, runs, n))
	closeBoth(t, db, r)
	rep, err := engine.Verify(ctx, dir, &engine.VerifyOptions{Deep: true})
	if err != nil || !rep.OK {
		t.Errorf("verify of %s: %v %+v", dir, err, rep)
	}
}

// TestCatchUp: a node reopens its own copy of the store. Right after its
// own clean Close the copy is current, and Open reads nothing from the
// stream; after another node wrote, Open reads only that node's messages
// and appends its groups to the copy's log. Nothing acknowledged is lost,
// no effect happens twice, and the store converges with runs that never
// failed.
func TestCatchUp(t *testing.T) {
	c := newCluster(t, true)
	runs := []string{"alpha", "beta"}
	var d downstream
	var k acked
	dira := filepath.Join(t.TempDir(), "a")
	ra, dba := openAt(t, c, "cu", "a", 0, false, dira)
	if p := ra.Restored().Path; p != PathRestored {
		t.Errorf("a new store's first Open: path %q, want %q", p, PathRestored)
	}
	stepAll(t, dba, runs, 30, &d, &k)
	closeBoth(t, dba, ra)

	// The same node again, nobody having written since: current, and not
	// one message of the stream read.
	ra, dba = openAt(t, c, "cu", "a", 0, false, dira)
	if info := ra.Restored(); info.Path != PathCurrent || info.Messages != 0 || info.Groups != 0 {
		t.Errorf("reopen of a current copy: %+v, want path %q with no message read and no group written", info, PathCurrent)
	}
	k.check(t, dba)
	stepAll(t, dba, runs, 5, &d, &k)
	closeBoth(t, dba, ra)

	// Node b takes over in a directory of its own, and writes.
	rb, dbb, _ := open(t, c, "cu", "b", 1, false)
	if p := rb.Restored().Path; p != PathRestored {
		t.Errorf("b's Open of an empty directory: path %q, want %q", p, PathRestored)
	}
	bFence := rb.Restored().Fence
	stepAll(t, dbb, runs, 20, &d, &k)
	closeBoth(t, dbb, rb)

	// a is behind by b's groups: it reads b's messages only.
	ra, dba = openAt(t, c, "cu", "a", 0, false, dira)
	info := ra.Restored()
	t.Logf("catch-up: %+v", info)
	if info.Path != PathCaughtUp || info.Groups == 0 || info.Matched != 0 {
		t.Errorf("reopen of a copy behind the stream: %+v, want path %q with b's groups appended", info, PathCaughtUp)
	}
	if want := int(info.Fence - bFence); info.Messages != want {
		t.Errorf("catch-up read %d messages, want %d: b's fence and what b published, no more", info.Messages, want)
	}
	finish(t, ra, dba, dira, runs, &d, &k)
}

// TestFencedTailCut: a writer is taken over; its next write is durable in
// its own log but refused by the stream (ErrFenced). When that node
// reopens its copy, the records the stream never acknowledged are found
// and cut from its log, never kept, and the copy is caught up: the
// refused atom is absent, nothing acknowledged is lost, no effect happens
// twice, and the store converges.
func TestFencedTailCut(t *testing.T) {
	c := newCluster(t, true)
	runs := []string{"alpha", "beta"}
	for _, bWrites := range []int{0, 4} {
		t.Run(fmt.Sprintf("other writer's atoms=%d", bWrites), func(t *testing.T) {
			var d downstream
			var k acked
			store := fmt.Sprintf("fenced%d", bWrites)
			dira := filepath.Join(t.TempDir(), "a")
			ra, dba := openAt(t, c, store, "a", 0, false, dira)
			stepAll(t, dba, runs, 10, &d, &k)
			rb, dbb, _ := open(t, c, store, "b", 1, true)
			// A write b never makes (the agent is deterministic: b's own
			// next atom of alpha would be the same records, which the copy
			// may then keep as the stream's).
			run, _ := dba.Run(ctx, "alpha")
			a, err := run.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Commit(ctx, new(frame.Delta).Set("fenced", []byte("by b"))); !errors.Is(err, ErrFenced) {
				t.Fatalf("the fenced writer's commit: %v, want ErrFenced", err)
			}
			if err := dba.Close(); err == nil {
				t.Error("Close of a fenced writer's DB succeeded")
			}
			ra.Close()
			stepAll(t, dbb, runs, bWrites, &d, &k)
			closeBoth(t, dbb, rb)

			ra, dba = openAt(t, c, store, "a", 0, false, dira)
			info := ra.Restored()
			t.Logf("reopen of the fenced writer's copy: %+v", info)
			if info.Path != PathCaughtUp || info.Cut == 0 || info.Matched != 0 {
				t.Errorf("reopen of a copy with an unacknowledged tail: %+v, want path %q with its records cut", info, PathCaughtUp)
			}
			k.mu.Lock()
			for _, id := range runs {
				run, err := dba.Run(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if run.LastSeq() != k.seq[id] {
					t.Errorf("run %s: %d atoms after the replacement, %d acknowledged: the refused atom is kept", id, run.LastSeq(), k.seq[id])
				}
			}
			k.mu.Unlock()
			finish(t, ra, dba, dira, runs, &d, &k)
		})
	}
}

// TestOpenRefusesForeignDirectory: Open does not touch a directory that
// holds something but is no copy of a replicated store.
func TestOpenRefusesForeignDirectory(t *testing.T) {
	c := newCluster(t, true)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, dir, c.config("foreign", "a", 0)); !errors.Is(err, errNoMark) {
		t.Fatalf("Open of a directory that is no copy: %v, want errNoMark", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err != nil || string(b) != "mine" {
		t.Errorf("the directory was changed: %q %v", b, err)
	}
}

// TestCopyReplaced: a copy whose log cannot be read from its REPLICA's
// position is not caught up but replaced by a restore from the whole
// stream (set aside, rebuilt, removed), and the store converges.
func TestCopyReplaced(t *testing.T) {
	c := newCluster(t, true)
	runs := []string{"alpha"}
	var d downstream
	var k acked
	dira := filepath.Join(t.TempDir(), "a")
	ra, dba := openAt(t, c, "repl", "a", 0, false, dira)
	stepAll(t, dba, runs, 10, &d, &k)
	closeBoth(t, dba, ra)
	// A mark whose position no record starts at.
	m, err := readMark(dira)
	if err != nil {
		t.Fatal(err)
	}
	m.Pos.Offset += 8
	if err := writeMark(dira, m); err != nil {
		t.Fatal(err)
	}
	ra, dba = openAt(t, c, "repl", "a", 0, false, dira)
	info := ra.Restored()
	t.Logf("%+v", info)
	if info.Path != PathReplaced || !strings.Contains(info.Replaced, "cannot be read") || info.Messages == 0 {
		t.Errorf("reopen of a copy whose log cannot be read from its mark: %+v, want path %q, the whole stream read", info, PathReplaced)
	}
	if _, err := os.Stat(dira + ".replaced"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the replaced copy is left: %v", err)
	}
	finish(t, ra, dba, dira, runs, &d, &k)
}
