package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/google/go-cmp/cmp"
)

// Tests named after the invariants of DESIGN.md that are not covered by
// the whole-engine crash test (crash_test.go: I1-I4 under random crashes)
// or the fault tests (faults_test.go: I8).

// commitN commits n atoms, each with one Do, and returns the run.
func commitN(t *testing.T, db *DB, id string, n int) *Run {
	t.Helper()
	run, err := db.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var c counter
	for i := 0; i < n; i++ {
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Do(ctx, ledger.Action{Tool: "t", Args: []byte(fmt.Sprintf(`{"run":%q,"i":%d}`, id, i))}, c.exec(fmt.Sprint("r", i))); err != nil {
			t.Fatal(err)
		}
		if err := a.Commit(ctx, msg(fmt.Sprint("atom ", a.Seq()))); err != nil {
			t.Fatal(err)
		}
	}
	return run
}

// seedStore writes n atoms of run id into a new store and closes it
// cleanly.
func seedStore(t *testing.T, opts *Options, id string, n int) {
	t.Helper()
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, id, n)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestI1DurabilityAcrossPowerLoss: what Commit, Do and Resolve acknowledged
// survives a power loss that keeps only synced data.
func TestI1DurabilityAcrossPowerLoss(t *testing.T) {
	mem := vfs.NewCrashableMem()
	db, err := Open("store", testOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	run := commitN(t, db, "r", 7)
	head, state := run.Head(), run.State()
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	db.Close()
	db2 := openTest(t, crashed, testOptions(crashed))
	run2, err := db2.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if run2.LastSeq() != 7 || run2.Head() != head {
		t.Fatalf("after power loss: seq %d head %v, want 7 %v", run2.LastSeq(), run2.Head(), head)
	}
	if diff := cmp.Diff(state, run2.State()); diff != "" {
		t.Fatalf("frame after power loss (-want +got):\n%s", diff)
	}
}

// TestI2AtomAllOrNothing: an atom that was running at a crash (its action
// performed, its commit not reached) is absent afterwards, reported as
// interrupted, and its seq is begun again.
func TestI2AtomAllOrNothing(t *testing.T) {
	mem := vfs.NewCrashableMem()
	db, err := Open("store", testOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	run := commitN(t, db, "r", 3)
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	act := ledger.Action{Tool: "email.send", Args: []byte(`{"to":"ops@example.com"}`)}
	if _, err := a.Do(ctx, act, (&counter{}).exec("sent")); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	db.Close()

	db2 := openTest(t, crashed, testOptions(crashed))
	run2, _ := db2.Run(ctx, "r")
	if run2.LastSeq() != 3 {
		t.Fatalf("last seq %d after a crash mid-atom, want 3", run2.LastSeq())
	}
	seq, acts, err := run2.Interrupted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seq != 4 || len(acts) != 1 || acts[0].Status != ledger.StatusDone || acts[0].Tool != "email.send" {
		t.Fatalf("interrupted = %d %+v, want seq 4 with one done email.send", seq, acts)
	}
	if n := db2.Stats().Open.Interrupted; n != 1 {
		t.Errorf("Stats().Open.Interrupted = %d, want 1", n)
	}
	a2, err := run2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a2.Seq() != 4 || !a2.Interrupted() || !a2.Resumed() {
		t.Fatalf("Begin after the crash: seq %d interrupted %v (deprecated Resumed %v), want 4 true", a2.Seq(), a2.Interrupted(), a2.Resumed())
	}
	var c counter
	out, err := a2.Do(ctx, act, c.exec("sent again"))
	if err != nil || string(out) != "sent" || c.count(ledger.DefaultKey("r", 4, 0)) != 0 {
		t.Fatalf("Do of the certified action: %q %v, exec calls %d", out, err, c.count(ledger.DefaultKey("r", 4, 0)))
	}
	if err := a2.Commit(ctx, msg("done")); err != nil {
		t.Fatal(err)
	}
	if seq, _, _ := run2.Interrupted(ctx); seq != 0 {
		t.Errorf("still interrupted at %d after the seq committed", seq)
	}
}

// crashInFlight runs act as the first Do of run "r" in a new store and
// returns the filesystem a power loss left while exec ran (the intent
// durable, no certificate), and the key exec was called with.
func crashInFlight(t *testing.T, act ledger.Action) (crashed *vfs.MemFS, key string) {
	t.Helper()
	mem := vfs.NewCrashableMem()
	db, err := Open("store", testOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	run, _ := db.Run(ctx, "r")
	a, _ := run.Begin(ctx)
	if _, err := a.Do(ctx, act, func(ctx context.Context, k string) ([]byte, error) {
		// The effect happened downstream; the process dies before the
		// certificate is written.
		crashed, key = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}), k
		return []byte("done"), nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	return crashed, key
}

// TestI3InDoubt: an action whose intent is durable but whose certificate is
// not is in doubt after a crash. A non-idempotent one gives ErrInDoubt with
// the key until resolved; an idempotent one is called again with the same
// key. A certified one is never called again.
func TestI3InDoubt(t *testing.T) {
	for _, idempotent := range []bool{false, true} {
		t.Run(fmt.Sprintf("idempotent=%v", idempotent), func(t *testing.T) {
			act := ledger.Action{Tool: "billing.charge", Args: []byte(`{"cents":1200}`), Idempotent: idempotent}
			crashed, firstKey := crashInFlight(t, act)

			db2 := openTest(t, crashed, testOptions(crashed))
			run2, _ := db2.Run(ctx, "r")
			a2, err := run2.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			exec := func(ctx context.Context, key string) ([]byte, error) {
				keys = append(keys, key)
				return []byte("charged"), nil
			}
			out, err := a2.Do(ctx, act, exec)
			if !idempotent {
				var ide *ledger.InDoubtError
				if !errors.As(err, &ide) || !errors.Is(err, ledger.ErrInDoubt) || ide.Key != firstKey {
					t.Fatalf("Do of an in-doubt action: %v, want ErrInDoubt with key %q", err, firstKey)
				}
				if len(keys) != 0 {
					t.Fatalf("exec called for a non-idempotent in-doubt action")
				}
				// An action with other args is not the one in doubt: refused
				// rather than certified (the real one would stay in doubt).
				other := ledger.Action{Tool: act.Tool, Args: []byte(`{"cents":1}`)}
				if err := a2.Resolve(ctx, other, []byte("charged")); !errors.Is(err, ErrNotInDoubt) {
					t.Fatalf("Resolve of an action with other args: %v, want ErrNotInDoubt", err)
				}
				// Contract v1: Resolve with the same action, default key,
				// settles the one Do just reported.
				if err := a2.Resolve(ctx, act, []byte("charged")); err != nil {
					t.Fatalf("Resolve with the default key after the in-doubt Do: %v", err)
				}
				if err := a2.ResolveFailed(ctx, act, "no trace"); !errors.Is(err, ErrNotInDoubt) {
					t.Fatalf("ResolveFailed of the settled action: %v, want ErrNotInDoubt", err)
				}
				// A Do with the key the error carries returns the result.
				act.Key = ide.Key
				if out, err = a2.Do(ctx, act, exec); err != nil {
					t.Fatal(err)
				}
				if len(keys) != 0 {
					t.Fatalf("exec called after Resolve")
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if len(keys) != 1 || keys[0] != firstKey {
					t.Fatalf("idempotent in-doubt action re-executed with keys %q, want [%q]", keys, firstKey)
				}
			}
			if string(out) != "charged" {
				t.Fatalf("result %q", out)
			}
			if err := a2.Commit(ctx, msg("charged")); err != nil {
				t.Fatal(err)
			}
			// Certified now: never called again, even after a restart.
			db2.Close()
			db3 := openTest(t, crashed, testOptions(crashed))
			run3, _ := db3.Run(ctx, "r")
			a3, _ := run3.Begin(ctx)
			calls := len(keys)
			act.Key = firstKey
			if out, err := a3.Do(ctx, act, exec); err != nil || string(out) != "charged" || len(keys) != calls {
				t.Fatalf("certified action after restart: %q %v, exec calls %d -> %d", out, err, calls, len(keys))
			}
		})
	}
}

// TestI5TamperEvidence: records forged with valid framing (what someone
// who can write the files can do) are reported by Verify, naming the run
// and the first bad seq.
func TestI5TamperEvidence(t *testing.T) {
	cases := []struct {
		name  string
		forge func(db *DB, run *Run) // appends forged records after 4 good atoms of run "r"
		kind  chain.Kind
		seq   uint64
	}{
		{"changed delta", func(db *DB, run *Run) {
			// A valid-looking atom 5 whose stored head is not its hash.
			body := record.AppendAtomBody(nil, nil, frame.AppendDelta(nil, msg("forged")))
			head := db.hasher.Link(run.id, 5, run.Head(), record.AppendAtomBody(nil, nil, frame.AppendDelta(nil, msg("original"))))
			db.log.Append(ctx, db.comp.Compress(record.AppendAtomHeader(nil, run.id, 5, head), body, 0))
		}, chain.KindHashMismatch, 5},
		{"skipped seq", func(db *DB, run *Run) {
			body := record.AppendAtomBody(nil, nil, frame.AppendDelta(nil, msg("six")))
			head := db.hasher.Link(run.id, 6, run.Head(), body)
			db.log.Append(ctx, db.comp.Compress(record.AppendAtomHeader(nil, run.id, 6, head), body, 0))
		}, chain.KindSeqGap, 5},
		{"duplicated seq", func(db *DB, run *Run) {
			body := record.AppendAtomBody(nil, nil, frame.AppendDelta(nil, msg("again")))
			head := db.hasher.Link(run.id, 4, run.Head(), body)
			db.log.Append(ctx, db.comp.Compress(record.AppendAtomHeader(nil, run.id, 4, head), body, 0))
		}, chain.KindSeqDuplicate, 4},
		{"certificate changed after the atom", func(db *DB, run *Run) {
			// A second certificate for the fingerprint of atom 4's action,
			// with another result: the atom's hash no longer matches.
			e, _ := db.ledger.Lookup(lastAction(run))
			c, _ := db.readCertificate(e.CertLoc)
			c.Result = []byte("forged result")
			db.log.Append(ctx, db.comp.Compress([]byte{byte(record.KindCert)}, ledger.AppendCertificate(nil, c), 0))
			body := record.AppendAtomBody(nil, nil, frame.AppendDelta(nil, msg("five")))
			head := db.hasher.Link(run.id, 5, run.Head(), body)
			db.log.Append(ctx, db.comp.Compress(record.AppendAtomHeader(nil, run.id, 5, head), body, 0))
		}, chain.KindCorrupt, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			db, err := Open("store", testOptions(fs))
			if err != nil {
				t.Fatal(err)
			}
			run := commitN(t, db, "r", 4)
			commitN(t, db, "other", 3)
			tc.forge(db, run)
			crash(db) // no final checkpoint: the forged records stay in the tail
			rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK {
				t.Fatalf("forged store verified OK")
			}
			var found bool
			for _, f := range rep.Failures {
				if f.RunID == "r" && f.Kind == tc.kind && f.Seq == tc.seq {
					found = true
				}
				if f.RunID == "other" {
					t.Errorf("failure in the untouched run: %s", f)
				}
			}
			if !found {
				t.Fatalf("want %s at run r seq %d, got %v", tc.kind, tc.seq, rep.Failures)
			}
		})
	}
}

// crash stops db the way a killed process does: no final checkpoint, no
// Close of anything but the files and the lock.
func crash(db *DB) {
	db.mu.Lock()
	db.mu.closed = true
	db.closed.Store(true)
	db.mu.Unlock()
	close(db.bg.stop)
	db.bg.wg.Wait()
	db.log.Close()
	db.closeSnapshots()
	db.lock.Close()
}

// lastAction returns the fingerprint of the action of run's last atom.
func lastAction(run *Run) ledger.Fingerprint {
	a := ledger.Action{Tool: "t", Args: []byte(fmt.Sprintf(`{"run":%q,"i":%d}`, run.id, run.LastSeq()-1)), Key: ledger.DefaultKey(run.id, run.LastSeq(), 0)}
	fp, _ := a.Fingerprint()
	return fp
}

// TestI5RestartFiles: the files restart trusts (CHECKPOINT, frame files)
// are checked against the chain too.
func TestI5RestartFiles(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	run := commitN(t, db, "r", 6)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Rewrite the frame file with a different frame, same seq and head.
	name := db.frameFileName(run.id)
	b, _ := layout.ReadFile(fs, name)
	ff, err := layout.ParseFrameFile(name, b)
	if err != nil {
		t.Fatal(err)
	}
	f := newFrame()
	f.Objective = "forged"
	ff.Frame = db.comp.Compress(nil, frame.AppendFrame(nil, f), 0)
	if err := layout.WriteFileAtomic(fs, name, ff.Marshal(), true); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || !strings.Contains(fmt.Sprint(rep.Failures), "frame file differs") {
		t.Fatalf("a forged frame file was not reported: %v", rep.Failures)
	}
}

// TestI6DamagedFiles: damaged store files give a clear error naming the
// file, never a panic.
func TestI6DamagedFiles(t *testing.T) {
	build := func() vfs.FS {
		fs := vfs.NewMem()
		db, err := Open("store", testOptions(fs))
		if err != nil {
			t.Fatal(err)
		}
		commitN(t, db, "r", 40) // enough records to train a dictionary
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return fs
	}
	flip := func(fs vfs.FS, name string, at int) {
		b, err := layout.ReadFile(fs, name)
		if err != nil {
			t.Fatal(err)
		}
		if at < 0 {
			at += len(b)
		}
		b[at] ^= 0x40
		if err := layout.WriteFileAtomic(fs, name, b, true); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		damage func(fs vfs.FS)
		file   string
	}{
		{"STORE", func(fs vfs.FS) { flip(fs, "store/STORE", 20) }, "STORE"},
		{"dictionary", func(fs vfs.FS) {
			names, _ := fs.List("store/dicts")
			if len(names) == 0 {
				t.Fatal("no dictionary was trained")
			}
			flip(fs, "store/dicts/"+names[0], -10)
		}, ".dict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := build()
			tc.damage(fs)
			_, err := Open("store", testOptions(fs))
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.file) {
				t.Fatalf("Open of a store with a damaged %s: %v, want ErrCorrupt naming it", tc.name, err)
			}
		})
	}
	// Derived files are rebuilt from the log instead (derived_test.go).
	for _, tc := range []struct {
		name   string
		damage func(fs vfs.FS)
	}{
		{"CHECKPOINT", func(fs vfs.FS) { flip(fs, "store/CHECKPOINT", 12) }},
		{"CHECKPOINT truncated", func(fs vfs.FS) {
			b, _ := layout.ReadFile(fs, "store/CHECKPOINT")
			layout.WriteFileAtomic(fs, "store/CHECKPOINT", b[:len(b)/2], true)
		}},
		{"frame file", func(fs vfs.FS) {
			names, _ := fs.List("store/frames")
			flip(fs, "store/frames/"+names[0], 30)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := build()
			tc.damage(fs)
			db, err := Open("store", testOptions(fs))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			run, _ := db.Run(ctx, "r")
			if _, err := run.Begin(ctx); err != nil {
				t.Fatalf("Begin after a damaged %s: %v", tc.name, err)
			}
			f, err := run.StateE()
			if err != nil || run.LastSeq() != 40 || f.Messages[len(f.Messages)-1].Content != "atom 40" {
				t.Fatalf("StateE after a damaged %s: %v, last seq %d", tc.name, err, run.LastSeq())
			}
			st := db.Stats()
			if st.Open.CheckpointIgnored == "" && st.FramesRebuilt == 0 {
				t.Fatalf("a damaged %s was neither ignored nor rebuilt: %+v", tc.name, st.Open)
			}
		})
	}
}

// TestI7CorruptionInTheLog: a damaged record before the log's tail is an
// error naming where, at Open (if restart reads it) and in Verify.
func TestI7CorruptionInTheLog(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs)
	opts.RestartTail = -1 // no engine checkpoint: Open replays the whole log
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, "r", 10)
	if end := db.log.End(); end.Offset < 2000 {
		t.Fatalf("log ends at %v: too short to damage its middle", end)
	}
	crash(db)
	names, _ := fs.List("store/wal")
	var seg string
	for _, n := range names {
		if strings.HasSuffix(n, ".wal") {
			seg = "store/wal/" + n
			break
		}
	}
	b, _ := layout.ReadFile(fs, seg)
	b[600] ^= 0xff // inside the first records, well before the tail
	if err := layout.WriteFileAtomic(fs, seg, b, true); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK {
		t.Fatal("Verify passed a log damaged in the middle")
	}
	if _, err := Open("store", opts); err == nil || !strings.Contains(err.Error(), "wal") {
		t.Fatalf("Open of a log damaged in the middle: %v, want an error saying where", err)
	}
}

// TestSnapshotsRebuiltFromLog: Pebble holds only what the log can rebuild.
// If it cannot open, the engine moves it aside and re-indexes; if it opens
// but is older than the engine checkpoint (a crash after such a rebuild
// moved the old one aside and created a new, empty one), it is re-indexed,
// not trusted. Either way StateAt of every seq works again.
func TestSnapshotsRebuiltFromLog(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, fs vfs.FS)
	}{
		{"manifest lost", func(t *testing.T, fs vfs.FS) {
			names, _ := fs.List("store/snapshots")
			removed := 0
			for _, n := range names {
				if strings.HasPrefix(n, "MANIFEST") {
					fs.Remove("store/snapshots/" + n)
					removed++
				}
			}
			if removed == 0 {
				t.Fatal("no manifest to remove")
			}
		}},
		{"empty store behind CHECKPOINT", func(t *testing.T, fs vfs.FS) {
			if err := fs.RemoveAll("store/snapshots"); err != nil {
				t.Fatal(err)
			}
			empty, err := snapshot.Open("store/snapshots", &snapshot.Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			if err := empty.Close(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			opts := testOptions(fs)
			db, err := Open("store", opts)
			if err != nil {
				t.Fatal(err)
			}
			run := commitN(t, db, "r", 12)
			want, _ := run.StateAt(ctx, 7)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			tc.damage(t, fs)
			db2 := openTest(t, fs, opts)
			run2, _ := db2.Run(ctx, "r")
			for seq := uint64(1); seq <= 12; seq++ {
				if _, err := run2.StateAt(ctx, seq); err != nil {
					t.Fatalf("StateAt(%d) after the snapshot store was lost: %v", seq, err)
				}
			}
			got, _ := run2.StateAt(ctx, 7)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("StateAt(7) after the rebuild (-want +got):\n%s", diff)
			}
		})
	}
}

// takeMark removes a store's clean-close mark, as the Open of a process
// that then dies does.
func takeMark(t *testing.T, fs vfs.FS) {
	t.Helper()
	if err := fs.Remove("store/" + layout.CleanName); err != nil {
		t.Fatalf("the seeded store has no clean-close mark: %v", err)
	}
}

// TestOpenSyncsDirectories: entries a previous process left without a
// directory fsync (it died before one, or the fsync failed) are durable
// before Open's first acknowledgement; if their fsync fails, nothing is
// acknowledged and nothing is executed.
func TestOpenSyncsDirectories(t *testing.T) {
	t.Run("durable", func(t *testing.T) {
		mem := vfs.NewCrashableMem()
		opts := testOptions(mem)
		seedStore(t, opts, "r", 2)
		// A process that opened the store (taking its clean-close mark)
		// and died after renaming a file into place, before the fsync of
		// its directory.
		takeMark(t, mem)
		f, err := mem.Create("store/dicts/left-behind", vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		f.Sync()
		f.Close()
		db, err := Open("store", opts)
		if err != nil {
			t.Fatal(err)
		}
		commitN(t, db, "r", 1) // acknowledged: the directories are durable
		crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		db.Close()
		if _, err := crashed.Stat("store/dicts/left-behind"); err != nil {
			t.Fatalf("an entry Open found was lost by a power loss after an acknowledged commit: %v", err)
		}
	})
	t.Run("fsync fails", func(t *testing.T) {
		mem := vfs.NewMem()
		opts := testOptions(mem)
		seedStore(t, opts, "r", 2)
		takeMark(t, mem) // a process that opened the store and died
		var failing atomic.Bool
		failing.Store(true)
		inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
			if failing.Load() && op.Kind == errorfs.OpFileSync && op.Path == "store/dicts" {
				return errorfs.ErrInjected
			}
			return nil
		})
		db := openFaulty(t, opts, inj) // the directory fsyncs do not hold up the restart
		run, err := db.Run(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var c counter
		_, err = a.Do(ctx, ledger.Action{Tool: "pay", Args: []byte(`{"n":3}`)}, c.exec("ok"))
		if !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("Do after a failed directory fsync: %v, want the fsync's error", err)
		}
		if n := len(c.calls); n != 0 {
			t.Fatalf("the action was executed %d times after a failed directory fsync", n)
		}
		if err := db.Close(); err == nil {
			t.Fatal("Close after a failed directory fsync reported no error")
		}
		failing.Store(false)
		db = openTest(t, mem, opts)
		run, err = db.Run(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if run.LastSeq() != 2 {
			t.Fatalf("run at seq %d after the fault is gone, want 2", run.LastSeq())
		}
	})
}

// TestResolveDefaultKeyFirstCall: an agent that knows from Interrupted which
// action was in flight can resolve it with its default key as the atom's
// first call, the index Do had.
func TestResolveDefaultKeyFirstCall(t *testing.T) {
	act := ledger.Action{Tool: "email.send", Args: []byte(`{"to":"ops"}`)}
	crashed, _ := crashInFlight(t, act)

	db2 := openTest(t, crashed, testOptions(crashed))
	run2, _ := db2.Run(ctx, "r")
	a2, err := run2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a2.Resolve(ctx, act, []byte("sent")); err != nil {
		t.Fatalf("Resolve of the in-doubt action as the first call, default key: %v", err)
	}
	var calls int
	out, err := a2.Do(ctx, ledger.Action{Tool: act.Tool, Args: act.Args, Key: ledger.DefaultKey("r", a2.Seq(), 0)},
		func(ctx context.Context, key string) ([]byte, error) { calls++; return nil, nil })
	if err != nil || string(out) != "sent" || calls != 0 {
		t.Fatalf("Do after Resolve: %q %v, exec called %d times", out, err, calls)
	}
	if err := a2.Commit(ctx, msg("sent")); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultKeysSurviveReconciliation: default keys number the atom's Do
// calls with a default key, so whatever an agent calls to settle an
// in-doubt action (Resolve or ResolveFailed with the error's key, a Do
// with that key) shifts no later default key. Otherwise an atom that
// settles action A, runs B and crashes before Commit would run B again
// under another key when it is re-begun: a duplicate effect (I3).
func TestDefaultKeysSurviveReconciliation(t *testing.T) {
	settle := map[string]func(a *Atom, act ledger.Action, e *ledger.InDoubtError, exec ledger.Exec) ([]byte, error){
		"Resolve with the error's key, then Do": func(a *Atom, act ledger.Action, e *ledger.InDoubtError, exec ledger.Exec) ([]byte, error) {
			act.Key = e.Key
			if err := a.Resolve(ctx, act, []byte("sent A")); err != nil {
				return nil, err
			}
			return a.Do(ctx, act, exec)
		},
		"ResolveFailed with the error's key, then Do": func(a *Atom, act ledger.Action, e *ledger.InDoubtError, exec ledger.Exec) ([]byte, error) {
			act.Key = e.Key
			if err := a.ResolveFailed(ctx, act, "no trace downstream"); err != nil {
				return nil, err
			}
			return a.Do(ctx, act, exec)
		},
		"ResolveInDoubt": func(a *Atom, act ledger.Action, e *ledger.InDoubtError, exec ledger.Exec) ([]byte, error) {
			return []byte("sent A"), a.ResolveInDoubt(ctx, e, []byte("sent A"))
		},
		"ResolveInDoubtFailed, then Do with the error's key": func(a *Atom, act ledger.Action, e *ledger.InDoubtError, exec ledger.Exec) ([]byte, error) {
			if err := a.ResolveInDoubtFailed(ctx, e, "no trace downstream"); err != nil {
				return nil, err
			}
			act.Key = e.Key
			return a.Do(ctx, act, exec)
		},
		"Resolve with a default key": func(a *Atom, act ledger.Action, e *ledger.InDoubtError, exec ledger.Exec) ([]byte, error) {
			// Contract v1: the action Do just reported, by tool and args.
			return []byte("sent A"), a.Resolve(ctx, act, []byte("sent A"))
		},
		"ResolveFailed with a default key, then Do with the error's key": func(a *Atom, act ledger.Action, e *ledger.InDoubtError, exec ledger.Exec) ([]byte, error) {
			if err := a.ResolveFailed(ctx, act, "no trace downstream"); err != nil {
				return nil, err
			}
			act.Key = e.Key
			return a.Do(ctx, act, exec)
		},
	}
	for name, settle := range settle {
		t.Run(name, func(t *testing.T) {
			actA := ledger.Action{Tool: "email.send", Args: []byte(`{"to":"ops"}`)}
			actB := ledger.Action{Tool: "billing.charge", Args: []byte(`{"cents":500}`)}
			effects := map[string][]string{} // tool -> keys it was called with
			execOf := func(act ledger.Action) ledger.Exec {
				return func(ctx context.Context, key string) ([]byte, error) {
					effects[act.Tool] = append(effects[act.Tool], key)
					return []byte("sent " + act.Tool), nil
				}
			}

			// 1: A is dispatched; the process dies before its certificate.
			crashed, _ := crashInFlight(t, actA)
			const seq = 1

			// 2: A is in doubt and settled; B runs; the process dies
			// before Commit.
			db2, err := Open("store", testOptions(crashed))
			if err != nil {
				t.Fatal(err)
			}
			run2, _ := db2.Run(ctx, "r")
			a2, _ := run2.Begin(ctx)
			_, err = a2.Do(ctx, actA, execOf(actA))
			var e *ledger.InDoubtError
			if !errors.As(err, &e) {
				t.Fatalf("Do of A after the crash: %v, want an InDoubtError", err)
			}
			if _, err := settle(a2, actA, e, execOf(actA)); err != nil {
				t.Fatalf("settling A: %v", err)
			}
			if _, err := a2.Do(ctx, actB, execOf(actB)); err != nil {
				t.Fatal(err)
			}
			crashed2 := crashed.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			db2.Close()

			// 3: the atom is re-begun and runs A and B again.
			db3 := openTest(t, crashed2, testOptions(crashed2))
			run3, _ := db3.Run(ctx, "r")
			a3, _ := run3.Begin(ctx)
			if a3.Seq() != seq {
				t.Fatalf("re-begun atom has seq %d, want %d", a3.Seq(), seq)
			}
			if _, err := a3.Do(ctx, actA, execOf(actA)); err != nil {
				t.Fatalf("Do of the settled A: %v", err)
			}
			if _, err := a3.Do(ctx, actB, execOf(actB)); err != nil {
				t.Fatal(err)
			}
			if err := a3.Commit(ctx, msg("done")); err != nil {
				t.Fatal(err)
			}
			// B is the atom's second default-key Do, as in a run that never
			// crashed: one effect, under the key of call 1.
			if want := []string{ledger.DefaultKey("r", seq, 1)}; !slices.Equal(effects[actB.Tool], want) {
				t.Fatalf("B called with keys %q, want %q", effects[actB.Tool], want)
			}
		})
	}
}

// TestResolveInDoubtRefusals: ResolveInDoubt settles only the action its
// error names, in the atom that got it, once; a Do of that action then
// returns the result without calling exec.
func TestResolveInDoubtRefusals(t *testing.T) {
	act := ledger.Action{Tool: "db.migrate", Args: []byte(`{"to":7}`)}
	crashed, _ := crashInFlight(t, act)

	db2 := openTest(t, crashed, testOptions(crashed))
	run2, _ := db2.Run(ctx, "r")
	a2, _ := run2.Begin(ctx)
	calls := 0
	exec := func(ctx context.Context, key string) ([]byte, error) { calls++; return []byte("again"), nil }
	_, err := a2.Do(ctx, act, exec)
	var e *ledger.InDoubtError
	if !errors.As(err, &e) || e.Index != 0 || e.Seq != a2.Seq() || e.RunID != "r" {
		t.Fatalf("Do: %v (%+v), want an InDoubtError for call 0 of r seq %d", err, e, a2.Seq())
	}
	other := *e
	other.Seq++
	unknown := *e
	unknown.Fingerprint[0] ^= 1
	for what, bad := range map[string]*ledger.InDoubtError{"nil": nil, "another atom's": &other, "an unknown action's": &unknown} {
		if err := a2.ResolveInDoubt(ctx, bad, []byte("x")); !errors.Is(err, ErrNotInDoubt) {
			t.Errorf("ResolveInDoubt of %s error: %v, want ErrNotInDoubt", what, err)
		}
		if err := a2.ResolveInDoubtFailed(ctx, bad, "x"); !errors.Is(err, ErrNotInDoubt) {
			t.Errorf("ResolveInDoubtFailed of %s error: %v, want ErrNotInDoubt", what, err)
		}
	}
	if err := a2.ResolveInDoubt(ctx, e, []byte("migrated")); err != nil {
		t.Fatal(err)
	}
	if err := a2.ResolveInDoubt(ctx, e, []byte("migrated")); !errors.Is(err, ErrNotInDoubt) {
		t.Fatalf("second ResolveInDoubt: %v, want ErrNotInDoubt", err)
	}
	if out, err := a2.Do(ctx, ledger.Action{Tool: act.Tool, Args: act.Args, Key: e.Key}, exec); err != nil || string(out) != "migrated" || calls != 0 {
		t.Fatalf("Do after ResolveInDoubt: %q %v, exec called %d times", out, err, calls)
	}
	if err := a2.Commit(ctx, msg("migrated")); err != nil {
		t.Fatal(err)
	}
	if err := a2.ResolveInDoubt(ctx, e, []byte("migrated")); !errors.Is(err, ErrAtomDone) {
		t.Fatalf("ResolveInDoubt after Commit: %v, want ErrAtomDone", err)
	}
}

// TestRelaxedCertFailsDuringCheckpoint: in relaxed mode a certificate is
// written after Do returns; a checkpoint waits for such writes before it
// persists the ledger's table. One that fails during that wait leaves the
// certificate in the table without a location: the checkpoint must stop
// (I8), or the persisted table would make every later Do of the action
// fail on a record that does not exist. After a restart without the fault
// the action is in doubt, as its certificate never became durable.
func TestRelaxedCertFailsDuringCheckpoint(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem)
	opts.Durability = Relaxed
	var armed atomic.Bool
	release := make(chan struct{})
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt) &&
			strings.HasPrefix(op.Path, "store/wal/") && armed.CompareAndSwap(true, false) {
			<-release // the certificate's write, held until the checkpoint waits for it
			return errorfs.ErrInjected
		}
		return nil
	})
	db := openFaulty(t, opts, inj)
	run, _ := db.Run(ctx, "r")
	a, _ := run.Begin(ctx)
	act := ledger.Action{Tool: "billing.charge", Args: []byte(`{"cents":700}`)}
	if _, err := a.Do(ctx, act, func(ctx context.Context, key string) ([]byte, error) {
		armed.Store(true) // the intent is durable; the next log write is the certificate
		return []byte("charged"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.waitLedger(ctx); err != nil {
		t.Fatal(err)
	}
	checkpointWaiting = func() { close(release) }
	defer func() { checkpointWaiting = nil }()
	if err := db.checkpoint(false); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("checkpoint while a relaxed certificate failed: %v, want the log's failure", err)
	}
	if err := a.Commit(ctx, msg("charged")); err == nil {
		t.Fatal("Commit after the log failed returned nil")
	}
	db.Close()

	db2 := openTest(t, mem, opts)
	run2, _ := db2.Run(ctx, "r")
	a2, _ := run2.Begin(ctx)
	var c counter
	_, err := a2.Do(ctx, act, c.exec("charged"))
	if !errors.Is(err, ledger.ErrInDoubt) || len(c.calls) != 0 {
		t.Fatalf("Do after the restart: %v (exec called %d times), want ErrInDoubt", err, len(c.calls))
	}
}

// openFaulty opens the store of opts with its filesystem wrapped by inj.
func openFaulty(t *testing.T, opts *Options, inj errorfs.Injector) *DB {
	t.Helper()
	o := *opts
	o.FS = errorfs.Wrap(opts.FS, inj)
	db, err := Open("store", &o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}
