package layout

import (
	"strings"
	"testing"
)

func TestCheckpointSortRuns(t *testing.T) {
	rows := func(ids ...string) []CheckpointRun {
		out := make([]CheckpointRun, len(ids))
		for i, id := range ids {
			out[i] = CheckpointRun{ID: id, LastSeq: uint64(i), IndexedSeq: uint64(i)}
		}
		return out
	}
	c := &Checkpoint{Runs: rows("c", "a", "b", "")}
	if why := c.SortRuns(); why != "" {
		t.Fatalf("SortRuns of a good table: %q", why)
	}
	for i, want := range []string{"", "a", "b", "c"} {
		if c.Runs[i].ID != want {
			t.Fatalf("row %d is %q, want %q (sorted by id)", i, c.Runs[i].ID, want)
		}
		if j, ok := FindRun(c.Runs, want); !ok || j != i {
			t.Fatalf("FindRun(%q) = %d, %v; want %d, true", want, j, ok, i)
		}
	}
	for _, id := range []string{"aa", "0", "d", "b\x00"} {
		if j, ok := FindRun(c.Runs, id); ok {
			t.Fatalf("FindRun(%q) = %d, true; the table has no such run", id, j)
		}
	}
	if _, ok := FindRun(nil, "a"); ok {
		t.Fatal("FindRun in no rows found a run")
	}

	c = &Checkpoint{Runs: rows("b", "a", "b")}
	if why := c.SortRuns(); !strings.Contains(why, `run "b" is listed twice`) {
		t.Fatalf("SortRuns of a table with a run twice: %q", why)
	}
	c = &Checkpoint{Runs: rows("a", "b")}
	c.Runs[1].LastSeq = 9
	if why := c.SortRuns(); !strings.Contains(why, `run "b": atoms 2..9 have no log position`) {
		t.Fatalf("SortRuns of a run with atoms past IndexedSeq: %q", why)
	}
}
