package runtable

import (
	"slices"
	"testing"

	"github.com/continuumdb/continuum/internal/retention"
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
