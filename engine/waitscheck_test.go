package engine

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
)

// TestWaitsForgedSound: a WAITS forged so that the engine would use it
// (of CHECKPOINT's generation, its checksums recomputed, its sections
// built from its entries: sound) is found by the check a moment after
// Open, the index rebuilt from the log, and Stats says so; calls that
// write a record of waits or hand an atom its wait's outcome wait for
// the check, so that even with the check held back until they run, the
// engine's answers and the records it writes are the log's. Forged: a
// sleeping run's deadline (in the entry and the deadline section: a
// timeout the log never set), and an event moved from the run it was
// sent to to another one.
func TestWaitsForgedSound(t *testing.T) {
	base := vfs.NewCrashableMem()
	clock := &fakeClock{now: t0}
	db := openTest(t, base, waitOptions(base, clock))
	runs := []string{"sent", "other", "sleeper"}
	for _, id := range runs {
		openRun(t, db, id)
	}
	for _, id := range []string{"sent", "other"} {
		if _, err := mustRun(db, id).Wait(ctx, "approval", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mustRun(db, "sleeper").Sleep(ctx, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SendEvent(ctx, "sent", "approval", "alice", []byte("approved")); err != nil {
		t.Fatal(err)
	}
	want := waitsView(t, db, runs...)
	if err := db.Close(); err != nil { // its checkpoint writes WAITS: the tail is empty
		t.Fatal(err)
	}
	clock.Set(t0.Add(time.Minute))
	file, err := layout.ReadFile(base, "store/"+layout.WaitsName)
	if err != nil {
		t.Fatal(err)
	}
	forge := func(edit func(byID map[string]*layout.WaitsRun)) []byte {
		f, err := layout.ParseWaits("WAITS", file)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]*layout.WaitsRun{}
		for i := range f.Runs {
			byID[f.Runs[i].ID] = &f.Runs[i]
		}
		edit(byID)
		return f.Marshal()
	}
	forged := map[string][]byte{
		"another deadline": forge(func(rs map[string]*layout.WaitsRun) {
			rs["sleeper"].Wait.Deadline = t0.Add(time.Second).UnixNano()
		}),
		"an event moved to another run": forge(func(rs map[string]*layout.WaitsRun) {
			from, to := rs["sent"], rs["other"]
			to.Wait.Outcome, to.Wait.Ended, to.Wait.Event, to.Wait.Ready = from.Wait.Outcome, from.Wait.Ended, from.Wait.Event, from.Wait.Ready
			to.Senders, from.Senders = from.Senders, nil
			from.Wait.Outcome, from.Wait.Ended, from.Wait.Event, from.Wait.Ready = 0, 0, nil, 0
		}),
	}
	for _, held := range []bool{false, true} {
		for what, b := range forged {
			t.Run(fmt.Sprintf("%s/held=%v", strings.ReplaceAll(what, " ", "_"), held), func(t *testing.T) {
				fs := base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
				// A copy for each store: pebble's MemFS, in its invariants
				// builds (-race), flips the bytes of every buffer written to
				// it, to catch callers that reuse one.
				if err := layout.WriteFileAtomic(fs, "store/"+layout.WaitsName, bytes.Clone(b), false); err != nil {
					t.Fatal(err)
				}
				before := waitKinds(t, fs)
				if held {
					holdRegistryCheck(t)
				}
				db, err := Open("store", waitOptions(fs, clock))
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if held && db.reg.WaitsDone() {
					t.Fatal("the check ran before the test could hold it back: the test is blind")
				}
				// The decisions first, then what the store says.
				ready := readyRuns(t, db)
				r := mustRun(db, "other")
				a, err := r.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if w, err := a.WaitOutcome(ctx); !errors.Is(err, ErrWaitNotEnded) {
					t.Fatalf("the atom after run other's wait is handed %+v, %v: want ErrWaitNotEnded (nobody sent it an event)", w, err)
				}
				if err := a.Fail(ctx, "not yet"); err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(ready) != "[sent/0/delivered]" {
					t.Fatalf("Ready after the restart: %v, want [sent/0/delivered]", ready)
				}
				if got := waitsView(t, db, runs...); got != want {
					t.Fatalf("after the restart:\n%s\nwant\n%s", got, want)
				}
				st := db.Stats()
				if st.WaitsMismatch == "" || !strings.Contains(st.WaitsRebuilt, "disagrees with the log") {
					t.Fatalf("Stats: WaitsMismatch %q, WaitsRebuilt %q", st.WaitsMismatch, st.WaitsRebuilt)
				}
				t.Logf("WaitsMismatch: %s", st.WaitsMismatch)
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				if after := waitKinds(t, fs); after[record.KindWake] != before[record.KindWake] || after[record.KindEvent] != before[record.KindEvent] {
					t.Fatalf("records of waits written after the restart: %v, before %v", after, before)
				}
				checkStore(t, fs, waitOptions(fs, clock))
			})
		}
	}
}

// TestWaitsDueBeforeCheck: before the check of WAITS against the log
// ends, a Ready records the due timeouts WAITS gives once each is checked
// against its record in the log (one read per due wait), without waiting
// for the check (the first Ready after a restart costs the due ones);
// a due wait whose record says otherwise makes it wait for the check.
func TestWaitsDueBeforeCheck(t *testing.T) {
	base := vfs.NewCrashableMem()
	clock := &fakeClock{now: t0}
	db := openTest(t, base, waitOptions(base, clock))
	for i := range 4 {
		id := fmt.Sprintf("sleeper%d", i)
		openRun(t, db, id)
		if _, err := mustRun(db, id).Sleep(ctx, t0.Add(time.Duration(i+1)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(2*time.Hour + time.Minute)) // sleeper0 and sleeper1 due
	for _, forged := range []bool{false, true} {
		t.Run(fmt.Sprintf("forged=%v", forged), func(t *testing.T) {
			fs := base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			if forged { // sleeper2's deadline moved to before the clock
				b, err := layout.ReadFile(fs, "store/"+layout.WaitsName)
				if err != nil {
					t.Fatal(err)
				}
				f, err := layout.ParseWaits("WAITS", b)
				if err != nil {
					t.Fatal(err)
				}
				for i := range f.Runs {
					if f.Runs[i].ID == "sleeper2" {
						f.Runs[i].Wait.Deadline = t0.Add(time.Hour).UnixNano()
					}
				}
				if err := layout.WriteFileAtomic(fs, "store/"+layout.WaitsName, f.Marshal(), false); err != nil {
					t.Fatal(err)
				}
			}
			holdRegistryCheck(t)
			db, err := Open("store", waitOptions(fs, clock))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if got := fmt.Sprint(readyRuns(t, db)); got != "[sleeper0/0/timed out sleeper1/0/timed out]" {
				t.Fatalf("Ready: %s", got)
			}
			if checked := db.reg.WaitsDone(); checked != forged {
				t.Fatalf("the check of WAITS ran: %v; want %v (forged %v)", checked, forged, forged)
			}
		})
	}
}
