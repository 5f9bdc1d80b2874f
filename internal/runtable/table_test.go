package runtable

import (
	"slices"
	"testing"
	"time"

	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/layout"
)

type run string

func (r run) ID() string { return string(r) }

func TestWithdrawAndRestore(t *testing.T) {
	tab := Table[run]{}
	var deleted retention.Registry
	for _, id := range []string{"c", "a", "b"} {
		tab.Publish(run(id))
	}
	if got := tab.Sorted(); !slices.Equal(got, []run{"a", "b", "c"}) {
		t.Fatalf("Sorted: %v", got)
	}

	tab.Withdraw(&deleted, false, "a") // a failed creation: no mark
	if _, ok := tab["a"]; ok || deleted.Has("a") {
		t.Fatalf("failed creation: in table %v, marked %v", ok, deleted.Has("a"))
	}

	tab.Withdraw(&deleted, true, "b", "c") // a deletion in flight
	if len(tab) != 0 || !deleted.Has("b") || !deleted.Has("c") {
		t.Fatalf("deletion: table %v, marked b %v c %v", tab, deleted.Has("b"), deleted.Has("c"))
	}
	tab.Restore(&deleted, "b", "c") // its record failed
	if got := tab.Sorted(); !slices.Equal(got, []run{"b", "c"}) || deleted.Has("b") || deleted.Has("c") || deleted.Len() != 0 {
		t.Fatalf("restore: table %v, marks %d", got, deleted.Len())
	}
}

func TestIDs(t *testing.T) {
	tab := Table[run]{}
	tab.Publish(run("b"))
	tab.Publish(run("z"))
	var rows Rows
	rows.Load([]layout.CheckpointRun{{ID: "a"}, {ID: "b"}}, time.Now())
	var got []string
	for id := range tab.IDs(&rows) {
		got = append(got, id)
	}
	if len(got) != 4 || !slices.Equal(got[:2], []string{"a", "b"}) || !slices.Contains(got[2:], "b") || !slices.Contains(got[2:], "z") {
		t.Fatalf("IDs: %v", got)
	}
	n := 0
	for range tab.IDs(&rows) {
		if n++; n == 3 {
			break
		}
	}
	var none Rows
	got = got[:0]
	for id := range tab.IDs(&none) {
		got = append(got, id)
	}
	if slices.Sort(got); !slices.Equal(got, []string{"b", "z"}) {
		t.Fatalf("IDs without rows: %v", got)
	}
}
