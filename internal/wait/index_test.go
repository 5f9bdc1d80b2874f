package wait

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

func rec(k record.Kind, run string, seq uint64, w record.WaitFields) *record.Record {
	return &record.Record{Kind: k, Run: run, Seq: seq, Wait: &w}
}

// listSource is a Source over records in memory.
type listSource []*record.Record

func (s listSource) WaitsFile(uint64) (string, []byte, error) {
	return "", nil, fs.ErrNotExist
}

func (s listSource) Rebuilding(string) {}

func (s listSource) Scan(from wal.Pos, fn func(*record.Record, []byte) error) error {
	for _, r := range s {
		if r.Pos.Less(from) {
			continue
		}
		var p []byte
		if r.Kind == record.KindEvent {
			p = r.Wait.Payload
		}
		if err := fn(r, p); err != nil {
			return err
		}
	}
	return nil
}

func state(x *Index, run string, committed uint64) string {
	w, ok := x.Current(run, committed)
	if !ok {
		return "none"
	}
	s := fmt.Sprintf("%d %q %v", w.Seq, w.Name, w.Outcome)
	if w.Event != nil {
		s += " " + w.Event.Sender
	}
	return s
}

// TestApply: matching in the log's order, kept events, timeouts, taken
// and withdrawn waits; and applying the records again, or loading them,
// gives the same index.
func TestApply(t *testing.T) {
	recs := []*record.Record{
		rec(record.KindEvent, "r", 0, record.WaitFields{At: 1, Name: "a", Sender: "s1", Payload: []byte("early")}),
		rec(record.KindWait, "r", 0, record.WaitFields{At: 2, Name: "a"}),                   // takes s1
		rec(record.KindEvent, "r", 0, record.WaitFields{At: 3, Name: "a", Sender: "s2"}),    // kept: the wait ended
		rec(record.KindWait, "q", 0, record.WaitFields{At: 4, Name: "b", Deadline: 10}),     // open
		rec(record.KindWake, "q", 0, record.WaitFields{At: 11, Reason: record.WakeTimeout}), // ends it
		rec(record.KindEvent, "q", 0, record.WaitFields{At: 12, Name: "b", Sender: "s3"}),   // kept: after the timeout
		rec(record.KindWait, "p", 0, record.WaitFields{At: 13, Name: "c"}),                  // open
		rec(record.KindEvent, "p", 1, record.WaitFields{At: 14, Name: "c", Sender: "s4"}),   // after an atom withdrew it: kept
		rec(record.KindWake, "p", 1, record.WaitFields{At: 15, Reason: record.WakeTimeout}), // of no wait: nothing
		rec(record.KindWait, "r", 1, record.WaitFields{At: 16, Name: "a", Deadline: 100}),   // takes s2
		rec(record.KindWait, "z", 0, record.WaitFields{At: 17, Deadline: 50}),               // a timer
		rec(record.KindWake, "z", 0, record.WaitFields{At: 18, Reason: record.WakeCancel}),  // cancelled
	}
	want := map[string]string{
		"r": `1 "a" delivered s2`, "q": `0 "b" timed out`, "p": "none", "z": `0 "" cancelled`,
	}
	committed := map[string]uint64{"r": 1, "q": 0, "p": 1, "z": 0}
	check := func(x *Index, what string) {
		t.Helper()
		for run, w := range want {
			if got := state(x, run, committed[run]); got != w {
				t.Fatalf("%s: run %s: %s, want %s", what, run, got, w)
			}
		}
		var ready []string
		for _, w := range x.Ready(10) {
			ready = append(ready, w.Run)
		}
		// r's first wait was taken by its second (Apply of a later wait);
		// p's wait was withdrawn but the index learns it from Taken.
		if !slices.Equal(ready, []string{"q", "r"}) {
			t.Fatalf("%s: ready %v", what, ready)
		}
		if x.Now() < 18 {
			t.Fatalf("%s: the clock's floor %d, the log holds 18", what, x.Now())
		}
		if s := x.Stats(); s.Pending != 2 {
			t.Fatalf("%s: %d events kept, want 2 (s3 of q, s4 of p)", what, s.Pending)
		}
	}
	past := func() time.Time { return time.Unix(0, 5) }
	x := New(past)
	if err := x.Load(listSource(recs)); err != nil {
		t.Fatal(err)
	}
	check(x, "load")
	for _, r := range recs { // again: idempotent
		x.Apply(r, nil)
	}
	check(x, "applied twice")
	x.Taken("q", 1)
	if got := state(x, "q", 0); got != "none" {
		t.Fatalf("after Taken: %s", got)
	}
	x.Gone("r")
	if r := x.Ready(10); len(r) != 0 {
		t.Fatalf("ready after Taken and Gone: %v", r)
	}
	if _, ok := x.Sent("r", "s1"); ok {
		t.Fatal("a gone run's senders are kept")
	}
	if d, ok := x.Sent("q", "s3"); !ok || d != Digest("b", nil) {
		t.Fatal("q's sender s3 is not known")
	}
}

// TestDue: Due returns the open waits past a time, earliest first, and
// only those, whatever the order they were declared and ended in.
func TestDue(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	x := New(nil)
	if err := x.Load(listSource(nil)); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	deadlines := map[string]int64{}
	for i := range n {
		run := fmt.Sprintf("r%04d", i)
		d := 1 + rng.Int64N(1000)
		deadlines[run] = d
		x.Apply(rec(record.KindWait, run, 0, record.WaitFields{Name: "e", Deadline: d}), nil)
	}
	// A third end by an event, in random order.
	for i := range n / 3 {
		run := fmt.Sprintf("r%04d", rng.IntN(n))
		if _, ok := deadlines[run]; !ok {
			continue
		}
		x.Apply(rec(record.KindEvent, run, 0, record.WaitFields{Name: "e", Sender: fmt.Sprint("s", i)}), nil)
		delete(deadlines, run)
	}
	for _, now := range []int64{0, 1, 250, 500, 999, 1000, 2000} {
		var want []int64
		for _, d := range deadlines {
			if d <= now {
				want = append(want, d)
			}
		}
		slices.Sort(want)
		got := x.Due(now, n)
		var gotD []int64
		for _, w := range got {
			gotD = append(gotD, w.Deadline)
			if w.Deadline > now || w.Outcome != Open {
				t.Fatalf("now %d: due %+v", now, w)
			}
		}
		if !slices.Equal(gotD, want) {
			t.Fatalf("now %d: due deadlines %v, want %v", now, gotD, want)
		}
		if lim := x.Due(now, 7); len(lim) != min(7, len(want)) {
			t.Fatalf("now %d: Due(7) returned %d", now, len(lim))
		}
	}
	// Timeouts applied in Due's order make Ready that order.
	for _, w := range x.Due(300, n) {
		x.Apply(rec(record.KindWake, w.Run, 0, record.WaitFields{At: 300, Reason: record.WakeTimeout}), nil)
	}
	if d, ok := x.NextDeadline(); ok && d <= 300 {
		t.Fatalf("next deadline %d after the timeouts up to 300", d)
	}
}

// TestLoadError: a Source that fails makes the index's load fail, for
// good.
func TestLoadError(t *testing.T) {
	x := New(nil)
	bad := errSource{}
	if err := x.Load(bad); err == nil {
		t.Fatal("no error")
	}
	if err := x.Load(listSource(nil)); err == nil {
		t.Fatal("a second Load forgot the first's error")
	}
}

type errSource struct{ listSource }

func (errSource) Scan(wal.Pos, func(*record.Record, []byte) error) error {
	return fmt.Errorf("the log is unreadable")
}
