package wait

import (
	"strings"
	"testing"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// forgeTable re-encodes WAITS file with edit applied to its runs' entries:
// a forgery whose checksums and sections are sound (the sections are
// built from the entries).
func forgeTable(t *testing.T, file []byte, edit func(runs []layout.WaitsRun) []layout.WaitsRun) []byte {
	t.Helper()
	tb, err := layout.OpenWaitsTable("WAITS", file)
	if err != nil {
		t.Fatal(err)
	}
	var runs []layout.WaitsRun
	for i := range tb.Runs {
		var fr layout.WaitsRun
		if err := tb.Run(i, nil, &fr); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, fr)
	}
	runs = edit(runs)
	b := layout.NewWaitsBuilder(tb.Gen, tb.Replay, tb.High)
	for i := range runs {
		b.Add(&runs[i])
	}
	return b.Bytes()
}

// checkFilled is the log's side of a check over recs.
func checkFilled(recs []*record.Record, replay wal.Pos) *Check {
	c := NewCheck(replay)
	for _, r := range recs {
		var p []byte
		if r.Kind == record.KindEvent {
			p = r.Wait.Payload
		}
		c.Add(r, p)
	}
	return c
}

// allLive: every run lives, its last atom seq 1 (the waits of
// sleepersLog follow it).
func allLive(string) (uint64, bool) { return 1, true }

// TestCheckTableForged: a WAITS forged so that it is sound (checksums
// recomputed, its sections agreeing with its entries) is answered by the
// index as loaded, but CheckTable finds it (another deadline in both the
// entry and the deadline section; an event moved to another run), and
// after Distrust the index answers as the log does; a true WAITS
// passes.
func TestCheckTableForged(t *testing.T) {
	recs, runs, file := sleepersLog(t, 60)
	whole := New(fixedClock)
	if err := whole.Load(listSource(recs)); err != nil {
		t.Fatal(err)
	}
	want := dump(whole, runs, nil)
	forged := map[string]func(runs []layout.WaitsRun) []layout.WaitsRun{
		"none": func(runs []layout.WaitsRun) []layout.WaitsRun { return runs },
		"another deadline": func(runs []layout.WaitsRun) []layout.WaitsRun {
			for i := range runs {
				if w := runs[i].Wait; w != nil && w.Outcome == 0 && w.Deadline > 1000 {
					w.Deadline = 1 // due at once: a timeout the log never set
					return runs
				}
			}
			t.Fatal("no open wait to forge")
			return nil
		},
		"an event moved to another run": func(runs []layout.WaitsRun) []layout.WaitsRun {
			from, to := -1, -1
			for i := range runs {
				w := runs[i].Wait
				switch {
				case w == nil:
				case from < 0 && w.Outcome == 1:
					from = i
				case to < 0 && w.Outcome == 0:
					to = i
				}
			}
			if from < 0 || to < 0 {
				t.Fatal("no event to move")
			}
			fw, tw := runs[from].Wait, runs[to].Wait
			e := *fw.Event
			tw.Outcome, tw.Ended, tw.Event, tw.Ready, tw.Deadline = 1, fw.Ended, &e, 1<<40, fw.Deadline
			runs[to].Senders, runs[from].Senders = runs[from].Senders, nil
			fw.Outcome, fw.Ended, fw.Event, fw.Ready = 0, 0, nil, 0
			return runs
		},
	}
	for what, edit := range forged {
		t.Run(strings.ReplaceAll(what, " ", "_"), func(t *testing.T) {
			b := forgeTable(t, file, edit)
			x, why := loadFrom(t, fixedClock, 3, wal.Pos{Segment: 2}, recs, b)
			if why != "" {
				t.Fatalf("the forgery is not sound: %s", why)
			}
			if !x.FromFile() {
				t.Fatal("FromFile false for an index loaded from WAITS")
			}
			before := dump(x, runs, nil)
			if (before == want) != (what == "none") {
				t.Fatalf("%s: the index as loaded answers as the log: %v (the test is blind)", what, before == want)
			}
			diff, err := x.CheckTable(checkFilled(recs, wal.Pos{Segment: 2}), allLive, nil)
			if err != nil {
				t.Fatal(err)
			}
			if (diff == "") != (what == "none") {
				t.Fatalf("%s: CheckTable says %q", what, diff)
			}
			if what == "none" {
				return
			}
			t.Logf("%s: %s", what, diff)
			x.Distrust(diff)
			if got := dump(x, runs, nil); got != want {
				t.Fatalf("%s: after Distrust: %s", what, firstDiff(got, want))
			}
			if !strings.Contains(x.Rebuilt(), "disagrees with the log") || x.FromFile() {
				t.Fatalf("Rebuilt %q, FromFile %v", x.Rebuilt(), x.FromFile())
			}
		})
	}
}

// TestDistrustBeforeLoad: Distrust before Load makes Load read the whole
// log, not WAITS.
func TestDistrustBeforeLoad(t *testing.T) {
	recs, runs, file := sleepersLog(t, 30)
	whole := New(fixedClock)
	if err := whole.Load(listSource(recs)); err != nil {
		t.Fatal(err)
	}
	b := forgeTable(t, file, func(rs []layout.WaitsRun) []layout.WaitsRun {
		for i := range rs {
			if w := rs[i].Wait; w != nil && w.Outcome == 0 {
				w.Name = "forged"
			}
		}
		return rs
	})
	x := New(fixedClock)
	x.From(3, wal.Pos{Segment: 2})
	x.Distrust("forged names")
	var why string
	if err := x.Load(fileSource(recs, b, &why)); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(x, runs, nil), dump(whole, runs, nil); got != want {
		t.Fatal(firstDiff(got, want))
	}
	if x.Rebuilt() == "" {
		t.Fatal("Rebuilt says nothing")
	}
}
