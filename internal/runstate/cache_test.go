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
