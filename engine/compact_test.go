package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

// compactStore fills a store whose log GC cannot trim from its start: a
// live run "pin" in the first segment, then "old" (60 atoms, ended:
// wholly dead segments once deleted), then "half" and "mix" committing
// in turns (segments half dead once "half" is deleted), then "live".
// It returns the live runs' frames at every seq.
func compactStore(t testing.TB, db *DB) map[string][]*frame.Frame {
	t.Helper()
	fillRun(t, db, "pin", 2)
	old := fillRun(t, db, "old", 60)
	if err := old.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	half, mix := mustRun(db, "half"), mustRun(db, "mix")
	rng := rand.New(rand.NewPCG(3, 4))
	for range 40 {
		for _, r := range []*Run{half, mix} {
			if err := commitFilled(r, rng); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := half.End(ctx, StatusFailed, nil); err != nil {
		t.Fatal(err)
	}
	fillRun(t, db, "live", 3)
	return liveFrames(t, db)
}

// liveFrames returns the frame at every seq of the runs compactStore
// keeps.
func liveFrames(t testing.TB, db *DB) map[string][]*frame.Frame {
	t.Helper()
	out := map[string][]*frame.Frame{}
	for _, id := range []string{"pin", "mix", "live"} {
		r := mustRun(db, id)
		for seq := uint64(1); seq <= r.LastSeq(); seq++ {
			f, err := r.StateAt(ctx, seq)
			if err != nil {
				t.Fatalf("%s seq %d: %v", id, seq, err)
			}
			out[id] = append(out[id], f)
		}
	}
	return out
}

func sameFrames(t testing.TB, got, want map[string][]*frame.Frame) {
	t.Helper()
	for id, fs := range want {
		if len(got[id]) < len(fs) {
			t.Fatalf("run %s: %d seqs, want at least %d", id, len(got[id]), len(fs))
		}
		for i, f := range fs {
			if !framesEqual(got[id][i], f) {
				t.Fatalf("run %s seq %d differs after compaction", id, i+1)
			}
		}
	}
}

// TestGCCompacts: with a live run holding the log's first segment, GC
// still reclaims the wholly dead segments after it and compacts the half
// dead ones; every live record is read where it was (StateAt of every
// seq, restarts from CHECKPOINT and from the whole log), verify passes and
// names the deleted runs, and a second GC finds nothing.
func TestGCCompacts(t *testing.T) {
	for _, ratio := range []float64{0.3, -1} {
		t.Run(fmt.Sprint("CompactDead=", ratio), func(t *testing.T) {
			mem := vfs.NewMem()
			opts := gcOptions(mem)
			opts.CompactDead = ratio
			db := openTest(t, mem, opts)
			want := compactStore(t, db)
			if _, err := db.DeleteRuns(ctx, DeleteOptions{IDs: []string{"old", "half"}}); err != nil {
				t.Fatal(err)
			}
			size := func() (n int64) {
				for _, s := range db.log.Segments() {
					n += s.Size
				}
				return n
			}
			before := size()
			st, err := db.GC(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Segments != 0 || st.Floor != 1 {
				t.Fatalf("GC removed a prefix the live run %q holds: %+v", "pin", st)
			}
			if st.Emptied < 2 || st.CompactedBytes <= 0 || st.Forgotten == 0 {
				t.Fatalf("GC: %+v; want wholly dead segments emptied and space reclaimed", st)
			}
			// With CompactDead < 0, the one segment compacted that was not
			// wholly dead is the first: "pin" and the start of "old", which
			// would otherwise hold the rest of "old".
			if gone, err := db.log.Reclaimed(1); ratio < 0 && (st.Compacted != st.Emptied+1 || err != nil || len(gone) == 0) {
				t.Fatalf("CompactDead < 0: %+v; segment 1 compacted: %d records removed, %v", st, len(gone), err)
			}
			if ratio > 0 && st.Compacted <= st.Emptied {
				t.Fatalf("CompactDead %v compacted no half-dead segment: %+v", ratio, st)
			}
			if after := size(); after != before-st.CompactedBytes {
				t.Fatalf("log size %d after GC, %d before, %d reclaimed", after, before, st.CompactedBytes)
			}
			sameFrames(t, liveFrames(t, db), want)
			if st2, err := db.GC(ctx); err != nil || st2.Compacted != 0 || st2.Segments != 0 {
				t.Fatalf("second GC: %+v, %v; want nothing to do", st2, err)
			}
			// The runs go on after the compaction.
			if err := commitFilled(mustRun(db, "mix"), rand.New(rand.NewPCG(5, 5))); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
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
				sameFrames(t, liveFrames(t, db2), want)
				for _, id := range []string{"old", "half"} {
					if _, err := db2.Run(ctx, id); !errors.Is(err, ErrRunDeleted) {
						t.Fatalf("Run(%q) after the restart: %v", id, err)
					}
				}
				if err := db2.Close(); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true})
			if err != nil || !rep.OK {
				t.Fatalf("verify after compaction: %v %v", err, rep.Failures)
			}
			// "half" shares every segment with "mix": reclaimed only by a
			// compaction of half-dead segments.
			if len(rep.Deleted) != 2 || rep.Deleted[0].RunID != "half" || rep.Deleted[0].Reclaimed != (ratio > 0) || !rep.Deleted[1].Reclaimed {
				t.Fatalf("verify's deleted runs: %+v", rep.Deleted)
			}
		})
	}
}

// TestGCCompactsDeletedRunSuffix: a deleted run loses only a prefix of
// what is left of it. Its records in a segment that stays (mostly live)
// keep its records after it, even in segments compaction rewrites.
func TestGCCompactsDeletedRunSuffix(t *testing.T) {
	mem := vfs.NewMem()
	opts := gcOptions(mem)
	opts.CompactDead = 0.99 // a segment is compacted only if nearly all dead
	db := openTest(t, mem, opts)
	want := compactStore(t, db)
	if _, err := db.DeleteRuns(ctx, DeleteOptions{IDs: []string{"old", "half"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GC(ctx); err != nil {
		t.Fatal(err)
	}
	// Every record of a deleted run that is left comes after every one
	// that went.
	lastGone := map[string]wal.Pos{}
	for _, s := range db.log.Segments() {
		gone, err := db.log.Reclaimed(s.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gone {
			n, err := layout.ParseReclaimedNote(g.Note)
			if err != nil {
				t.Fatal(err)
			}
			if n.Run != "old" && n.Run != "half" && n.Kind != record.KindStoreHead {
				t.Fatalf("compaction removed a record of run %q (%v) at %v", n.Run, n.Kind, g.Pos)
			}
			lastGone[n.Run] = g.Pos
		}
	}
	if _, ok := lastGone["old"]; !ok {
		t.Fatal("nothing of the deleted run old was reclaimed")
	}
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, db.decoder(true))
	if err != nil {
		t.Fatal(err)
	}
	for c.Next() {
		r := c.Record()
		if p, ok := lastGone[retention.RunOf(r)]; ok && r.Pos.Less(p) && r.Kind != record.KindDelete {
			t.Fatalf("record %v of run %q at %v is kept, one after it at %v went", r.Kind, retention.RunOf(r), r.Pos, p)
		}
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	sameFrames(t, liveFrames(t, db), want)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true}); err != nil || !rep.OK {
		t.Fatalf("verify: %v %v", err, rep.Failures)
	}
}

// TestCompactPowerLoss cuts the power at every filesystem operation of a
// Delete and the GC after it that compacts (the log's first segment is
// held by a live run, so nothing goes by prefix), with a run committing
// beside them, in both durability modes: every acknowledged atom of the
// live runs is there and reads the same frame at every seq, a GC after
// the restart compacts what is left, and the store verifies.
func TestCompactPowerLoss(t *testing.T) {
	base := vfs.NewCrashableMem()
	db, err := Open("store", gcOptions(base))
	if err != nil {
		t.Fatal(err)
	}
	want := compactStore(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	everyPowerCut(t, 4, 1, "the trial", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		return compactTrial(t, base, want, mode, pct, target)
	})
}

func compactTrial(t *testing.T, base *vfs.MemFS, want map[string][]*frame.Frame, mode Durability, pct int, target uint64) uint64 {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("crash at op %d: "+format, append([]any{target}, args...)...)
	}
	mem, cut := newPowerCut(base, pct, target)
	opts := gcOptions(mem)
	opts.Durability = mode
	opts.FS = errorfs.Wrap(cut.mem, cut)
	acked := uint64(3) // the live run's last acknowledged seq
	deleteAcked, gcDone := false, false
	if db, err := Open("store", opts); err == nil {
		done := agentBeside(db, "live", rand.New(rand.NewPCG(1, target)), 4, cut, &acked)
		if _, err := db.DeleteRuns(ctx, DeleteOptions{IDs: []string{"old", "half"}}); err == nil {
			deleteAcked = !cut.cutBefore()
			st, err := db.GC(ctx)
			gcDone = err == nil && st.Compacted > 0 && !cut.cutBefore()
		}
		<-done
		db.Close()
	} else if !cut.cutBefore() {
		fail("open: %v", err)
	}
	fs := cut.survivor(mem)
	o := gcOptions(fs)
	o.Durability = mode
	db, err := Open("store", o)
	if err != nil {
		fail("reopen: %v", err)
	}
	if live, err := db.Run(ctx, "live"); err != nil || live.LastSeq() < acked {
		fail("live run after the restart: %v; %d were acknowledged", err, acked)
	}
	sameFrames(t, liveFrames(t, db), want)
	for _, id := range []string{"old", "half"} {
		switch _, err := db.Run(ctx, id); {
		case errors.Is(err, ErrRunDeleted):
		case err != nil:
			fail("run %s: %v", id, err)
		case deleteAcked:
			fail("DeleteRuns returned nil, run %s is there after the restart", id)
		}
	}
	if !deleteAcked {
		if _, err := db.DeleteRuns(ctx, DeleteOptions{IDs: []string{"old", "half"}}); err != nil && !errors.Is(err, ErrRunDeleted) {
			fail("DeleteRuns after the restart: %v", err)
		}
	}
	if gcDone && !db.log.AnyCompacted() {
		fail("GC returned, no segment is compacted after the restart")
	}
	if st, err := db.GC(ctx); err != nil || !db.log.AnyCompacted() {
		fail("GC after the restart: %+v, %v", st, err)
	}
	sameFrames(t, liveFrames(t, db), want)
	if err := db.Close(); err != nil {
		fail("close: %v", err)
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: true})
	if err != nil || !rep.OK {
		fail("verify: %v %v", err, rep.Failures)
	}
	if len(rep.Deleted) != 2 {
		fail("verify's deleted runs: %+v", rep.Deleted)
	}
	return cut.n.Load()
}

func TestCompactDeadOption(t *testing.T) {
	for _, v := range []float64{1.5, math.NaN()} {
		o := gcOptions(vfs.NewMem())
		o.CompactDead = v
		if _, err := Open("store", o); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "CompactDead") {
			t.Fatalf("Open with CompactDead %v: %v, want ErrInvalidOptions naming it", v, err)
		}
	}
}

// TestGCCompactsSealed: compaction in an encrypted store: the records
// kept are the sealed bytes they were, the live runs' states are intact
// at every seq after a restart, and the store verifies without its
// keyring (the chain over the sealed bytes, the removed records against
// the deletions) and deeply with it.
func TestGCCompactsSealed(t *testing.T) {
	mem := vfs.NewMem()
	opts := gcOptions(mem)
	opts.CompactDead, opts.Keyring = 0.3, testRing(t, "k1", "k1")
	db := openTest(t, mem, opts)
	want := compactStore(t, db)
	if _, err := db.DeleteRuns(ctx, DeleteOptions{IDs: []string{"old", "half"}}); err != nil {
		t.Fatal(err)
	}
	st, err := db.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Compacted == 0 || st.CompactedBytes <= 0 || st.Forgotten == 0 {
		t.Fatalf("GC of an encrypted store: %+v; want segments compacted", st)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	sameFrames(t, liveFrames(t, db2), want)
	if err := db2.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ring := range []*seal.StaticKeyring{nil, opts.Keyring.(*seal.StaticKeyring)} {
		vo := &VerifyOptions{FS: mem, Deep: ring != nil}
		if ring != nil {
			vo.Keyring = ring
		}
		rep, err := Verify(ctx, "store", vo)
		if err != nil || !rep.OK || len(rep.Deleted) != 2 {
			t.Fatalf("verify (keyring %v) after compaction: %v, %+v", ring != nil, err, rep)
		}
	}
}
