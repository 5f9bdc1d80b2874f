package snapindex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

var errClosed = errors.New("engine: store closed")

// host is a store of runs over a real log on a MemFS.
type host struct {
	fs      vfs.FS
	log     *wal.Log
	indexed map[string]uint64
	resets  int
	unclean int
	stop    chan struct{}
}

func newHost(t *testing.T, fs vfs.FS, atoms map[string]int) *host {
	t.Helper()
	l, err := wal.Open("/s/"+layout.WALDir, &wal.Options{FS: fs, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	comp := frame.NewCompressor(frame.NewDicts())
	h := &host{fs: fs, log: l, indexed: map[string]uint64{}, stop: make(chan struct{})}
	for run, n := range atoms {
		for seq := 1; seq <= n; seq++ {
			rec := record.AppendAtomHeader(nil, run, uint64(seq), chain.Hash{byte(seq)})
			rec = comp.Compress(rec, record.AppendAtomBody(nil, nil, []byte(fmt.Sprint(run, seq))), 0)
			if _, err := l.Append(context.Background(), rec); err != nil {
				t.Fatal(err)
			}
		}
		h.indexed[run] = uint64(n)
	}
	return h
}

func (h *host) ResetIndexed() map[string]uint64 {
	h.resets++
	m := map[string]uint64{}
	for k, v := range h.indexed {
		m[k] = v
	}
	return m
}

func (h *host) Cursor(dec *record.Decoder) (*record.Cursor, error) {
	return record.NewCursor(h.log, func(seg uint64) string { return wal.SegmentName(seg) }, wal.Pos{}, dec)
}
func (h *host) Stopping() <-chan struct{} { return h.stop }
func (h *host) Unclean()                  { h.unclean++ }

func keeper(h *host, gen uint64) *Keeper {
	return New(Config{FS: h.fs, Dir: "/s", NoSync: true, OnNeed: true, CheckpointGen: gen, Closed: errClosed}, h)
}

// opened starts k's open and waits for it to end (Get does not wait for
// a re-index).
func opened(k *Keeper) (*snapshot.Store, error) {
	k.OpenOnce()
	<-k.ready
	return k.snap, k.err
}

func storeGen(t *testing.T, fs vfs.FS) uint64 {
	t.Helper()
	s, err := snapshot.Open("/s/"+layout.SnapshotsDir, &snapshot.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := s.Meta(MetaCheckpointGen)
	if errors.Is(err, snapshot.ErrNotFound) {
		return 0
	}
	if err != nil || len(v) != 8 {
		t.Fatalf("generation: %x, %v", v, err)
	}
	return uint64(v[7]) | uint64(v[6])<<8
}

func TestCreatedOnNeedAndReindexed(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	h := newHost(t, fs, map[string]int{"a": 3, "b": 5})

	// A store checkpointed (generation 4) without a snapshot store: Start
	// creates none, Get does, and indexes the log into it.
	k := keeper(h, 4)
	k.Start()
	if k.Exists() {
		t.Fatal("Start created the snapshot store; it is created on first need")
	}
	if _, err := k.Get(ctx); err != nil && !errors.Is(err, ErrIndexing) {
		t.Fatalf("Get while indexing: %v, want the store or ErrIndexing", err)
	}
	s, err := opened(k)
	if err != nil || s == nil {
		t.Fatalf("open: %v, %v", s, err)
	}
	if h.resets != 1 {
		t.Fatalf("the log was indexed %d times into a store older than CHECKPOINT, want 1", h.resets)
	}
	for run, n := range h.indexed {
		pos, err := s.Positions(run, 1, n)
		if err != nil || uint64(len(pos)) != n {
			t.Fatalf("run %s: %d positions, %v; want %d", run, len(pos), err, n)
		}
	}
	if err := k.Err(); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if g := storeGen(t, fs); g != 4 {
		t.Fatalf("generation %d after the re-index, want 4", g)
	}
	// Closed before it opened: never opened.
	k = keeper(h, 4)
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Get(ctx); !errors.Is(err, errClosed) {
		t.Fatalf("Get after Close: %v, want the closed error", err)
	}
	if err := k.Err(); err != nil {
		t.Fatalf("Err after Close: %v, want nil (closed is not a failure)", err)
	}

	// Of the same generation: opened by Start, not indexed again.
	k = keeper(h, 4)
	k.Start()
	if s, _ := k.Usable(ctx); s == nil {
		t.Fatal("the existing store is not usable")
	}
	if h.resets != 1 {
		t.Fatal("a store of CHECKPOINT's generation was indexed again")
	}
	k.Close()
}

func TestReindexRefusesShortLog(t *testing.T) {
	fs := vfs.NewMem()
	h := newHost(t, fs, map[string]int{"a": 3})
	h.indexed["a"] = 7 // the runs say 7 atoms were indexed; the log holds 3
	k := keeper(h, 2)
	s, err := opened(k)
	var ce *record.CorruptionError
	if s != nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), "holds 3 of its 7 indexed atoms") {
		t.Fatalf("Get: %v, %v; want the log's damage named", s, err)
	}
	if k.Err() == nil || h.unclean == 0 {
		t.Fatalf("Err %v, unclean %d: the failure must be reported", k.Err(), h.unclean)
	}
	k.Close()
}

func TestSkipAbsent(t *testing.T) {
	fs := vfs.NewMem()
	h := newHost(t, fs, nil)
	k := keeper(h, 0)
	k.SkipAbsent(func() bool { return false })
	if _, err := k.Get(context.Background()); !errors.Is(err, errClosed) || k.Exists() {
		t.Fatalf("Get after SkipAbsent: %v (exists %v); want closed, nothing created", err, k.Exists())
	}
	k.Close()
	k = keeper(h, 0)
	k.SkipAbsent(func() bool { return true })
	if s, err := k.Get(context.Background()); s == nil || err != nil {
		t.Fatalf("Get after SkipAbsent that creates: %v, %v", s, err)
	}
	k.Close()
}

func TestMismatchFailsStore(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	h := newHost(t, fs, map[string]int{"a": 1})
	k := keeper(h, 0)
	s, _ := k.Usable(ctx)
	if s == nil {
		t.Fatal("no store")
	}
	k.Mismatch(s, "a", 1, fmt.Errorf("atom index: %w", snapshot.ErrFailed)) // its own I/O failure: not a mismatch
	if k.Mismatches() != 0 || s.Err() != nil {
		t.Fatalf("an I/O failure counted as a mismatch (%d) or failed the store (%v)", k.Mismatches(), s.Err())
	}
	k.Mismatch(s, "a", 1, errors.New("snapshot head differs from the log's"))
	if k.Mismatches() != 1 || s.Err() == nil || k.Err() == nil {
		t.Fatalf("mismatches %d, store %v, Err %v; want 1 and a failed store", k.Mismatches(), s.Err(), k.Err())
	}
	if s, err := k.Usable(ctx); s != nil || err != nil {
		t.Fatalf("Usable after a mismatch: %v, %v; want none", s, err)
	}
	k.Close()
}

func TestScanPositions(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	h := newHost(t, fs, map[string]int{"a": 4, "b": 2})
	k := keeper(h, 0)
	pos, err := k.ScanPositions(ctx, "a", 1, 3)
	if err != nil || len(pos) != 3 {
		t.Fatalf("ScanPositions: %v, %v", pos, err)
	}
	_, err = k.ScanPositions(ctx, "b", 0, 3)
	var ce *record.CorruptionError
	if !errors.As(err, &ce) || ce.Run != "b" || ce.Seq != 3 {
		t.Fatalf("a short log: %v; want a corruption error at run b seq 3", err)
	}
}

func TestRebuildable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{snapshot.ErrCorrupt, true},
		{&record.CorruptionError{File: "x", Reason: "bad"}, true},
		{fmt.Errorf("open: %w", fs.ErrNotExist), true},
		{errors.New("pebble: unknown table format"), true},
		{fmt.Errorf("open: %w", syscall.ENOENT), true},
		{fmt.Errorf("open: %w", syscall.EIO), false},
		{snapshot.ErrNewerFormat, false},
		{snapshot.ErrFailed, false},
		{fmt.Errorf("x: %w", errClosed), false},
	} {
		if got := Rebuildable(c.err, errClosed); got != c.want {
			t.Errorf("Rebuildable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestReadAtom(t *testing.T) {
	fs := vfs.NewMem()
	h := newHost(t, fs, map[string]int{"a": 2})
	pos, err := keeper(h, 0).ScanPositions(context.Background(), "a", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	name := func(seg uint64) string { return wal.SegmentName(seg) }
	if a, err := ReadAtom(h.log, name, nil, pos[1], "a", 2); err != nil || a.Run != "a" || a.Seq != 2 {
		t.Fatalf("ReadAtom: %+v, %v", a, err)
	}
	for _, c := range []struct {
		run string
		seq uint64
	}{{"a", 1}, {"b", 2}} {
		if _, err := ReadAtom(h.log, name, nil, pos[1], c.run, c.seq); !errors.Is(err, ErrNotThisAtom) {
			t.Errorf("atom a/2 read as %s/%d: %v, want ErrNotThisAtom", c.run, c.seq, err)
		}
	}
}

func TestPositionsAndNearest(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	h := newHost(t, fs, map[string]int{"a": 5})
	k := keeper(h, 0)
	s, _ := opened(k)
	if s == nil {
		t.Fatal("no store")
	}
	defer k.Close()
	all, err := k.ScanPositions(ctx, "a", 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	if err := b.PutPositions("a", 1, all[:3]); err != nil { // atoms 1..3 indexed
		t.Fatal(err)
	}
	if err := b.PutSnapshot(&snapshot.Snapshot{RunID: "a", Seq: 2, Frame: []byte("f"), Plain: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	mem := all[3:] // atoms 4..5 in memory
	pos, bad, err := Positions(s, "a", 2, 5, 3, mem)
	if bad != nil || err != nil || len(pos) != 4 || pos[0] != all[1] || pos[3] != all[4] {
		t.Fatalf("Positions 2..5: %v, %v, %v", pos, bad, err)
	}
	if _, _, err := Positions(s, "a", 2, 6, 3, mem); err == nil {
		t.Fatal("a seq neither indexed nor in memory: no error")
	}
	if _, bad, _ := Positions(s, "b", 1, 2, 3, nil); bad == nil {
		t.Fatal("positions the index lacks: no mismatch")
	}
	if snap, at, err := Nearest(s, "a", 0, 4); err != nil || snap == nil || at != 2 {
		t.Fatalf("Nearest(4): %v, %d, %v", snap, at, err)
	}
	if snap, at, err := Nearest(s, "a", 0, 1); err != nil || snap != nil || at != 0 {
		t.Fatalf("Nearest(1): %v, %d, %v; want none, from the run's base", snap, at, err)
	}
	if _, at, err := Nearest(s, "a", 2, 4); err == nil || at != 2 {
		t.Fatalf("a snapshot at the fork point: %d, %v; want a mismatch at seq 2", at, err)
	}
}
