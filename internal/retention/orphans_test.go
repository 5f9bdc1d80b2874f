package retention

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
)

// TestOrphans: in a log that is not trimmed an orphan record is damage at
// once; in a trimmed one the first of each run is kept and reported at
// the end unless the log deletes the run, first by run id.
func TestOrphans(t *testing.T) {
	var g GC
	e1, e2, e3 := errors.New("b first"), errors.New("b second"), errors.New("a")
	if err := g.Orphan(false, "a", e3); err != e3 {
		t.Fatalf("untrimmed: %v", err)
	}
	for _, o := range []struct {
		run string
		err error
	}{{"b", e1}, {"b", e2}, {"a", e3}} {
		if err := g.Orphan(true, o.run, o.err); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.CheckOrphans(func(run string) bool { return run == "a" }); err != e1 {
		t.Fatalf("a deleted: %v, want b's first", err)
	}
	if err := g.CheckOrphans(func(string) bool { return false }); err != nil {
		t.Fatalf("checked twice: %v (forgotten after the first)", err)
	}
	g.Orphan(true, "b", e1)
	g.Orphan(true, "a", e3)
	g.ResetOrphans()
	if err := g.CheckOrphans(func(string) bool { return false }); err != nil {
		t.Fatalf("after reset: %v", err)
	}
	g.Orphan(true, "b", e1)
	g.Orphan(true, "a", e3)
	if err := g.CheckOrphans(func(string) bool { return false }); err != e3 {
		t.Fatalf("none deleted: %v, want a's (first by id)", err)
	}
}

// TestRemoveLeftovers: temporary files go from the store's directory and
// the subdirectories, ledger tables other than the named one from the
// store's directory only when one is named, nothing else goes, and a
// missing subdirectory is no error.
func TestRemoveLeftovers(t *testing.T) {
	fs := vfs.NewMem()
	for _, d := range []string{"store", "store/frames"} {
		if err := fs.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	files := []string{"store/STORE", "store/CHECKPOINT.tmp", "store/ledger-000001.tbl", "store/ledger-000002.tbl",
		"store/frames/a", "store/frames/a.tmp", "store/frames/ledger-000001.tbl"}
	for _, name := range files {
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	list := func() map[string]bool {
		m := map[string]bool{}
		for _, d := range []string{"store", "store/frames"} {
			names, _ := fs.List(d)
			for _, n := range names {
				m[d+"/"+n] = true
			}
		}
		return m
	}
	subdirs := []string{"store/frames", "store/dicts"}
	n, err := RemoveLeftovers(fs, "store", subdirs, nil)
	got := list()
	if err != nil || n != 2 || got["store/CHECKPOINT.tmp"] || got["store/frames/a.tmp"] || !got["store/ledger-000001.tbl"] || !got["store/ledger-000002.tbl"] {
		t.Fatalf("without a CHECKPOINT: %d, %v; left %v", n, err, got)
	}
	gen := uint64(2)
	n, err = RemoveLeftovers(fs, "store", subdirs, &layout.Checkpoint{LedgerGen: gen})
	got = list()
	if err != nil || n != 1 || got["store/ledger-000001.tbl"] || !got["store/ledger-000002.tbl"] || !got["store/STORE"] || !got["store/frames/a"] || !got["store/frames/ledger-000001.tbl"] {
		t.Fatalf("with CHECKPOINT naming table 2: %d, %v; left %v", n, err, got)
	}
}
