//go:build unix

package wait

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// TestTableTruncatedUnderMapping: WAITS, mapped, cut short by another
// process after the index loaded it. A read of a page past the new end
// faults (SIGBUS); the index takes that as damage, is rebuilt from the
// log and answers as the log does, where the process used to die. Every
// query that reads the table is tried first, each on a fresh index.
func TestTableTruncatedUnderMapping(t *testing.T) {
	recs, runs, file := sleepersLog(t, 2000)
	fromLog := func() *Index {
		x := New(fixedClock)
		if err := x.Load(listSource(recs)); err != nil {
			t.Fatal(err)
		}
		return x
	}
	want := dump(fromLog(), runs, nil)
	if len(file) < 8*layout.WaitsBlock {
		t.Fatalf("WAITS of %d bytes: too small to cut it past its first pages", len(file))
	}
	first := map[string]func(x *Index){
		"Due":          func(x *Index) { x.Due(1<<62, 1<<20) },
		"Ready":        func(x *Index) { x.Ready(1 << 20) },
		"Current":      func(x *Index) { x.Current(runs[len(runs)-1], 0) },
		"Taken":        func(x *Index) { x.Taken(runs[len(runs)-1], 1<<40) },
		"Gone":         func(x *Index) { x.Gone(runs[len(runs)-2]) },
		"Capture":      func(x *Index) { x.Capture(4, wal.Pos{Segment: 3}, nil) },
		"Mark":         func(x *Index) { x.Mark(runs[len(runs)-1]) },
		"NextDeadline": func(x *Index) { x.NextDeadline() },
	}
	for name, query := range first {
		t.Run(name, func(t *testing.T) {
			path, b := mapped(t, layout.WaitsName, file)
			var why string
			x := New(fixedClock)
			x.From(3, wal.Pos{Segment: 2})
			if err := x.Load(fileSource(recs, b, &why)); err != nil {
				t.Fatal(err)
			}
			if why != "" {
				t.Fatalf("the mapped table was not used: %s", why)
			}
			// Keep the first page: the header, which the load read.
			if err := os.Truncate(path, layout.WaitsBlock); err != nil {
				t.Fatal(err)
			}
			query(x)
			if name == "Gone" || name == "Taken" {
				// They change the index: compare with the log's index
				// given the same.
				whole := fromLog()
				query(whole)
				want := dump(whole, runs, nil)
				defer func() {
					if got := dump(x, runs, nil); got != want {
						t.Errorf("after %s: %s", name, firstDiff(got, want))
					}
				}()
			} else if got := dump(x, runs, nil); got != want {
				t.Fatalf("after %s: %s", name, firstDiff(got, want))
			}
			if !strings.Contains(x.Rebuilt(), "faulted") || !strings.Contains(why, "faulted") {
				t.Fatalf("Rebuilt %q, Rebuilding %q: want the fault named", x.Rebuilt(), why)
			}
			if x.Err() != nil {
				t.Fatalf("the index failed: %v", x.Err())
			}
		})
	}
}

var sink byte

// mapped writes data to a new file called name and maps it (mapFile), for
// the test's time; it skips the test where files are not mapped.
func mapped(t *testing.T, name string, data []byte) (path string, b []byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b, release, err := mapFile(vfs.Default, path)
	if errors.Is(err, errNoMap) {
		t.Skip("this system does not map files")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return path, b
}

// TestGuard: a fault under guard is damage of WAITS; any other panic is
// not caught.
func TestGuard(t *testing.T) {
	path, b := mapped(t, "f", make([]byte, 3*layout.WaitsBlock))
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	err := guard(func() error { sink = b[2*layout.WaitsBlock]; return nil })
	if !errors.Is(err, record.ErrCorrupt) || !strings.Contains(err.Error(), "faulted") {
		t.Fatalf("a fault under guard: %v", err)
	}
	defer func() {
		if r := recover(); r != "not a fault" {
			t.Fatalf("another panic under guard: recovered %v", r)
		}
	}()
	guard(func() error { panic("not a fault") })
}
