package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// The power-loss suite of waits: a run waits for an approval that comes
// during the wait and acts on it (an engine checkpoint, and its WAITS, in
// between), a timer expires, a run takes an event sent before its wait;
// the power is cut at every filesystem operation of that (sampled
// without -long), the survivor resumes it all, with the clock moved back
// to before every deadline, and: each event is delivered to one wait and
// acted on by one atom, each timeout is in the log once, nothing
// acknowledged is lost, and verify passes.

// waitsRound runs the sequence, or resumes it: every step is idempotent
// (a wait after the same atom, a sender id, a commit that is there). acked
// notes what returned without error; cut, if set, stops the round once
// the power is cut.
func waitsRound(db *DB, clock *fakeClock, acked map[string]bool, cut *powerCut) error {
	ack := func(what string, err error) error {
		if err == nil && (cut == nil || !cut.cutBefore()) {
			acked[what] = true
		}
		return err
	}
	// h: asked, waits for an approval, gets it, acts on it.
	h, err := db.Run(ctx, "h")
	if err != nil {
		return err
	}
	if h.LastSeq() == 0 {
		if err := ack("h1", commitKV(h, "asked", "yes")); err != nil {
			return err
		}
	}
	if h.LastSeq() == 1 {
		if _, err := h.Wait(ctx, "approval", t0.Add(time.Hour)); ack("h-wait", err) != nil {
			return err
		}
		if _, err := db.SendEvent(ctx, "h", "approval", "alice", []byte("approved")); ack("h-event", err) != nil {
			return err
		}
		// An engine checkpoint between the event and its taking: WAITS
		// holds the delivered wait, the survivor loads it with the tail.
		if err := db.checkpoint(false); err != nil {
			return err
		}
		a, err := h.Begin(ctx)
		if err != nil {
			return err
		}
		w, err := a.WaitOutcome(ctx)
		if err != nil {
			a.Fail(ctx, err.Error())
			return err
		}
		if w.Outcome != WaitDelivered || string(w.Event.Payload) != "approved" {
			a.Fail(ctx, "wrong outcome")
			return fmt.Errorf("h's wait ended %v with %+v", w.Outcome, w.Event)
		}
		d := new(frame.Delta).Set("acted", []byte(w.Event.Sender+":"+string(w.Event.Payload)))
		if err := ack("h2", a.Commit(ctx, d)); err != nil {
			return err
		}
	}
	// t: sleeps until t0+10s; the clock passes it; the timeout is recorded.
	tr, err := db.Run(ctx, "t")
	if err != nil {
		return err
	}
	if tr.LastSeq() == 0 {
		if _, err := tr.Sleep(ctx, t0.Add(10*time.Second)); ack("t-sleep", err) != nil {
			return err
		}
		clock.Set(t0.Add(20 * time.Second))
		if _, err := db.Ready(ctx, 0); err != nil {
			return err
		}
		w, err := tr.WaitEnded(ctx)
		if ack("t-woke", err) != nil {
			return err
		}
		if w.Outcome != WaitTimedOut {
			return fmt.Errorf("t's sleep ended %v", w.Outcome)
		}
		if err := ack("t1", commitKV(tr, "woke", w.Ended.UTC().Format(time.RFC3339))); err != nil {
			return err
		}
	}
	// e: an event before the wait.
	e, err := db.Run(ctx, "e")
	if err != nil {
		return err
	}
	if e.LastSeq() == 0 {
		if _, err := db.SendEvent(ctx, "e", "go", "s1", []byte("early")); ack("e-event", err) != nil {
			return err
		}
		w, err := e.Wait(ctx, "go", time.Time{})
		if ack("e-wait", err) != nil {
			return err
		}
		if w.Outcome != WaitDelivered || string(w.Event.Payload) != "early" {
			return fmt.Errorf("e's wait %v with %+v", w.Outcome, w.Event)
		}
		if err := ack("e1", commitKV(e, "got", string(w.Event.Payload))); err != nil {
			return err
		}
	}
	return nil
}

func commitKV(r *Run, k, v string) error {
	a, err := r.Begin(ctx)
	if err != nil {
		return err
	}
	if err := a.Commit(ctx, new(frame.Delta).Set(k, []byte(v))); err != nil {
		a.Fail(ctx, err.Error())
		return err
	}
	return nil
}

// waitRecords counts the records of kind k of run in the log of fs.
func waitRecords(t testing.TB, fs vfs.FS, k record.Kind, run string) int {
	t.Helper()
	l, err := wal.Open("store/wal", &wal.Options{FS: fs, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := record.NewCursor(l, func(uint64) string { return "seg" }, wal.Pos{}, &record.Decoder{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := 0
	for c.Next() {
		if r := c.Record(); r.Kind == k && r.Run == run {
			n++
		}
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestWaitsPowerLoss(t *testing.T) {
	base := vfs.NewCrashableMem()
	db, err := Open("store", testOptions(base))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	everyPowerCut(t, 3, 1, "the waits' sequence", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		return waitsTrial(t, base, mode, pct, target)
	})
}

// waitsTrial runs waitsRound on a copy of base with a power cut at
// operation target (none if 0), resumes it on what the cut left with the
// clock moved back, checks it, and returns the operations counted.
func waitsTrial(t *testing.T, base *vfs.MemFS, mode Durability, pct int, target uint64) uint64 {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%v unsynced=%d%%, crash at op %d: "+format, append([]any{mode, pct, target}, args...)...)
	}
	mem, cut := newPowerCut(base, pct, target)
	clock := &fakeClock{now: t0}
	opts := waitOptions(mem, clock)
	opts.Durability = mode
	opts.FS = errorfs.Wrap(cut.mem, cut)
	acked := map[string]bool{}
	if db, err := Open("store", opts); err == nil {
		err := waitsRound(db, clock, acked, cut)
		if err != nil && !cut.cutBefore() && target != 0 {
			fail("round: %v", err)
		}
		db.Close()
	} else if !cut.cutBefore() {
		fail("open: %v", err)
	}
	if target == 0 && len(acked) != 10 {
		fail("the uncut round acknowledged %v", acked)
	}
	fs := cut.survivor(mem)
	clock.Set(t0) // back, before every deadline
	o := waitOptions(fs, clock)
	o.Durability = mode
	db, err := Open("store", o)
	if err != nil {
		fail("reopen: %v", err)
	}
	// Nothing acknowledged is lost.
	h, tr, e := openRun(t, db, "h"), openRun(t, db, "t"), openRun(t, db, "e")
	if acked["h2"] && h.LastSeq() != 2 || acked["t1"] && tr.LastSeq() != 1 || acked["e1"] && e.LastSeq() != 1 {
		fail("acknowledged atoms lost: h %d t %d e %d, acked %v", h.LastSeq(), tr.LastSeq(), e.LastSeq(), acked)
	}
	if acked["t-woke"] && tr.LastSeq() == 0 {
		if w, ok, err := tr.CurrentWait(ctx); err != nil || !ok || w.Outcome != WaitTimedOut {
			fail("an acknowledged timeout is lost with the clock moved back: %+v %v %v", w, ok, err)
		}
	}
	if acked["h-event"] && h.LastSeq() == 1 {
		if w, ok, err := h.CurrentWait(ctx); err != nil || !ok || w.Outcome != WaitDelivered {
			fail("an acknowledged event is not delivered: %+v %v %v", w, ok, err)
		}
	}
	if err := waitsRound(db, clock, map[string]bool{}, nil); err != nil {
		fail("resume: %v", err)
	}
	if got := string(h.State().Memory["acted"]); got != "alice:approved" || h.LastSeq() != 2 {
		fail("h acted on %q at seq %d", got, h.LastSeq())
	}
	if got := string(e.State().Memory["got"]); got != "early" || e.LastSeq() != 1 {
		fail("e got %q at seq %d", got, e.LastSeq())
	}
	if tr.LastSeq() != 1 {
		fail("t at seq %d", tr.LastSeq())
	}
	if ready, err := db.Ready(ctx, 0); err != nil || len(ready) != 0 {
		fail("ready after the resume: %v %v", ready, err)
	}
	if err := db.Close(); err != nil {
		fail("close: %v", err)
	}
	for _, c := range []struct {
		k    record.Kind
		run  string
		want int
	}{{record.KindEvent, "h", 1}, {record.KindWait, "h", 1}, {record.KindWake, "t", 1}, {record.KindWait, "t", 1}, {record.KindEvent, "e", 1}, {record.KindWait, "e", 1}} {
		if n := waitRecords(t, fs, c.k, c.run); n != c.want {
			fail("%d %v records of run %s, want %d", n, c.k, c.run, c.want)
		}
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: true})
	if err != nil || !rep.OK {
		fail("verify: %v %v", err, rep.Failures)
	}
	return cut.n.Load()
}
