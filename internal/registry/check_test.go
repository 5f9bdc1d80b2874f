package registry

import (
	"errors"
	"fmt"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/internal/wait"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// fakeEngine is a Check's Engine that records the steps it is asked for.
type fakeEngine struct {
	fromFile bool
	readErr  error
	log      map[string]*Run
	found    *Collector
	mismatch string
	why      string
	waitsErr error
	calls    []string
	live     wait.Live // what CheckWaits was handed
}

func (e *fakeEngine) WaitsFromFile() bool { return e.fromFile }
func (e *fakeEngine) ReadLog(to wal.Pos, waits *wait.Check) (map[string]*Run, *Collector, error) {
	e.calls = append(e.calls, fmt.Sprintf("read %v waits=%v", to, waits != nil))
	return e.log, e.found, e.readErr
}
func (e *fakeEngine) Settle(rows []layout.CheckpointRun, log map[string]*Run, found *Collector) (string, string) {
	e.calls = append(e.calls, fmt.Sprintf("settle %d", len(rows)))
	return e.mismatch, e.why
}
func (e *fakeEngine) Corrupt(why string) error { return errors.New("corrupt: " + why) }
func (e *fakeEngine) Heal(*Collector)          { e.calls = append(e.calls, "heal") }
func (e *fakeEngine) Disagreed(m string)       { e.calls = append(e.calls, "disagreed "+m) }
func (e *fakeEngine) CheckWaits(waits *wait.Check, to wal.Pos, live wait.Live) (string, error) {
	e.calls = append(e.calls, "waits")
	e.live = live
	return "waits differ", e.waitsErr
}

// TestCheck: a Check's steps in their order, run once; what it found is
// read only once it got that far; a nil Check has nothing to check.
func TestCheck(t *testing.T) {
	var none *Check
	if none.Run(&fakeEngine{}) != nil || none.Unchecked() || none.Checked() || none.WaitsDone() || none.Mismatch() != "" || none.WaitsMismatch() != "" {
		t.Fatal("a nil Check is not empty")
	}
	rows := []layout.CheckpointRun{{ID: "a"}, {ID: "b"}}
	to := wal.Pos{Segment: 1, Offset: 40}
	for _, tc := range []struct {
		name  string
		e     *fakeEngine
		err   string
		calls string
		// checked, mismatch, waits mismatch after the run
		checked       bool
		mismatch      string
		waitsMismatch string
	}{
		{name: "agrees", e: &fakeEngine{found: &Collector{}},
			calls: "[read 1:40 waits=false settle 2 heal]", checked: true},
		{name: "disagrees", e: &fakeEngine{found: &Collector{}, mismatch: "row a"},
			calls: "[read 1:40 waits=false settle 2 heal disagreed row a]", checked: true, mismatch: "row a"},
		{name: "waits", e: &fakeEngine{fromFile: true, found: &Collector{}},
			calls: "[read 1:40 waits=true settle 2 heal waits]", checked: true, waitsMismatch: "waits differ"},
		{name: "waits fail", e: &fakeEngine{fromFile: true, found: &Collector{}, waitsErr: errors.New("no")}, err: "no",
			calls: "[read 1:40 waits=true settle 2 heal waits]", checked: true, waitsMismatch: "waits differ"},
		{name: "read fails", e: &fakeEngine{fromFile: true, readErr: errors.New("io")}, err: "io",
			calls: "[read 1:40 waits=true]"},
		{name: "deletions disagree", e: &fakeEngine{found: &Collector{}, why: "deleted twice", mismatch: "x"}, err: "corrupt: deleted twice",
			calls: "[read 1:40 waits=false settle 2]"},
	} {
		c := NewCheck(rows, to)
		if !c.Unchecked() || c.WaitsDone() {
			t.Fatalf("%s: a new check is done", tc.name)
		}
		for i := 0; i < 2; i++ { // the second call returns the first's error
			err := c.Run(tc.e)
			if fmt.Sprint(err) != fmt.Sprint(tc.err) && !(tc.err == "" && err == nil) {
				t.Fatalf("%s: Run #%d = %v, want %q", tc.name, i, err, tc.err)
			}
		}
		if got := fmt.Sprint(tc.e.calls); got != tc.calls {
			t.Errorf("%s: calls %s, want %s", tc.name, got, tc.calls)
		}
		if c.Checked() != tc.checked || c.Unchecked() == tc.checked || c.Mismatch() != tc.mismatch || c.WaitsMismatch() != tc.waitsMismatch || !c.WaitsDone() {
			t.Errorf("%s: checked %v, mismatch %q, waits %q (done %v)", tc.name, c.Checked(), c.Mismatch(), c.WaitsMismatch(), c.WaitsDone())
		}
	}
}

// TestLive: the runs the check of WAITS compares are those the log holds
// neither ended nor deleted, with their last seq in the whole log.
func TestLive(t *testing.T) {
	found := &Collector{}
	found.Gone.Mark("deleted", &retention.Gone{Seq: 3})
	live := found.Live(map[string]*Run{
		"a":       {Last: 2, After: make([]chain.Hash, 3)},
		"ended":   {Last: 1, End: &End{}},
		"endsnow": {Last: 1, EndAfter: &End{}},
		"deleted": {Last: 3},
	})
	for id, want := range map[string]string{"a": "5 true", "ended": "0 false", "endsnow": "0 false", "deleted": "0 false", "missing": "0 false"} {
		last, ok := live(id)
		if got := fmt.Sprint(last, ok); got != want {
			t.Errorf("live(%s) = %s, want %s", id, got, want)
		}
	}
}

// TestSkipFor: the check's read takes what Scan reads, and the records of
// waits only for the check of WAITS; each stream record is noted.
func TestSkipFor(t *testing.T) {
	for _, waits := range []bool{false, true} {
		seen := 0
		skip := SkipFor(waits, func() { seen++ })
		for _, k := range []record.Kind{record.KindRun, record.KindAtom, record.KindEnd, record.KindDelete} {
			if skip(k, nil) != Skip(k, nil) {
				t.Errorf("waits %v: kind %v skipped %v, Skip says %v", waits, k, skip(k, nil), Skip(k, nil))
			}
		}
		for _, k := range []record.Kind{record.KindWait, record.KindEvent, record.KindWake} {
			if skip(k, nil) == waits {
				t.Errorf("waits %v: kind %v skipped %v", waits, k, skip(k, nil))
			}
		}
		if skip(record.KindStreamChunk, nil) != Skip(record.KindStreamChunk, nil) || skip(record.KindStreamAbandon, nil) != Skip(record.KindStreamAbandon, nil) || seen != 2 {
			t.Errorf("waits %v: stream records noted %d times, want 2", waits, seen)
		}
	}
}

// TestAddWaits: each record is added with its payload; a payload's error
// stops the read and adds nothing.
func TestAddWaits(t *testing.T) {
	wc := wait.NewCheck(wal.Pos{})
	fail := errors.New("cannot open")
	add := AddWaits(wc, func(r *record.Record) ([]byte, error) {
		if r.Run == "bad" {
			return nil, fail
		}
		return []byte("p"), nil
	})
	rec := func(run string, off int64) *record.Record {
		return &record.Record{Kind: record.KindWait, Run: run, Seq: 1, Pos: wal.Pos{Segment: 1, Offset: off}, Wait: &record.WaitFields{}}
	}
	if err := add(rec("a", 10)); err != nil || wc.Records() != 1 {
		t.Fatalf("add = %v, %d records", err, wc.Records())
	}
	if err := add(rec("bad", 20)); err != fail || wc.Records() != 1 {
		t.Fatalf("add of a record whose payload fails = %v, %d records", err, wc.Records())
	}
}
