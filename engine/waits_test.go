package engine

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// fakeClock is a wall clock a test moves, forward or back.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func waitOptions(fs vfs.FS, clock *fakeClock) *Options {
	o := testOptions(fs)
	o.Clock = clock.Now
	return o
}

// step commits one atom of r.
func step(t testing.TB, r *Run, k string) {
	t.Helper()
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set(k, []byte(k))); err != nil {
		t.Fatal(err)
	}
}

// readyRuns returns "run/seq/outcome" of db.Ready.
func readyRuns(t testing.TB, db *DB) []string {
	t.Helper()
	ws, err := db.Ready(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%s/%d/%v", w.Run, w.Seq, w.Outcome))
	}
	return out
}

// waitKinds counts the wait, event and wake records of the store's log.
func waitKinds(t testing.TB, fs vfs.FS) map[record.Kind]int {
	t.Helper()
	l, err := wal.Open("store/wal", &wal.Options{FS: fs, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := map[record.Kind]int{}
	c, err := record.NewCursor(l, func(uint64) string { return "seg" }, wal.Pos{}, &record.Decoder{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for c.Next() {
		if k := c.Record().Kind; k >= record.KindWait && k <= record.KindWake {
			n[k]++
		}
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// TestWaitEventDelivered: an event sent during the wait ends it; the run
// is ready until an atom commits after it, across a Fail and a restart,
// and that atom gets the event; then the run is no longer ready, and
// stays so after a restart.
func TestWaitEventDelivered(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{now: t0}
	opts := waitOptions(mem, clock)
	db := openTest(t, mem, opts)
	r := openRun(t, db, "agent")
	step(t, r, "asked")
	w, err := r.Wait(ctx, "approval", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if w.Seq != 1 || w.Outcome != WaitOpen || !w.Deadline.Equal(t0.Add(time.Hour)) || !w.Declared.Equal(t0) {
		t.Fatalf("wait %+v", w)
	}
	if got := readyRuns(t, db); got != nil {
		t.Fatalf("ready before the event: %v", got)
	}
	// A second Wait after the same atom is the same wait; another name is refused.
	if again, err := r.Wait(ctx, "approval", t0.Add(2*time.Hour)); err != nil || again.Seq != 1 || !again.Deadline.Equal(w.Deadline) {
		t.Fatalf("second Wait: %+v, %v", again, err)
	}
	if _, err := r.Wait(ctx, "other", time.Time{}); !errors.Is(err, ErrWaitExists) {
		t.Fatalf("Wait of another name: %v", err)
	}
	// An event of another name is kept, not delivered.
	if res, err := db.SendEvent(ctx, "agent", "noise", "n1", []byte("x")); err != nil || res.Delivered || res.Duplicate {
		t.Fatalf("other event: %+v, %v", res, err)
	}
	clock.Set(t0.Add(time.Minute))
	res, err := db.SendEvent(ctx, "agent", "approval", "human-1", []byte("yes"))
	if err != nil || !res.Delivered {
		t.Fatalf("SendEvent: %+v, %v", res, err)
	}
	if res, err := db.SendEvent(ctx, "agent", "approval", "human-1", []byte("yes")); err != nil || !res.Duplicate || res.Delivered {
		t.Fatalf("repeated SendEvent: %+v, %v", res, err)
	}
	if _, err := db.SendEvent(ctx, "agent", "approval", "human-1", []byte("no")); !errors.Is(err, ErrEventMismatch) {
		t.Fatalf("repeated sender id with another payload: %v", err)
	}
	if got := readyRuns(t, db); !equal(got, []string{"agent/1/delivered"}) {
		t.Fatalf("ready: %v", got)
	}
	// An attempt that fails gets the event again.
	a, _ := r.Begin(ctx)
	got, err := a.WaitOutcome(ctx)
	if err != nil || got.Outcome != WaitDelivered || string(got.Event.Payload) != "yes" || got.Event.Sender != "human-1" || !got.Ended.Equal(t0.Add(time.Minute)) {
		t.Fatalf("WaitOutcome: %+v, %v", got, err)
	}
	if err := a.Fail(ctx, "crashed while acting"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openTest(t, mem, opts)
	if got := readyRuns(t, db); !equal(got, []string{"agent/1/delivered"}) {
		t.Fatalf("ready after a restart: %v", got)
	}
	if _, err := db.SendEvent(ctx, "agent", "approval", "human-1", []byte("no")); !errors.Is(err, ErrEventMismatch) {
		t.Fatalf("repeated sender id after a restart: %v", err)
	}
	r = openRun(t, db, "agent")
	a, _ = r.Begin(ctx)
	got, err = a.WaitOutcome(ctx)
	if err != nil || got.Outcome != WaitDelivered || string(got.Event.Payload) != "yes" {
		t.Fatalf("WaitOutcome after a restart: %+v, %v", got, err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("approved", []byte("yes"))); err != nil {
		t.Fatal(err)
	}
	if got := readyRuns(t, db); got != nil {
		t.Fatalf("ready after the atom took it: %v", got)
	}
	if _, ok, _ := r.CurrentWait(ctx); ok {
		t.Fatal("a current wait after the atom took it")
	}
	db.Close()
	db = openTest(t, mem, opts)
	if got := readyRuns(t, db); got != nil {
		t.Fatalf("ready after the atom took it and a restart: %v", got)
	}
	// The kept event of another name goes to the next wait of its name.
	r = openRun(t, db, "agent")
	w, err = r.Wait(ctx, "noise", time.Time{})
	if err != nil || w.Outcome != WaitDelivered || string(w.Event.Payload) != "x" || w.Seq != 2 {
		t.Fatalf("wait for a kept event: %+v, %v", w, err)
	}
	db.Close()
	if n := waitKinds(t, mem); n[record.KindWait] != 2 || n[record.KindEvent] != 2 || n[record.KindWake] != 0 {
		t.Fatalf("records %v", n)
	}
}

// TestWaitEventBeforeAndAcrossClose: an event sent before the wait, and
// before a close, ends the wait declared after the restart at once; one
// sent while a wait was withdrawn by a commit is kept.
func TestWaitEventBeforeAndAcrossClose(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{now: t0}
	opts := waitOptions(mem, clock)
	db := openTest(t, mem, opts)
	r := openRun(t, db, "r")
	if _, err := db.SendEvent(ctx, "r", "go", "s1", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SendEvent(ctx, "r", "go", "s2", []byte("second")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SendEvent(ctx, "nobody", "go", "s1", nil); !errors.Is(err, ErrNoRun) {
		t.Fatalf("event to no run: %v", err)
	}
	db.Close()
	db = openTest(t, mem, opts)
	r = openRun(t, db, "r")
	w, err := r.Wait(ctx, "go", t0.Add(time.Hour))
	if err != nil || w.Outcome != WaitDelivered || string(w.Event.Payload) != "first" {
		t.Fatalf("wait after a restart: %+v, %v", w, err)
	}
	step(t, r, "took-first")
	// A wait withdrawn by a commit takes nothing more.
	if _, err := r.Wait(ctx, "later", time.Time{}); err != nil {
		t.Fatal(err)
	}
	step(t, r, "went-on")
	if res, err := db.SendEvent(ctx, "r", "later", "s3", []byte("late")); err != nil || res.Delivered {
		t.Fatalf("event for a withdrawn wait: %+v, %v", res, err)
	}
	w, err = r.Wait(ctx, "go", time.Time{})
	if err != nil || w.Outcome != WaitDelivered || string(w.Event.Payload) != "second" {
		t.Fatalf("second wait: %+v, %v", w, err)
	}
	step(t, r, "took-second")
	db.Close()
	db = openTest(t, mem, opts)
	r = openRun(t, db, "r")
	if w, err := r.Wait(ctx, "later", time.Time{}); err != nil || w.Outcome != WaitDelivered || string(w.Event.Payload) != "late" {
		t.Fatalf("kept event after a restart: %+v, %v", w, err)
	}
	if err := r.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SendEvent(ctx, "r", "go", "s9", nil); !errors.Is(err, ErrRunEnded) {
		t.Fatalf("event to an ended run: %v", err)
	}
	if got := readyRuns(t, db); got != nil {
		t.Fatalf("an ended run is ready: %v", got)
	}
}

// TestWaitTimeout: a deadline ends the wait once, as a timeout, also when
// it passed while the store was closed; a clock that moves back neither
// fires it again nor un-ends it; an event after the deadline is kept.
func TestWaitTimeout(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{now: t0}
	opts := waitOptions(mem, clock)
	db := openTest(t, mem, opts)
	r := openRun(t, db, "r")
	if _, err := r.Wait(ctx, "approval", t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	clock.Set(t0.Add(20 * time.Second)) // passes while closed
	db = openTest(t, mem, opts)
	// An event after the deadline: the timeout is recorded first.
	res, err := db.SendEvent(ctx, "r", "approval", "late", []byte("yes"))
	if err != nil || res.Delivered {
		t.Fatalf("event after the deadline: %+v, %v", res, err)
	}
	if got := readyRuns(t, db); !equal(got, []string{"r/0/timed out"}) {
		t.Fatalf("ready: %v", got)
	}
	clock.Set(t0) // back
	db.Close()
	db = openTest(t, mem, opts)
	if got := readyRuns(t, db); !equal(got, []string{"r/0/timed out"}) {
		t.Fatalf("ready after the clock moved back: %v", got)
	}
	r = openRun(t, db, "r")
	w, err := r.WaitEnded(ctx)
	if err != nil || w.Outcome != WaitTimedOut || !w.Ended.Equal(t0.Add(20*time.Second)) {
		t.Fatalf("WaitEnded: %+v, %v", w, err)
	}
	db.Close()
	if n := waitKinds(t, mem); n[record.KindWake] != 1 {
		t.Fatalf("wake records: %v", n)
	}

	// The clock's floor is the latest reading the log holds: a wait whose
	// deadline is before it is due even if the clock reads earlier.
	db = openTest(t, mem, opts)
	r = openRun(t, db, "r")
	step(t, r, "timed-out")
	w, err = r.Sleep(ctx, t0.Add(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !w.Declared.Equal(t0.Add(20 * time.Second)) {
		t.Fatalf("declared at %v, the floor is %v", w.Declared, t0.Add(20*time.Second))
	}
	if got := readyRuns(t, db); !equal(got, []string{"r/1/timed out"}) {
		t.Fatalf("a sleep past the clock's floor: %v", got)
	}
}

// TestSleepOrder: sleeping runs wake in the order of their times, after
// a restart, and only the due ones.
func TestSleepOrder(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{now: t0}
	opts := waitOptions(mem, clock)
	db := openTest(t, mem, opts)
	const n = 50
	for i := range n {
		r := openRun(t, db, fmt.Sprintf("s%02d", i))
		// deadlines t0+1s .. t0+50s, declared out of order
		d := time.Duration((i*7)%n+1) * time.Second
		if _, err := r.Sleep(ctx, t0.Add(d)); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	clock.Set(t0.Add(10 * time.Second))
	db = openTest(t, mem, opts)
	ws, err := db.Ready(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 10 {
		t.Fatalf("%d ready at t0+10s, want 10", len(ws))
	}
	for i, w := range ws {
		if want := t0.Add(time.Duration(i+1) * time.Second); !w.Deadline.Equal(want) || w.Outcome != WaitTimedOut {
			t.Fatalf("ready %d: %+v, want the deadline %v", i, w, want)
		}
	}
	s, err := db.WaitStats(ctx)
	if err != nil || s.Open != n-10 || s.Ready != 10 {
		t.Fatalf("stats %+v, %v", s, err)
	}
}

// TestVerifyWaits: verify checks the wait, event and wake records: each
// rule of offline/verify_waits.go broken by a forged record (with a
// valid link, but one) is reported, and Open refuses a record whose
// link is not its own.
func TestVerifyWaits(t *testing.T) {
	h, err := chain.NewHasher(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		kind record.Kind
		seq  uint64 // from the run's last seq
		w    record.WaitFields
		bad  bool // a wrong link
		want string
	}{
		{"changed field", record.KindWake, 0, record.WaitFields{At: t0.Add(time.Hour).UnixNano(), Reason: record.WakeTimeout}, true, "its link is not the one its fields give"},
		{"second wait", record.KindWait, 0, record.WaitFields{At: t0.Add(time.Second).UnixNano(), Name: "again"}, false, "a second wait after seq 1"},
		{"early timeout", record.KindWake, 0, record.WaitFields{At: t0.Add(time.Second).UnixNano(), Reason: record.WakeTimeout}, false, "a timeout at"},
		{"repeated sender", record.KindEvent, 0, record.WaitFields{At: t0.Add(time.Second).UnixNano(), Name: "ok", Sender: "s1"}, false, `a second event of sender "s1"`},
		{"clock back", record.KindEvent, 0, record.WaitFields{At: t0.Add(-time.Second).UnixNano(), Name: "ok", Sender: "s2"}, false, "its clock went back"},
		{"stale seq", record.KindEvent, 1, record.WaitFields{At: t0.Add(time.Second).UnixNano(), Name: "ok", Sender: "s3"}, false, "after seq 0, and the run's last atom is 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			clock := &fakeClock{now: t0}
			opts := waitOptions(mem, clock)
			db, err := Open("store", opts)
			if err != nil {
				t.Fatal(err)
			}
			r := openRun(t, db, "r")
			step(t, r, "one")
			if _, err := r.Wait(ctx, "ok", t0.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if _, err := db.SendEvent(ctx, "r", "other", "s1", nil); err != nil {
				t.Fatal(err)
			}
			seq, head := r.LastSeq(), r.Head()
			db.Close()
			if rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true}); err != nil || !rep.OK {
				t.Fatalf("the store before the forgery: %v %v", err, rep.Failures)
			}
			if c.seq != 0 {
				seq, head = seq-c.seq, chain.Hash{}
			}
			link := h.Link("r", seq, head, record.AppendWaitPayload(nil, c.kind, &c.w))
			if c.bad {
				link[0] ^= 1
			}
			log, err := wal.Open("store/wal", &wal.Options{FS: mem})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := log.Append(ctx, record.AppendWaitRecord(nil, c.kind, "r", seq, head, link, &c.w)); err != nil {
				t.Fatal(err)
			}
			log.Close()
			rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range rep.Failures {
				found = found || strings.Contains(f.String(), c.want)
			}
			if rep.OK || !found {
				t.Fatalf("verify of a forged %v record: OK %v, failures %v; want one saying %q", c.kind, rep.OK, rep.Failures, c.want)
			}
			if c.bad {
				if db, err := Open("store", opts); err == nil || !errors.Is(err, ErrCorrupt) {
					if db != nil {
						db.Close()
					}
					t.Fatalf("Open of a record whose link is not its own: %v", err)
				}
			}
		})
	}
}

// TestInspectExportWaits: inspect lists a run's waits with their
// outcomes and the events no wait took; export puts on an atom's line
// the wait it took, and on the last atom's line the wait not taken.
func TestInspectExportWaits(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{now: t0}
	opts := waitOptions(mem, clock)
	db := openTest(t, mem, opts)
	r := openRun(t, db, "r")
	step(t, r, "one")
	if _, err := r.Wait(ctx, "approval", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SendEvent(ctx, "r", "approval", "alice", []byte(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	step(t, r, "two")
	if _, err := r.Sleep(ctx, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(2 * time.Second))
	if _, err := db.SendEvent(ctx, "r", "later", "bob", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if got := readyRuns(t, db); !equal(got, []string{"r/2/timed out"}) {
		t.Fatalf("ready %v", got)
	}
	db.Close()
	in, err := Inspect(ctx, "store", &InspectOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	sum, _ := in.Run("r")
	if len(sum.Waits) != 2 || len(sum.PendingEvents) != 1 {
		t.Fatalf("waits %+v, pending %+v", sum.Waits, sum.PendingEvents)
	}
	w0, w1 := sum.Waits[0], sum.Waits[1]
	if w0.Seq != 1 || w0.Name != "approval" || w0.Outcome != "delivered" || !w0.Taken || w0.Event == nil || w0.Event.Sender != "alice" ||
		w1.Seq != 2 || w1.Name != "" || w1.Outcome != "timed out" || w1.Taken || !w1.Ended.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("waits %+v %+v", w0, w1)
	}
	if e := sum.PendingEvents[0]; e.Name != "later" || e.Sender != "bob" || string(e.Payload) != "kept" {
		t.Fatalf("pending %+v", e)
	}
	var b strings.Builder
	if _, err := in.Export(ctx, &b, "r", 0, 0); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], `"waited"`) ||
		!strings.Contains(lines[1], `"waited":{"seq":1,"name":"approval"`) || !strings.Contains(lines[1], `"outcome":"delivered"`) ||
		!strings.Contains(lines[1], `"event":{"name":"approval","sender":"alice","seq":1`) || !strings.Contains(lines[1], `"payload":{"ok":true}`) ||
		!strings.Contains(lines[1], `"wait":{"seq":2,"name":"","declared"`) || !strings.Contains(lines[1], `"outcome":"timed out"`) {
		t.Fatalf("export:\n%s", b.String())
	}
	st := in.Stats()
	kinds := map[string]int64{}
	for _, k := range st.Kinds {
		kinds[k.Kind] = k.Records
	}
	if kinds["wait"] != 2 || kinds["event"] != 2 || kinds["wake"] != 1 {
		t.Fatalf("kinds %v", kinds)
	}
}

// waitRecorder is an Observer that is a WaitObserver too.
type waitRecorder struct {
	recorder
	mu   sync.Mutex
	seen []string
}

func (w *waitRecorder) WaitRecorded(k record.Kind, run string, seq uint64, cur Wait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, fmt.Sprintf("%v %s/%d %v", k, run, seq, cur.Outcome))
}

// TestWaitObserver: an Observer that implements WaitObserver is told of
// each wait, event and wake record once durable, with the wait after it.
func TestWaitObserver(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{now: t0}
	obs := &waitRecorder{}
	opts := waitOptions(mem, clock)
	opts.Observer = obs
	db := openTest(t, mem, opts)
	r := openRun(t, db, "r")
	if _, err := r.Wait(ctx, "a", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SendEvent(ctx, "r", "b", "s1", nil); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(time.Minute))
	if _, err := db.SendEvent(ctx, "r", "a", "s2", nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"wait r/0 open", "event r/0 open", "wake r/0 timed out", "event r/0 timed out"}
	if !equal(obs.seen, want) {
		t.Fatalf("observed %q, want %q", obs.seen, want)
	}
}

// TestWaitsConcurrent: senders post events (each twice, at once) to
// waiting runs while one host goroutine resumes the ready runs: each run
// acts once on its event, each second post is a Duplicate, and no run is
// left ready or waiting.
func TestWaitsConcurrent(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem)
	opts.NoSync = true
	db := openTest(t, mem, opts)
	const n = 64
	for i := range n {
		r := openRun(t, db, fmt.Sprintf("w%02d", i))
		if _, err := r.Wait(ctx, "go", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	var dups, delivered sync.WaitGroup
	var mu sync.Mutex
	nDup, nNew := 0, 0
	for i := range n {
		for range 2 {
			dups.Add(1)
			go func() {
				defer dups.Done()
				res, err := db.SendEvent(ctx, fmt.Sprintf("w%02d", i), "go", "sender", []byte(fmt.Sprint("p", i)))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if res.Duplicate {
					nDup++
				} else {
					nNew++
				}
				mu.Unlock()
			}()
		}
	}
	delivered.Add(1)
	acted := map[string]int{}
	go func() {
		defer delivered.Done()
		for len(acted) < n {
			changed := db.ReadyChanged()
			ws, err := db.Ready(ctx, 0)
			if err != nil {
				t.Error(err)
				return
			}
			for _, w := range ws {
				r := openRun(t, db, w.Run)
				a, err := r.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				got, err := a.WaitOutcome(ctx)
				if err != nil || got.Outcome != WaitDelivered {
					t.Errorf("run %s: %+v %v", w.Run, got, err)
					return
				}
				if err := a.Commit(ctx, new(frame.Delta).Set("got", got.Event.Payload)); err != nil {
					t.Error(err)
					return
				}
				acted[w.Run]++
			}
			if len(acted) < n {
				<-changed
			}
		}
	}()
	dups.Wait()
	delivered.Wait()
	if nDup != n || nNew != n {
		t.Fatalf("%d new, %d duplicates; want %d of each", nNew, nDup, n)
	}
	for i := range n {
		id := fmt.Sprintf("w%02d", i)
		r := openRun(t, db, id)
		if acted[id] != 1 || string(r.State().Memory["got"]) != fmt.Sprint("p", i) || r.LastSeq() != 1 {
			t.Fatalf("run %s acted %d times, on %q", id, acted[id], r.State().Memory["got"])
		}
	}
	if ws, err := db.Ready(ctx, 0); err != nil || len(ws) != 0 {
		t.Fatalf("ready at the end: %v %v", ws, err)
	}
}

// TestWaitsEncrypted: in an encrypted store an event's payload is sealed
// in the log (the plaintext is nowhere in it) and delivered opened, also
// after a restart; a deleted run's waits and events go with it.
func TestWaitsEncrypted(t *testing.T) {
	mem := vfs.NewMem()
	opts := encOpts(mem, testRing(t, "k1", "k1"))
	clock := &fakeClock{now: t0}
	opts.Clock = clock.Now
	db := openTest(t, mem, opts)
	r := openRun(t, db, "r")
	secret := "the-approval-code-4711"
	if _, err := db.SendEvent(ctx, "r", "approval", "h", []byte(secret)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	segs, err := mem.List("store/wal")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		f, err := mem.Open("store/wal/" + s)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		b := make([]byte, st.Size())
		f.ReadAt(b, 0)
		f.Close()
		if strings.Contains(string(b), secret) {
			t.Fatalf("segment %s holds the event's payload in plain text", s)
		}
	}
	db = openTest(t, mem, opts)
	r = openRun(t, db, "r")
	w, err := r.Wait(ctx, "approval", time.Time{})
	if err != nil || w.Outcome != WaitDelivered || string(w.Event.Payload) != secret {
		t.Fatalf("wait in an encrypted store: %+v %v", w, err)
	}
	if err := r.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DeleteRuns(ctx, DeleteOptions{IDs: []string{"r"}, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SendEvent(ctx, "r", "approval", "h2", nil); !errors.Is(err, ErrRunDeleted) {
		t.Fatalf("event to a deleted run: %v", err)
	}
	if got := readyRuns(t, db); got != nil {
		t.Fatalf("a deleted run is ready: %v", got)
	}
}

// TestWaitingHoldsNoGoroutine: runs that wait, for events or the clock,
// hold no goroutine.
func TestWaitingHoldsNoGoroutine(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem)
	opts.NoSync = true
	db := openTest(t, mem, opts)
	openRun(t, db, "first")
	if _, err := db.Ready(ctx, 0); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	const n = 500
	for i := range n {
		r := openRun(t, db, fmt.Sprint("w", i))
		var err error
		if i%2 == 0 {
			_, err = r.Wait(ctx, "e", time.Now().Add(time.Hour))
		} else {
			_, err = r.Sleep(ctx, time.Now().Add(time.Hour))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	_ = db.ReadyChanged() // arms the one timer of the earliest deadline
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Fatalf("%d goroutines before %d runs waited, %d after", before, n, after)
	}
	if s, err := db.WaitStats(ctx); err != nil || s.Open != n {
		t.Fatalf("stats %+v %v", s, err)
	}
}

// TestWaitRecordsRaceEndAndBranches: events sent while runs end, and
// while branches commit, are in the log where their seq and head say
// (verify passes, in openTest's cleanup): an end waits for a wait
// record being written, and an event follows a branch's record appended
// before it.
func TestWaitRecordsRaceEndAndBranches(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem)
	opts.NoSync = true
	db := openTest(t, mem, opts)
	const n = 24
	var wg sync.WaitGroup
	for i := range n {
		id := fmt.Sprint("r", i)
		r := openRun(t, db, id)
		if _, err := r.Wait(ctx, "e", time.Time{}); err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			for k := range 4 {
				_, err := db.SendEvent(ctx, id, "e", fmt.Sprint("s", k), nil)
				if err != nil && !errors.Is(err, ErrRunEnded) {
					t.Error(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				if err := r.End(ctx, StatusCompleted, nil); err != nil {
					t.Error(err)
				}
				return
			}
			for k := range 3 {
				b, err := r.Branch(ctx, fmt.Sprint("b", k))
				if err != nil {
					t.Error(err)
					return
				}
				if err := b.Commit(ctx, new(frame.Delta).Set(fmt.Sprint("k", k), []byte("v"))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestCancelWait: a cancelled wait ends as WaitCancelled, once, is not
// ready, takes no event after (kept for the next wait of its name), and
// is cancelled still after a restart; NextDeadline follows the open
// waits.
func TestCancelWait(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{now: t0}
	opts := waitOptions(mem, clock)
	db := openTest(t, mem, opts)
	r := openRun(t, db, "r")
	if _, err := r.CancelWait(ctx); !errors.Is(err, ErrNoWait) {
		t.Fatalf("CancelWait without a wait: %v", err)
	}
	if _, err := r.Wait(ctx, "go", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if at, ok, err := db.NextDeadline(ctx); err != nil || !ok || !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("NextDeadline %v %v %v", at, ok, err)
	}
	w, err := r.CancelWait(ctx)
	if err != nil || w.Outcome != WaitCancelled || !w.Ended.Equal(t0) {
		t.Fatalf("CancelWait: %+v %v", w, err)
	}
	if again, err := r.CancelWait(ctx); err != nil || again.Outcome != WaitCancelled {
		t.Fatalf("a second CancelWait: %+v %v", again, err)
	}
	if _, ok, _ := db.NextDeadline(ctx); ok {
		t.Fatal("a deadline after the cancel")
	}
	if res, err := db.SendEvent(ctx, "r", "go", "s1", []byte("late")); err != nil || res.Delivered {
		t.Fatalf("event after the cancel: %+v %v", res, err)
	}
	if got := readyRuns(t, db); got != nil {
		t.Fatalf("ready after a cancel: %v", got)
	}
	if w, err := r.WaitEnded(ctx); err != nil || w.Outcome != WaitCancelled {
		t.Fatalf("WaitEnded: %+v %v", w, err)
	}
	db.Close()
	if n := waitKinds(t, mem); n[record.KindWake] != 1 {
		t.Fatalf("wake records %v", n)
	}
	db = openTest(t, mem, opts)
	r = openRun(t, db, "r")
	if w, ok, err := r.CurrentWait(ctx); err != nil || !ok || w.Outcome != WaitCancelled {
		t.Fatalf("after a restart: %+v %v %v", w, ok, err)
	}
	step(t, r, "went-on")
	if w, err := r.Wait(ctx, "go", time.Time{}); err != nil || w.Outcome != WaitDelivered || string(w.Event.Payload) != "late" {
		t.Fatalf("the next wait: %+v %v", w, err)
	}
}
