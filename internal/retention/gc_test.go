package retention

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// fakeCore is a Core over a log written by the test: it records the
// calls, and its checkpoint's replay position is the log's end.
type fakeCore struct {
	log     *wal.Log
	deleted map[string]bool
	ready   error
	calls   []string
	forgot  []ledger.Fingerprint
}

// LogFailed is the first of Health's checks: it records "ready".
func (c *fakeCore) LogFailed() error                 { c.calls = append(c.calls, "ready"); return c.ready }
func (c *fakeCore) WaitLedger(context.Context) error { return nil }
func (c *fakeCore) CheckRegistry() error             { return nil }
func (c *fakeCore) StartDirSyncs()                   {}
func (c *fakeCore) Checkpoint() (wal.Pos, error) {
	c.calls = append(c.calls, "checkpoint")
	return c.log.End(), nil
}
func (c *fakeCore) StoreHead() (bool, error) {
	c.calls = append(c.calls, "storehead")
	return false, nil
}
func (c *fakeCore) Deleted() map[string]bool {
	c.calls = append(c.calls, "deleted")
	return c.deleted
}
func (c *fakeCore) DropDerived(_ context.Context, runs map[string]bool) error {
	c.calls = append(c.calls, "dropderived")
	return nil
}
func (c *fakeCore) Forget(fps []ledger.Fingerprint) int {
	c.calls = append(c.calls, "forget")
	c.forgot = append(c.forgot, fps...)
	return len(fps)
}
func (c *fakeCore) Closed() error { return nil }

var _ Core = (*fakeCore)(nil)

// testLog writes, in 4 KiB segments, ten ended runs d0..d9, then the
// live run "live", then the delete records of d0..d9 and a store head of them
// alone, and returns the log and the GC over it.
func testLog(t *testing.T, liveFirst bool) (*wal.Log, *GC, vfs.FS) {
	t.Helper()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("store", 0o700); err != nil {
		t.Fatal(err)
	}
	log, err := wal.Open("store/wal", &wal.Options{FS: fs, SegmentSize: wal.MinSegmentSize, InitialSegmentSize: wal.MinSegmentSize, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	ctx := context.Background()
	app := func(rec []byte) {
		if _, err := log.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	h, err := chain.NewHasher(nil)
	if err != nil {
		t.Fatal(err)
	}
	result := []byte(strings.Repeat("r", 1000))
	if liveFirst {
		app(record.AppendRun(nil, "live", chain.Nonce{99}, 3))
	}
	for i := range 10 {
		run := fmt.Sprintf("d%d", i)
		app(record.AppendRun(nil, run, chain.Nonce{byte(i)}, 1))
		app(record.AppendEnd(nil, run, 1, chain.Hash{byte(i)}, 1, 2, result))
	}
	if !liveFirst {
		app(record.AppendRun(nil, "live", chain.Nonce{99}, 3))
	}
	head := chain.StoreHead{StoreID: "s"}
	for i := range 10 {
		run := fmt.Sprintf("d%d", i)
		d := NewDeletion(h, run, 1, chain.Hash{byte(i)}, timeAt(4), "test")
		rec, err := d.Record("s", nil)
		if err != nil {
			t.Fatal(err)
		}
		app(rec)
		head.Runs = append(head.Runs, chain.RunHead{RunID: run, Seq: 2})
	}
	app(record.AppendNote(nil, record.KindStoreHead, chain.MarshalStoreHead(head)))
	if len(log.Segments()) < 4 {
		t.Fatalf("the test log has %d segments, want several", len(log.Segments()))
	}
	g := &GC{}
	g.Start(Env{Log: log, File: func(seg uint64) string { return fmt.Sprintf("segment %d", seg) },
		Decoder: func() *record.Decoder { return &record.Decoder{} }, FS: fs, Dir: "store", StoreID: [16]byte{1},
		NoSync: true, CompactDead: 0.5, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return log, g, fs
}

// records lists the log's records as kind:run.
func records(t *testing.T, log *wal.Log) []string {
	t.Helper()
	c, err := record.NewCursor(log, func(seg uint64) string { return fmt.Sprint(seg) }, wal.Pos{}, &record.Decoder{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []string
	for c.Next() {
		r := c.Record()
		out = append(out, fmt.Sprintf("%v:%s", r.Kind, RunOf(r)))
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCollect: a collection over a log whose first runs are deleted: the
// steps run in order, the dead prefix goes below a RETENTION that
// explains it, the rest is compacted where dead enough, every live record
// (the live run, every delete record) stays, and a second collection
// finds nothing.
func TestCollect(t *testing.T) {
	for _, liveFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("liveFirst=%v", liveFirst), func(t *testing.T) { testCollect(t, liveFirst) })
	}
}

func testCollect(t *testing.T, liveFirst bool) {
	log, g, fs := testLog(t, liveFirst)
	deleted := map[string]bool{}
	for i := range 10 {
		deleted[fmt.Sprintf("d%d", i)] = true
	}
	core := &fakeCore{log: log, deleted: deleted}
	before := records(t, log)
	st, err := g.Collect(context.Background(), core)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ready", "checkpoint", "storehead", "deleted", "dropderived"}; !slices.Equal(core.calls, want) {
		t.Fatalf("calls %v, want %v", core.calls, want)
	}
	ret, err := layout.ReadRetention(fs, "store", &[16]byte{1})
	switch {
	case liveFirst:
		// The live first segment stays; the wholly dead ones after it
		// are compacted to stubs, and the segment where the deleted runs
		// begin is compacted too.
		if st.Segments != 0 || st.Compacted < 2 || st.Emptied == 0 || log.Segments()[0].ID != 1 || !log.AnyCompacted() || ret != nil || err != nil {
			t.Fatalf("stats %+v, first segment %d, RETENTION %+v, %v", st, log.Segments()[0].ID, ret, err)
		}
	default:
		if st.Segments == 0 || st.Floor <= 1 || log.Segments()[0].ID != st.Floor {
			t.Fatalf("stats %+v, first segment %d", st, log.Segments()[0].ID)
		}
		if err != nil || ret == nil || ret.Floor != st.Floor || ret.Segments != uint64(st.Segments) || ret.Bytes != uint64(st.Bytes) {
			t.Fatalf("RETENTION %+v, %v; stats %+v", ret, err, st)
		}
	}
	after := records(t, log)
	for _, want := range before {
		if strings.HasSuffix(want, ":live") || strings.HasPrefix(want, record.KindDelete.String()) {
			if !slices.Contains(after, want) {
				t.Fatalf("live record %s is gone; left %v", want, after)
			}
		}
	}
	if len(after) >= len(before) {
		t.Fatalf("nothing removed: %d records before, %d after", len(before), len(after))
	}
	// A deleted run keeps a suffix of its records only: no creation
	// record without its end.
	for i := range 10 {
		run := fmt.Sprintf("d%d", i)
		if slices.Contains(after, record.KindRun.String()+":"+run) && !slices.Contains(after, record.KindEnd.String()+":"+run) {
			t.Fatalf("run %s keeps its creation without its end: %v", run, after)
		}
	}

	t.Logf("stats %+v; %d records of %d left", st, len(after), len(before))
	core.calls = nil
	st2, err := g.Collect(context.Background(), core)
	if err != nil || st2.Segments != 0 || st2.Compacted != 0 {
		t.Fatalf("second collection: %+v, %v", st2, err)
	}
}

// TestCollectNotReady: a collection the engine is not ready for does
// nothing, and its error says it is GC's and wraps the cause.
func TestCollectNotReady(t *testing.T) {
	log, g, _ := testLog(t, false)
	cause := errors.New("the log failed")
	core := &fakeCore{log: log, ready: cause}
	n := len(log.Segments())
	_, err := g.Collect(context.Background(), core)
	if !errors.Is(err, cause) || !strings.HasPrefix(err.Error(), "engine: gc: ") || !slices.Equal(core.calls, []string{"ready"}) || len(log.Segments()) != n {
		t.Fatalf("%v; calls %v", err, core.calls)
	}
}

// TestRequestClosed: a collection requested of a closed engine, or with
// a cancelled context, returns at once.
func TestRequestClosed(t *testing.T) {
	var g GC
	g.Start(Env{})
	stop := make(chan struct{})
	close(stop)
	errClosed := errors.New("closed")
	if _, err := g.Request(context.Background(), stop, errClosed); err != errClosed {
		t.Fatalf("closed: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Request(ctx, make(chan struct{}), errClosed); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func timeAt(ns int64) time.Time { return time.Unix(0, ns) }
