package runstate

import (
	"slices"
	"testing"
)

type fakeRun struct {
	name      string
	res       Resident
	resident  bool
	changedAt int64 // drop refuses when the run's use moved since the scan
}

func TestDropLeastRecentlyUsedFirst(t *testing.T) {
	runs := []*fakeRun{
		{name: "a", res: Resident{Use: 5, Bytes: 100, Droppable: true}, resident: true},
		{name: "b", res: Resident{Use: 1, Bytes: 100, Droppable: true}, resident: true},
		{name: "c", res: Resident{Use: 3, Bytes: 100, Droppable: true}, resident: true},
		{name: "d", res: Resident{Use: 0, Bytes: 100}, resident: true}, // busy: never dropped
		{name: "e"}, // no frame
	}
	var dropped []string
	scan := func(r *fakeRun) (Resident, bool) { return r.res, r.resident }
	drop := func(r *fakeRun, use int64) bool {
		if r.changedAt != 0 || use != r.res.Use {
			return false
		}
		dropped = append(dropped, r.name)
		return true
	}
	if Drop(runs, 250, scan, drop) {
		t.Fatal("unwritten reported with no unwritten run")
	}
	if want := []string{"b", "c"}; !slices.Equal(dropped, want) {
		t.Fatalf("dropped %v, want %v (least recently used first, until 400-200 <= 250)", dropped, want)
	}

	dropped = nil
	runs[1].changedAt = 1 // b was used since its scan: kept, the next one goes
	Drop(runs, 250, scan, drop)
	if want := []string{"c", "a"}; !slices.Equal(dropped, want) {
		t.Fatalf("dropped %v, want %v", dropped, want)
	}

	dropped = nil
	if Drop(runs, 400, scan, drop) || len(dropped) != 0 {
		t.Fatalf("within budget: dropped %v", dropped)
	}
	if Drop(runs, -1, scan, drop) || len(dropped) != 0 {
		t.Fatalf("negative budget (cache off): dropped %v", dropped)
	}
}

func TestDropReportsUnwritten(t *testing.T) {
	runs := []Resident{{Use: 1, Bytes: 100, Unwritten: true}, {Use: 2, Bytes: 100, Droppable: true}}
	scan := func(r Resident) (Resident, bool) { return r, true }
	drop := func(Resident, int64) bool { return true }
	if !Drop(runs, 50, scan, drop) {
		t.Fatal("over budget with an unwritten idle run: want unwritten")
	}
	if Drop(runs, 100, scan, drop) {
		t.Fatal("within budget once the droppable one is dropped: want false")
	}
}

// TestFrameResident checks the droppable rule: an idle run whose frame
// file this process wrote, CHECKPOINT names and the snapshot are all at
// its last seq; an idle run whose file is behind is unwritten.
func TestFrameResident(t *testing.T) {
	at := Frame{Idle: true, LastSeq: 9, FileSeq: 9, FrameSeq: 9, SnapSeq: 9}
	for _, c := range []struct {
		name                 string
		f                    Frame
		droppable, unwritten bool
	}{
		{"written at its last seq", at, true, false},
		{"busy", Frame{LastSeq: 9, FileSeq: 9, FrameSeq: 9, SnapSeq: 9}, false, false},
		{"file behind", Frame{Idle: true, LastSeq: 9, FileSeq: 8, FrameSeq: 9, SnapSeq: 9}, false, true},
		{"CHECKPOINT's file behind", Frame{Idle: true, LastSeq: 9, FileSeq: 9, FrameSeq: 8, SnapSeq: 9}, false, false},
		{"snapshot behind", Frame{Idle: true, LastSeq: 9, FileSeq: 9, FrameSeq: 9, SnapSeq: 8}, false, false},
	} {
		if x := c.f.Resident(); x.Droppable != c.droppable || x.Unwritten != c.unwritten {
			t.Errorf("%s: droppable %v unwritten %v, want %v %v", c.name, x.Droppable, x.Unwritten, c.droppable, c.unwritten)
		}
	}
}

// TestSweep checks Sweep over one visit: the least recently used
// droppable frame goes first, a run used since the scan keeps its frame,
// a run without one is skipped.
func TestSweep(t *testing.T) {
	type run struct {
		name     string
		f        Frame
		resident bool
		usedNow  int64 // its use when the drop comes (0: as scanned)
		dropped  bool
	}
	frame := func(use int64) Frame {
		return Frame{Use: use, Bytes: 100, Idle: true, LastSeq: 3, FileSeq: 3, FrameSeq: 3, SnapSeq: 3}
	}
	runs := []*run{
		{name: "a", f: frame(5), resident: true},
		{name: "b", f: frame(1), resident: true, usedNow: 6},
		{name: "c", f: frame(3), resident: true},
		{name: "d"},
	}
	visit := func(r *run, drop func(Frame) bool) bool {
		if !r.resident {
			return false
		}
		f := r.f
		if r.usedNow != 0 {
			defer func() { r.f.Use = r.usedNow }() // used after this read
		}
		if !drop(f) {
			return false
		}
		r.resident, r.dropped = false, true
		return true
	}
	// The scan reads b at use 1; by the drop b was used (6): it stays,
	// and the next least recently used, c then a, go until 300-200 <= 150.
	if Sweep(runs, 150, visit) {
		t.Fatal("unwritten reported with no unwritten run")
	}
	var dropped []string
	for _, r := range runs {
		if r.dropped {
			dropped = append(dropped, r.name)
		}
	}
	if want := []string{"a", "c"}; !slices.Equal(dropped, want) {
		t.Fatalf("dropped %v, want %v", dropped, want)
	}
}
