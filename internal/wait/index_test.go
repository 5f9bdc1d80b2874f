package wait

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

func rec(k record.Kind, run string, seq uint64, w record.WaitFields) *record.Record {
	return &record.Record{Kind: k, Run: run, Seq: seq, Wait: &w}
}

// listSource is the Source of a log of records, without WAITS.
func listSource(recs []*record.Record) RecordSource { return RecordSource{Records: recs} }

// fileSource is the Source of a log of records and WAITS (nil: missing);
// it notes why WAITS is not used in *rebuilt.
func fileSource(recs []*record.Record, file []byte, rebuilt *string) RecordSource {
	return RecordSource{Name: "WAITS", File: file, Records: recs, Rebuilt: func(why string) { *rebuilt = why }}
}

// loadFrom loads a new Index on clock from recs and the WAITS file b (nil:
// missing), replaying from record gen at replay, and returns it with why
// Load did not use WAITS ("" if it did); a later rebuild shows in
// x.Rebuilt() only.
func loadFrom(t testing.TB, clock func() time.Time, gen uint64, replay wal.Pos, recs []*record.Record, b []byte) (x *Index, why string) {
	t.Helper()
	x = New(clock)
	x.From(gen, replay)
	if err := x.Load(fileSource(recs, b, &why)); err != nil {
		t.Fatal(err)
	}
	return x, why
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

type errSource struct{ RecordSource }

func (errSource) Scan(wal.Pos, func(*record.Record, []byte) error) error {
	return fmt.Errorf("the log is unreadable")
}

// dump is everything the index says, in a form to compare.
func dump(x *Index, runs []string, senders []string) string {
	var b strings.Builder
	for _, run := range runs {
		fmt.Fprintf(&b, "%s: %s", run, state(x, run, 0))
		if w, ok := x.Current(run, 0); ok {
			fmt.Fprintf(&b, " declared %d deadline %d ended %d", w.Declared, w.Deadline, w.Ended)
			if e := w.Event; e != nil {
				fmt.Fprintf(&b, " event %s/%s/%d/%d/%q/%x", e.Name, e.Sender, e.Seq, e.Sent, e.Payload, e.Digest[:4])
			}
		}
		ps := x.Pending(run)
		slices.SortStableFunc(ps, func(a, b Event) int { return strings.Compare(a.Name, b.Name) })
		for _, e := range ps {
			fmt.Fprintf(&b, " pending %s/%s/%q", e.Name, e.Sender, e.Payload)
		}
		for _, s := range senders {
			if d, ok := x.Sent(run, s); ok {
				fmt.Fprintf(&b, " sent %s %x", s, d[:4])
			}
		}
		b.WriteByte('\n')
	}
	for _, w := range x.Ready(1 << 20) {
		fmt.Fprintf(&b, "ready %s/%d ", w.Run, w.Seq)
	}
	for _, w := range x.Due(1<<62, 1<<20) {
		fmt.Fprintf(&b, "due %s/%d ", w.Run, w.Seq)
	}
	s := x.Stats()
	fmt.Fprintf(&b, "\nruns %d open %d ready %d pending %d now %d", s.Runs, s.Open, s.Ready, s.Pending, x.Now())
	return b.String()
}

// randomRecords is a log of n records of waits of a few runs, each run's
// as the engine writes them (a run's seq moves on between its waits).
func randomRecords(rng *rand.Rand, n int) ([]*record.Record, []string, []string) {
	runs := []string{"a", "b", "c", "d", "e"}
	names := []string{"x", "y", ""}
	seq := map[string]uint64{}
	var recs []*record.Record
	var senders []string
	at := int64(100)
	for i := range n {
		run := runs[rng.IntN(len(runs))]
		at += 1 + rng.Int64N(5)
		var r *record.Record
		switch k := rng.IntN(10); {
		case k < 3:
			name := names[rng.IntN(len(names))]
			f := record.WaitFields{At: at, Name: name}
			if name == "" || rng.IntN(2) == 0 {
				f.Deadline = at + 1 + rng.Int64N(50)
			}
			r = rec(record.KindWait, run, seq[run], f)
		case k < 7:
			s := fmt.Sprintf("s%d", i)
			senders = append(senders, s)
			r = rec(record.KindEvent, run, seq[run], record.WaitFields{At: at, Name: names[rng.IntN(2)], Sender: s, Payload: []byte(fmt.Sprint("p", i))})
		case k < 9:
			reason := uint8(record.WakeTimeout)
			if k == 8 {
				reason = record.WakeCancel
			}
			r = rec(record.KindWake, run, seq[run], record.WaitFields{At: at, Reason: reason})
		default:
			seq[run]++ // an atom: the next wait follows it
			continue
		}
		r.Pos = wal.Pos{Segment: 1 + uint64(i/50), Offset: int64(i%50) * 100}
		recs = append(recs, r)
	}
	return recs, runs, senders
}

// TestCaptureLoad: WAITS captured at any point after its replay position,
// while records keep coming, then loaded with the log from that position,
// gives the index the whole log gives; a file damaged, of another
// checkpoint or missing is rebuilt from the whole log, and says why.
func TestCaptureLoad(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	clock := func() time.Time { return time.Unix(0, 1) }
	for round := range 300 {
		recs, runs, senders := randomRecords(rng, 1+rng.IntN(120))
		whole := New(clock)
		if err := whole.Load(listSource(recs)); err != nil {
			t.Fatal(err)
		}
		want := dump(whole, runs, senders)

		// The checkpoint's replay position is at record f; WAITS is
		// captured once the records before c (c >= f) are applied.
		f := rng.IntN(len(recs) + 1)
		c := f + rng.IntN(len(recs)-f+1)
		replay := wal.Pos{Segment: 1 << 20}
		if f < len(recs) {
			replay = recs[f].Pos
		}
		live := New(clock)
		if err := live.Load(listSource(nil)); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs[:c] {
			live.Apply(r, r.Wait.Payload)
		}
		file, err := live.Capture(7, replay, nil)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := layout.ParseWaits("WAITS", file)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if again := parsed.Marshal(); !bytes.Equal(again, file) {
			t.Fatalf("round %d: WAITS parsed and encoded again differs", round)
		}

		x, why := loadFrom(t, clock, 7, replay, recs, file)
		if why != "" || x.Rebuilt() != "" {
			t.Fatalf("round %d: WAITS not used: %s", round, why)
		}
		if got := dump(x, runs, senders); got != want {
			t.Fatalf("round %d (replay at record %d, captured at %d of %d): loaded from WAITS\n%s\nthe whole log\n%s", round, f, c, len(recs), got, want)
		}

		// Unusable files: the whole log decides.
		bad := map[string][]byte{"missing": nil, "of another checkpoint": nil, "damaged": slices.Clone(file)}
		bad["damaged"][rng.IntN(len(file))] ^= 1 << rng.IntN(8)
		parsed.Gen = 6
		bad["of another checkpoint"] = parsed.Marshal()
		for what, b := range bad {
			x, why := loadFrom(t, clock, 7, replay, recs, b)
			if why == "" || x.Rebuilt() != why {
				t.Fatalf("round %d: a WAITS %s was used (%q)", round, what, x.Rebuilt())
			}
			if got := dump(x, runs, senders); got != want {
				t.Fatalf("round %d: rebuilt after a WAITS %s (%s)\n%s\nwant\n%s", round, what, why, got, want)
			}
		}
	}
}

// TestCaptureDropsTaken: Capture drops the waits CHECKPOINT's rows say an
// atom took and the runs that ended, and keeps what idempotence needs (a
// taken wait's run's senders); Gone before Load is done after it.
func TestCaptureDropsTaken(t *testing.T) {
	pos := func(i int) wal.Pos { return wal.Pos{Segment: 1, Offset: int64(i) * 10} }
	recs := []*record.Record{
		rec(record.KindWait, "taken", 0, record.WaitFields{At: 1, Name: "go"}),
		rec(record.KindEvent, "taken", 0, record.WaitFields{At: 2, Name: "go", Sender: "s1"}),
		rec(record.KindWait, "ended", 0, record.WaitFields{At: 3, Deadline: 9}),
		rec(record.KindWait, "open", 2, record.WaitFields{At: 4, Deadline: 8}),
		rec(record.KindWait, "gone", 0, record.WaitFields{At: 5, Name: "z"}),
	}
	for i, r := range recs {
		r.Pos = pos(i + 1)
	}
	x := New(nil)
	x.Gone("gone") // before Load: done after it
	if err := x.Load(listSource(recs)); err != nil {
		t.Fatal(err)
	}
	if _, ok := x.Current("gone", 0); ok {
		t.Fatal("a run gone before Load waits")
	}
	rows := map[string][2]uint64{"taken": {1, 0}, "ended": {0, 1}, "open": {2, 0}}
	file, err := x.Capture(3, pos(1), func(run string) (uint64, bool, bool) {
		r, ok := rows[run]
		return r[0], r[1] != 0, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := layout.ParseWaits("WAITS", file)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range wf.Runs {
		got = append(got, fmt.Sprintf("%s wait %v senders %d", r.ID, r.Wait != nil, len(r.Senders)))
	}
	if want := []string{"open wait true senders 0", "taken wait false senders 1"}; !slices.Equal(got, want) {
		t.Fatalf("WAITS holds %v, want %v", got, want)
	}
	if s := x.Stats(); s.Runs != 2 || s.Ready != 0 || s.Open != 1 {
		t.Fatalf("the index after the capture: %+v", s)
	}
}

// TestEntrySize: a waiting run's entry is one allocation of 112 bytes (a
// size class of the Go allocator); a field more moves it to 128.
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(runWaits{}); n > 112 {
		t.Fatalf("runWaits is %d bytes, more than 112", n)
	}
}

// TestDecide: what DeclareRecords, WakeRecords and EventRecords decide to
// write, applied, gives the outcomes the engine's API promises.
func TestDecide(t *testing.T) {
	link := func(run string, seq uint64, head chain.Hash, payload []byte) chain.Hash { return chain.Hash{byte(seq)} }
	x := New(nil)
	if err := x.Load(listSource(nil)); err != nil {
		t.Fatal(err)
	}
	apply := func(recs []*record.Record) {
		for _, r := range recs {
			x.Apply(r, r.Wait.Payload)
		}
	}
	plain := func(p []byte) func(uint64) ([]byte, error) { return func(uint64) ([]byte, error) { return p, nil } }
	// A wait, declared again after the same atom: nothing more; another
	// name: ErrOtherWait.
	_, recs, err := x.DeclareRecords(link, "r", 3, chain.Hash{}, 10, record.WaitFields{Name: "go", Deadline: 50})
	if err != nil || len(recs) != 1 || recs[0].Kind != record.KindWait || recs[0].Wait.At != 10 {
		t.Fatalf("declare: %v %v", recs, err)
	}
	apply(recs)
	if cur, recs, err := x.DeclareRecords(link, "r", 3, chain.Hash{}, 11, record.WaitFields{Name: "go"}); err != nil || recs != nil || cur.Declared != 10 {
		t.Fatalf("declared again: %+v %v %v", cur, recs, err)
	}
	if cur, _, err := x.DeclareRecords(link, "r", 3, chain.Hash{}, 11, record.WaitFields{Name: "stop"}); !errors.Is(err, ErrOtherWait) || cur.Name != "go" {
		t.Fatalf("another name: %+v %v", cur, err)
	}
	// A timeout before the deadline: nothing; no wait: ErrNoWait, or
	// nothing with ifDue.
	if _, recs, err := x.WakeRecords(link, "r", 3, chain.Hash{}, 20, record.WakeTimeout, false); err != nil || recs != nil {
		t.Fatalf("a timeout not due: %v %v", recs, err)
	}
	if _, _, err := x.WakeRecords(link, "q", 0, chain.Hash{}, 20, record.WakeCancel, false); !errors.Is(err, ErrNoWait) {
		t.Fatalf("a cancel of no wait: %v", err)
	}
	if _, recs, err := x.WakeRecords(link, "q", 0, chain.Hash{}, 20, record.WakeTimeout, true); err != nil || recs != nil {
		t.Fatalf("ifDue with no wait: %v %v", recs, err)
	}
	// An event after the deadline: the timeout first, the event kept.
	d := Digest("go", []byte("late"))
	recs, dup, delivered, err := x.EventRecords(link, "r", 3, chain.Hash{}, 60, record.WaitFields{Name: "go", Sender: "s1"}, d, plain([]byte("late")))
	if err != nil || dup || delivered || len(recs) != 2 || recs[0].Kind != record.KindWake || recs[1].Kind != record.KindEvent {
		t.Fatalf("an event past the deadline: %v %v %v %v", recs, dup, delivered, err)
	}
	apply(recs)
	if w, _ := x.Current("r", 3); w.Outcome != TimedOut || x.Stats().Pending != 1 {
		t.Fatalf("after the timeout and the kept event: %+v %+v", w, x.Stats())
	}
	// The same sender again: a duplicate; with another payload: ErrMismatch.
	if recs, dup, _, err := x.EventRecords(link, "r", 3, chain.Hash{}, 61, record.WaitFields{Name: "go", Sender: "s1"}, d, plain([]byte("late"))); err != nil || !dup || recs != nil {
		t.Fatalf("a repeated event: %v %v %v", recs, dup, err)
	}
	if _, _, _, err := x.EventRecords(link, "r", 3, chain.Hash{}, 61, record.WaitFields{Name: "go", Sender: "s1"}, Digest("go", nil), plain(nil)); !errors.Is(err, ErrMismatch) {
		t.Fatalf("another event of the sender: %v", err)
	}
	// An open wait takes an event of its name: delivered.
	_, recs, _ = x.DeclareRecords(link, "p", 0, chain.Hash{}, 70, record.WaitFields{Name: "ok"})
	apply(recs)
	recs, _, delivered, err = x.EventRecords(link, "p", 0, chain.Hash{}, 71, record.WaitFields{Name: "ok", Sender: "h"}, Digest("ok", nil), plain(nil))
	if err != nil || !delivered || len(recs) != 1 {
		t.Fatalf("an event for the open wait: %v %v %v", recs, delivered, err)
	}
}
