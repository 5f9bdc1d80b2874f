package snapshot

import (
	"errors"
	"fmt"
	"github.com/continuumdb/continuum/internal/privfs"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
)

func openMem(t *testing.T, memfs vfs.FS) *Store {
	t.Helper()
	s, err := Open("db/snapshots", &Options{FS: memfs})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustCommit(t *testing.T, b *Batch, sync bool) {
	t.Helper()
	if err := b.Commit(sync); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func TestStoreRoundTrip(t *testing.T) {
	memfs := vfs.NewMem()
	st := openMem(t, memfs)
	b := st.NewBatch()
	want := []*Snapshot{testSnapshot("r1", 50), testSnapshot("r1", 100), testSnapshot("r2", 50)}
	for _, s := range want {
		if err := b.PutSnapshot(s); err != nil {
			t.Fatal(err)
		}
	}
	pos := make([]Pos, 100)
	for i := range pos {
		pos[i] = Pos{Segment: uint64(i / 30), Offset: int64(i * 1000)}
	}
	if err := b.PutPositions("r1", 1, pos); err != nil {
		t.Fatal(err)
	}
	if err := b.PutMeta("indexed/r1", []byte("100")); err != nil {
		t.Fatal(err)
	}
	if got := b.Len(); got != 3+100+1 {
		t.Errorf("Len = %d, want 104", got)
	}
	mustCommit(t, b, true)

	check := func(st *Store) {
		t.Helper()
		for _, s := range want {
			got, err := st.AtOrBelow(s.RunID, s.Seq)
			if err != nil {
				t.Fatalf("AtOrBelow(%q, %d): %v", s.RunID, s.Seq, err)
			}
			if diff := cmp.Diff(s, got, snapCmp...); diff != "" {
				t.Errorf("snapshot %q/%d (-want +got):\n%s", s.RunID, s.Seq, diff)
			}
		}
		got, err := st.Positions("r1", 1, 100)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(pos, got); diff != "" {
			t.Errorf("positions (-want +got):\n%s", diff)
		}
		got, err = st.Positions("r1", 51, 73)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(pos[50:73], got); diff != "" {
			t.Errorf("positions 51..73 (-want +got):\n%s", diff)
		}
		m, err := st.Meta("indexed/r1")
		if err != nil || string(m) != "100" {
			t.Errorf("Meta = %q, %v", m, err)
		}
		seqs, err := st.Snapshots("r1")
		if err != nil || !cmp.Equal(seqs, []uint64{50, 100}) {
			t.Errorf("Snapshots(r1) = %v, %v", seqs, err)
		}
		latest, err := st.Latest("r1")
		if err != nil || latest.Seq != 100 {
			t.Errorf("Latest(r1) = %+v, %v", latest, err)
		}
		if n := st.Stats().Snapshots; n != 3 {
			t.Errorf("Stats().Snapshots = %d, want 3", n)
		}
	}
	check(st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	check(openMem(t, memfs))
}

func TestAtOrBelowBoundaries(t *testing.T) {
	st := openMem(t, vfs.NewMem())
	// Runs whose ids share prefixes, each with its own snapshots (space is
	// the lowest byte a run id may hold).
	runs := map[string][]uint64{
		"a":   {10, 20, 30},
		"a b": {5, 15, 25, 35},
		"ab":  {1, 100},
		"a ":  {0, math.MaxUint64},
		"b":   {20},
	}
	b := st.NewBatch()
	for run, seqs := range runs {
		for _, seq := range seqs {
			if err := b.PutSnapshot(testSnapshot(run, seq)); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustCommit(t, b, false)

	const none = math.MaxUint64 - 7 // "want ErrNotFound"
	tests := []struct {
		run  string
		seq  uint64
		want uint64
	}{
		{"a", 0, none}, {"a", 9, none}, {"a", 10, 10}, {"a", 11, 10}, {"a", 19, 10},
		{"a", 20, 20}, {"a", 29, 20}, {"a", 30, 30}, {"a", 31, 30}, {"a", math.MaxUint64, 30},
		{"a b", 4, none}, {"a b", 5, 5}, {"a b", 14, 5}, {"a b", 36, 35},
		{"ab", 0, none}, {"ab", 1, 1}, {"ab", 99, 1}, {"ab", 100, 100}, {"ab", 1000, 100},
		{"a ", 0, 0}, {"a ", 1, 0}, {"a ", math.MaxUint64 - 1, 0}, {"a ", math.MaxUint64, math.MaxUint64},
		{"b", 19, none}, {"b", 20, 20},
		{"c", 50, none}, {"a b ", 50, none}, {" ", 50, none},
	}
	for _, tt := range tests {
		got, err := st.AtOrBelow(tt.run, tt.seq)
		if tt.want == none {
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("AtOrBelow(%q, %d) = %+v, %v; want ErrNotFound", tt.run, tt.seq, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("AtOrBelow(%q, %d): %v", tt.run, tt.seq, err)
			continue
		}
		if got.RunID != tt.run || got.Seq != tt.want {
			t.Errorf("AtOrBelow(%q, %d) = %q/%d, want %q/%d", tt.run, tt.seq, got.RunID, got.Seq, tt.run, tt.want)
		}
		if diff := cmp.Diff(testSnapshot(tt.run, tt.want), got, snapCmp...); diff != "" {
			t.Errorf("AtOrBelow(%q, %d) contents (-want +got):\n%s", tt.run, tt.seq, diff)
		}
	}
	for run, seqs := range runs {
		got, err := st.Snapshots(run)
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(got, seqs) {
			t.Errorf("Snapshots(%q) = %v, want %v", run, got, seqs)
		}
		latest, err := st.Latest(run)
		if err != nil || latest.Seq != seqs[len(seqs)-1] {
			t.Errorf("Latest(%q) = %+v, %v", run, latest, err)
		}
	}
	if _, err := st.Latest("zz"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Latest of unknown run: %v", err)
	}
	if got, err := st.Snapshots("zz"); err != nil || len(got) != 0 {
		t.Errorf("Snapshots of unknown run = %v, %v", got, err)
	}
}

func TestPositionsMissing(t *testing.T) {
	st := openMem(t, vfs.NewMem())
	b := st.NewBatch()
	for _, r := range []struct {
		run   string
		first uint64
		n     int
	}{{"r", 1, 10}, {"r", 12, 5}, {"r ", 11, 1}, {"rr", 11, 1}} {
		pos := make([]Pos, r.n)
		for i := range pos {
			pos[i] = Pos{Segment: 1, Offset: int64(r.first) + int64(i)}
		}
		if err := b.PutPositions(r.run, r.first, pos); err != nil {
			t.Fatal(err)
		}
	}
	mustCommit(t, b, true)

	tests := []struct {
		from, to uint64
		missing  uint64 // 0: none
	}{
		{1, 10, 0}, {5, 5, 0}, {12, 16, 0},
		{1, 11, 11}, {10, 12, 11}, {11, 11, 11}, {12, 17, 17}, {0, 3, 0 + 0},
		{17, 100, 17}, {math.MaxUint64, math.MaxUint64, math.MaxUint64},
	}
	for _, tt := range tests {
		got, err := st.Positions("r", tt.from, tt.to)
		wantMissing := tt.missing
		if tt.from == 0 {
			wantMissing = 0 // seq 0 was never indexed
		}
		if tt.missing == 0 && tt.from != 0 {
			if err != nil {
				t.Errorf("Positions(%d, %d): %v", tt.from, tt.to, err)
				continue
			}
			if uint64(len(got)) != tt.to-tt.from+1 {
				t.Errorf("Positions(%d, %d) returned %d positions", tt.from, tt.to, len(got))
			}
			for i, p := range got {
				if p.Offset != int64(tt.from)+int64(i) {
					t.Errorf("Positions(%d, %d)[%d] = %+v", tt.from, tt.to, i, p)
				}
			}
			continue
		}
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), fmt.Sprintf("seq %d", wantMissing)) {
			t.Errorf("Positions(%d, %d) = %v, %v; want ErrNotFound naming seq %d", tt.from, tt.to, got, err, wantMissing)
		}
	}
	if _, err := st.Positions("r", 5, 4); !errors.Is(err, ErrInvalid) {
		t.Errorf("Positions(5, 4) = %v, want ErrInvalid", err)
	}
	if got, err := st.Positions("nobody", 0, math.MaxUint64); !errors.Is(err, ErrNotFound) {
		t.Errorf("Positions(0, MaxUint64) of unknown run = %d positions, %v; want ErrNotFound", len(got), err)
	}
	if _, err := st.Positions("r", 1, math.MaxUint64); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "seq 11") {
		t.Errorf("Positions(1, MaxUint64) = %v, want ErrNotFound naming seq 11", err)
	}
	top := st.NewBatch()
	if err := top.PutPositions("top", math.MaxUint64-1, []Pos{{Segment: 1, Offset: 1}, {Segment: 1, Offset: 2}}); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, top, false)
	if got, err := st.Positions("top", math.MaxUint64-1, math.MaxUint64); err != nil || len(got) != 2 || got[1].Offset != 2 {
		t.Errorf("Positions at the top of the seq space = %v, %v", got, err)
	}
	if _, err := st.Positions("nobody", 1, 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("Positions of unknown run = %v, want ErrNotFound", err)
	}
}

func TestBadArguments(t *testing.T) {
	st := openMem(t, vfs.NewMem())
	b := st.NewBatch()
	long := strings.Repeat("x", MaxRunIDLen+1)
	for name, err := range map[string]error{
		"nil snapshot":     b.PutSnapshot(nil),
		"empty run":        b.PutSnapshot(&Snapshot{}),
		"long run":         b.PutSnapshot(&Snapshot{RunID: long}),
		"positions no run": b.PutPositions("", 1, []Pos{{}}),
		"negative offset":  b.PutPositions("r", 1, []Pos{{Segment: 0, Offset: 1}, {Segment: 0, Offset: -1}}),
		"seq overflow":     b.PutPositions("r", math.MaxUint64, []Pos{{}, {}}),
		"empty meta key":   b.PutMeta("", nil),
		"long meta key":    b.PutMeta(strings.Repeat("k", MaxMetaKeyLen+1), nil),
		"AtOrBelow no run": func() error { _, err := st.AtOrBelow("", 1); return err }(),
		"Latest long run":  func() error { _, err := st.Latest(long); return err }(),
		"control in run":   b.PutSnapshot(testSnapshot("a\x00b", 1)),
		"run not UTF-8":    b.PutPositions("\xff", 1, []Pos{{}}),
		"Latest control":   func() error { _, err := st.Latest("a\nb"); return err }(),
		"Snapshots no run": func() error { _, err := st.Snapshots(""); return err }(),
		"Positions no run": func() error { _, err := st.Positions("", 1, 2); return err }(),
		"Meta empty key":   func() error { _, err := st.Meta(""); return err }(),
		"DeleteRun no run": st.DeleteRun(""),
		"negative cache":   func() error { _, err := Open("x", &Options{FS: vfs.NewMem(), CacheSize: -1}); return err }(),
		"memtable too big": func() error { _, err := Open("x", &Options{FS: vfs.NewMem(), MemTableSize: 4 << 30}); return err }(),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if b.Len() != 0 {
		t.Errorf("rejected puts were counted: Len = %d", b.Len())
	}
	if err := b.PutPositions("r", 1, nil); err != nil {
		t.Errorf("PutPositions of nothing: %v", err)
	}
	mustCommit(t, b, true) // empty: a no-op
	if err := b.Commit(true); !errors.Is(err, ErrInvalid) {
		t.Errorf("second Commit = %v, want ErrInvalid", err)
	}
	if err := b.PutMeta("k", nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("PutMeta after Commit = %v, want ErrInvalid", err)
	}
	if _, err := st.Meta("absent"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Meta(absent) = %v, want ErrNotFound", err)
	}
	d := st.NewBatch()
	if err := d.PutMeta("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	d.Discard()
	d.Discard()
	if err := d.Commit(true); !errors.Is(err, ErrInvalid) {
		t.Errorf("Commit after Discard = %v, want ErrInvalid", err)
	}
	if _, err := st.Meta("k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a discarded batch was written: %v", err)
	}
}

func TestReplaceAndDeleteRun(t *testing.T) {
	memfs := vfs.NewMem()
	st := openMem(t, memfs)
	b := st.NewBatch()
	for _, s := range []*Snapshot{testSnapshot("a", 1), testSnapshot("a", 2), testSnapshot("ab", 1), testSnapshot("a", 2)} {
		if err := b.PutSnapshot(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.PutPositions("a", 1, []Pos{{Segment: 1, Offset: 1}, {Segment: 1, Offset: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutPositions("ab", 1, []Pos{{Segment: 2, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutMeta("m", []byte("x")); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, b, true)
	if n := st.Stats().Snapshots; n != 3 {
		t.Fatalf("Snapshots after a batch with a duplicate = %d, want 3", n)
	}
	// Replacing an existing snapshot does not count it twice.
	r := testSnapshot("a", 2)
	r.Frame = []byte("replaced")
	b = st.NewBatch()
	if err := b.PutSnapshot(r); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, b, true)
	if n := st.Stats().Snapshots; n != 3 {
		t.Errorf("Snapshots after a replacement = %d, want 3", n)
	}
	if got, err := st.AtOrBelow("a", 2); err != nil || string(got.Frame) != "replaced" {
		t.Errorf("replaced snapshot = %+v, %v", got, err)
	}

	if err := st.DeleteRun("a"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteRun("never"); err != nil {
		t.Errorf("DeleteRun of an unknown run: %v", err)
	}
	if _, err := st.Latest("a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Latest after DeleteRun = %v", err)
	}
	if _, err := st.Positions("a", 1, 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("Positions after DeleteRun = %v", err)
	}
	if _, err := st.Latest("ab"); err != nil {
		t.Errorf("DeleteRun(a) touched run ab: %v", err)
	}
	if _, err := st.Positions("ab", 1, 1); err != nil {
		t.Errorf("DeleteRun(a) touched positions of ab: %v", err)
	}
	if _, err := st.Meta("m"); err != nil {
		t.Errorf("DeleteRun touched metadata: %v", err)
	}
	if n := st.Stats().Snapshots; n != 1 {
		t.Errorf("Snapshots after DeleteRun = %d, want 1", n)
	}
	st.Close()
	if n := openMem(t, memfs).Stats().Snapshots; n != 1 {
		t.Errorf("Snapshots after reopen = %d, want 1", n)
	}
}

func TestClosedAndReadOnly(t *testing.T) {
	memfs := vfs.NewMem()
	st := openMem(t, memfs)
	b := st.NewBatch()
	if err := b.PutSnapshot(testSnapshot("r", 1)); err != nil {
		t.Fatal(err)
	}
	pending := st.NewBatch()
	if err := pending.PutMeta("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, b, true)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v", err)
	}
	for name, err := range map[string]error{
		"Commit":    pending.Commit(true),
		"AtOrBelow": func() error { _, err := st.AtOrBelow("r", 1); return err }(),
		"Latest":    func() error { _, err := st.Latest("r"); return err }(),
		"Snapshots": func() error { _, err := st.Snapshots("r"); return err }(),
		"Positions": func() error { _, err := st.Positions("r", 1, 1); return err }(),
		"Meta":      func() error { _, err := st.Meta("k"); return err }(),
		"DeleteRun": st.DeleteRun("r"),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	late := st.NewBatch()
	if err := late.PutMeta("k", []byte("v")); err != nil {
		t.Errorf("PutMeta on a batch made after Close: %v", err)
	}
	if err := late.Commit(true); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit of a batch made after Close = %v, want ErrClosed", err)
	}
	if !st.Stats().Closed {
		t.Errorf("Stats().Closed is false after Close")
	}

	ro, err := Open("db/snapshots", &Options{FS: memfs, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Latest("r"); err != nil {
		t.Errorf("read-only Latest: %v", err)
	}
	rb := ro.NewBatch()
	if err := rb.PutMeta("k", nil); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only PutMeta = %v", err)
	}
	if err := ro.DeleteRun("r"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only DeleteRun = %v", err)
	}
	if _, err := Open("db/absent", &Options{FS: memfs, ReadOnly: true}); err == nil {
		t.Errorf("read-only Open of a missing directory succeeded")
	}
}

func TestOpenRejectsForeignStore(t *testing.T) {
	memfs := vfs.NewMem()
	db, err := pebble.Open("other", &pebble.Options{FS: memfs, Logger: pebbleLogger{l: discardLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("hello"), []byte("world"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Set(keyCount, []byte("bad"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open("other", &Options{FS: memfs})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "format marker") {
		t.Errorf("Open of a foreign Pebble store = %v, want ErrCorrupt about the format marker", err)
	}

	// A store of this package with a damaged count key.
	st, err := Open("mine", &Options{FS: memfs})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err = pebble.Open("mine", &pebble.Options{FS: memfs, Logger: pebbleLogger{l: discardLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(keyCount, []byte("bad"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open("mine", &Options{FS: memfs}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "count") {
		t.Errorf("Open with a damaged count = %v, want ErrCorrupt about the count", err)
	}
}

func TestCorruptValueInStore(t *testing.T) {
	memfs := vfs.NewMem()
	st, err := Open("s", &Options{FS: memfs})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := pebble.Open("s", &pebble.Options{FS: memfs, Logger: pebbleLogger{l: discardLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	val := AppendSnapshot(nil, testSnapshot("r", 7))
	val[len(val)-6] ^= 1
	if err := db.Set(AppendSnapshotKey(nil, "r", 7), val, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Set(appendRunKey(nil, spacePosition, "r", 1), []byte{1, 0x80}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// A damaged value fails the store: it answers nothing more, with the
	// damage as its sticky error. Each read gets a fresh Open.
	st2, err := Open("s", &Options{FS: memfs, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st2.AtOrBelow("r", 9); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `run "r" seq 7`) {
		t.Errorf("AtOrBelow over a damaged value = %v, want ErrCorrupt naming run r seq 7", err)
	}
	if _, err := st2.Meta("x"); !errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrFailed) {
		t.Errorf("a read after the damage = %v, want the sticky failure", err)
	}
	if f := st2.Stats().Failed; !errors.Is(f, ErrCorrupt) {
		t.Errorf("Stats().Failed = %v, want ErrCorrupt", f)
	}
	st2.Close()
	st3, err := Open("s", &Options{FS: memfs, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st3.Close()
	if _, err := st3.Positions("r", 1, 1); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `run "r" seq 1`) {
		t.Errorf("Positions over a damaged value = %v, want ErrCorrupt naming run r seq 1", err)
	}
}

func TestDiskPermissionsAndLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store", "snapshots")
	st, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := st.NewBatch()
	if err := b.PutSnapshot(testSnapshot("r", 1)); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, b, true)
	if _, err := Open(dir, nil); err == nil {
		t.Errorf("a second Open of the same directory succeeded")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != privfs.DirMode {
			t.Errorf("directory %s has mode %#o, want %#o", d, perm, privfs.DirMode)
		}
	}
	n := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n++
		if perm := fi.Mode().Perm(); perm != privfs.FileMode {
			t.Errorf("file %s has mode %#o, want %#o", path, perm, privfs.FileMode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("no files under %s", dir)
	}
}

// TestConcurrentUse runs writers and readers at once (run it with -race).
func TestConcurrentUse(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	st := openMem(t, vfs.NewMem())
	const writers, perWriter = 3, 20
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := fmt.Sprintf("run-%d", w)
			for i := range perWriter {
				seq := uint64(i+1) * 10
				b := st.NewBatch()
				pos := make([]Pos, 10)
				for j := range pos {
					pos[j] = Pos{Segment: seq, Offset: int64(j)}
				}
				err := errors.Join(b.PutSnapshot(testSnapshot(run, seq)), b.PutPositions(run, seq-9, pos), b.Commit(i%2 == 0))
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(r)))
			for range 200 {
				run := fmt.Sprintf("run-%d", rng.IntN(writers))
				seq := rng.Uint64N(perWriter*10 + 20)
				s, err := st.AtOrBelow(run, seq)
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if s.Seq > seq || s.RunID != run {
					errs <- fmt.Errorf("AtOrBelow(%q, %d) = %q/%d", run, seq, s.RunID, s.Seq)
					return
				}
				if _, err := st.Positions(run, s.Seq-9, s.Seq); err != nil {
					errs <- fmt.Errorf("positions up to snapshot %d: %w", s.Seq, err)
					return
				}
				_ = st.Stats()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := st.Stats().Snapshots; n != writers*perWriter {
		t.Errorf("Snapshots = %d, want %d", n, writers*perWriter)
	}
}

func TestDeleteSnapshot(t *testing.T) {
	s, err := Open("snaps", &Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.NewBatch()
	for _, seq := range []uint64{50, 100, 150} {
		if err := b.PutSnapshot(&Snapshot{RunID: "r", Seq: seq, Frame: []byte("f")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b = s.NewBatch()
	if err := b.DeleteSnapshot("r", 100); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteSnapshot("r", 999); err != nil { // absent: not counted
		t.Fatal(err)
	}
	if err := b.PutSnapshot(&Snapshot{RunID: "r", Seq: 100, Frame: []byte("f")}); err == nil {
		t.Fatal("put and delete of one snapshot in one batch accepted")
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	seqs, err := s.Snapshots("r")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seqs) != "[50 150]" || s.Stats().Snapshots != 2 {
		t.Fatalf("after deleting 100: %v, count %d", seqs, s.Stats().Snapshots)
	}
	got, err := s.AtOrBelow("r", 120)
	if err != nil || got.Seq != 50 {
		t.Fatalf("AtOrBelow(120) = %v %v, want the snapshot at 50", got, err)
	}
}
