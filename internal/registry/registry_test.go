package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

type host struct {
	deleted map[string]bool
	closed  error
	// others are the records of other kinds Scan handed over; otherErr
	// is what Other returns.
	others   []string
	otherErr error
}

func (h *host) Deleted(r *record.Record, parent string) string {
	if h.deleted[r.Run] {
		return "deleted twice"
	}
	h.deleted[r.Run] = true
	return ""
}
func (h *host) KeyErased(*record.Record)  {}
func (h *host) IsDeleted(run string) bool { return h.deleted[run] }
func (h *host) Closed() error             { return h.closed }
func (h *host) Other(r *record.Record) error {
	h.others = append(h.others, fmt.Sprintf("%v %s/%d", r.Kind, r.Run, r.Seq))
	return h.otherErr
}

// scan writes recs to a new log and scans it whole (to: its end).
func scan(t *testing.T, h *host, trimmed bool, recs ...[]byte) (map[string]*Run, error) {
	t.Helper()
	return scanSkip(t, h, trimmed, Skip, recs...)
}

// scanSkip is scan with the cursor's Skip skip.
func scanSkip(t *testing.T, h *host, trimmed bool, skip func(record.Kind, []byte) bool, recs ...[]byte) (map[string]*Run, error) {
	t.Helper()
	l, err := wal.Open("/wal", &wal.Options{FS: vfs.NewMem(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var end wal.Pos
	for _, rec := range recs {
		p, err := l.Append(context.Background(), rec)
		if err != nil {
			t.Fatal(err)
		}
		end = wal.Pos{Segment: p.Segment, Offset: p.Offset + 1}
	}
	c, err := record.NewCursor(l, wal.SegmentName, wal.Pos{}, &record.Decoder{Skip: skip})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hasher, _ := chain.NewHasher(nil)
	return Scan(c, end, hasher, wal.SegmentName, trimmed, h)
}

var comp = frame.NewCompressor(frame.NewDicts())

func atom(run string, seq uint64) []byte {
	rec := record.AppendAtomHeader(nil, run, seq, chain.Hash{byte(seq)})
	return comp.Compress(rec, record.AppendAtomBody(nil, nil, []byte("d")), 0)
}

func del(run string, seq uint64) []byte {
	note := chain.MarshalCheckpoint(chain.Checkpoint{StoreID: "s", RunID: run, Seq: seq, Head: chain.Hash{7}, Final: true})
	return record.AppendDelete(nil, run, seq, chain.Hash{}, chain.Hash{7}, 1, "", note)
}

func TestScan(t *testing.T) {
	h := &host{deleted: map[string]bool{}}
	runs, err := scan(t, h, false,
		record.AppendRun(nil, "a", chain.Nonce{1}, 10),
		record.AppendRun(nil, "b", chain.Nonce{2}, 20),
		atom("a", 1), atom("a", 2), atom("a", 1), // a repeated seq is skipped, as the replay does
		record.AppendEnd(nil, "a", 3, chain.Hash{9}, 1, 99, []byte("done")),
		atom("b", 1),
	)
	if err != nil {
		t.Fatal(err)
	}
	a, b := runs["a"], runs["b"]
	if a == nil || b == nil || a.Last != 2 || a.Head != (chain.Hash{2}) || len(a.Pos) != 2 || a.End == nil || string(a.End.RowResult()) != "done" ||
		a.End.Ended != 99 || a.Created != 10 || b.Last != 1 || b.Nonce != (chain.Nonce{2}) {
		t.Fatalf("runs: a %+v, b %+v", a, b)
	}
	row := layout.CheckpointRun{ID: "a", Nonce: a.Nonce, Created: 10, LastSeq: 2, Head: a.Head, Status: 1, Ended: 99, EndHead: chain.Hash{9}, Result: []byte("done")}
	if why := Disagrees(&row, a); why != "" {
		t.Fatalf("a right row disagrees: %s", why)
	}
	for _, c := range []struct {
		edit func(*layout.CheckpointRun)
		want string
	}{
		{func(c *layout.CheckpointRun) { c.Nonce[0]++ }, "another nonce"},
		{func(c *layout.CheckpointRun) { c.Created++ }, "another creation time"},
		{func(c *layout.CheckpointRun) { c.Parent = "x" }, "forked from"},
		{func(c *layout.CheckpointRun) { c.LastSeq = 3 }, "CHECKPOINT says 3"},
		{func(c *layout.CheckpointRun) { c.Result = []byte("other") }, "disagree on its head or end"},
		{func(c *layout.CheckpointRun) { c.Ended++ }, "disagree on its head or end"},
	} {
		r := row
		c.edit(&r)
		if why := Disagrees(&r, a); !strings.Contains(why, c.want) {
			t.Errorf("Disagrees = %q, want %q", why, c.want)
		}
	}
	if why := Disagrees(&row, nil); !strings.Contains(why, "not in the log") {
		t.Errorf("a run the log lacks: %q", why)
	}
}

func TestScanDamage(t *testing.T) {
	for _, c := range []struct {
		name string
		recs [][]byte
		want string
		seq  uint64
	}{
		{"gap", [][]byte{record.AppendRun(nil, "a", chain.Nonce{1}, 1), atom("a", 1), atom("a", 3)}, "atoms between them are missing", 2},
		{"orphan atom", [][]byte{atom("z", 1)}, "creation record is not in the log", 1},
		{"atom after end", [][]byte{record.AppendRun(nil, "a", chain.Nonce{1}, 1), record.AppendEnd(nil, "a", 1, chain.Hash{}, 1, 1, nil), atom("a", 1)}, "atom after the run ended", 1},
		{"deletion before end", [][]byte{record.AppendRun(nil, "a", chain.Nonce{1}, 1), atom("a", 1),
			del("a", 3)}, "does not follow the run's end", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := scan(t, &host{deleted: map[string]bool{}}, false, c.recs...)
			var ce *record.CorruptionError
			if !errors.As(err, &ce) || !strings.Contains(ce.Reason, c.want) || ce.Seq != c.seq {
				t.Fatalf("%v; want damage %q at seq %d", err, c.want, c.seq)
			}
		})
	}
	// In a trimmed log an orphan is fine when the log deletes the run.
	h := &host{deleted: map[string]bool{}}
	if _, err := scan(t, h, true, atom("z", 5), del("z", 7)); err != nil {
		t.Fatalf("orphan of a deleted run in a trimmed log: %v", err)
	}
	if _, err := scan(t, &host{deleted: map[string]bool{}}, true, atom("z", 5)); err == nil {
		t.Fatal("orphan of a live run in a trimmed log: no error")
	}
	closed := errors.New("closed")
	if _, err := scan(t, &host{deleted: map[string]bool{}, closed: closed}, false, atom("z", 1)); !errors.Is(err, closed) {
		t.Fatalf("a scan while closing: %v", err)
	}
}

// fakeTable records what Reconcile asks of the engine's table.
type fakeTable struct {
	built, deleted map[string]bool
	calls          []string
}

func (t *fakeTable) Deleted(id string) bool { return t.deleted[id] }
func (t *fakeTable) Built(id string) bool   { return t.built[id] }
func (t *fakeTable) Drop(id string)         { t.calls = append(t.calls, "drop "+id) }
func (t *fakeTable) Add(id string, lr *Run) { t.calls = append(t.calls, "add "+id) }
func (t *fakeTable) Fix(id string, c *layout.CheckpointRun, lr *Run, err error) {
	t.calls = append(t.calls, fmt.Sprintf("fix %s %v %v", id, lr != nil, err))
}
func (t *fakeTable) Relink() { t.calls = append(t.calls, "relink") }

func TestReconcile(t *testing.T) {
	right := &Run{Nonce: chain.Nonce{1}, Created: 5, Last: 3, Head: chain.Hash{3}}
	rows := []layout.CheckpointRun{
		{ID: "ok", Nonce: chain.Nonce{1}, Created: 5, LastSeq: 3, Head: chain.Hash{3}},
		{ID: "gone-row", LastSeq: 1},   // not in the log, not built
		{ID: "gone-built", LastSeq: 1}, // not in the log, built
		{ID: "deleted", LastSeq: 1},    // deleted after the replay position
		{ID: "wrong-seq", Nonce: chain.Nonce{1}, Created: 5, LastSeq: 9, Head: chain.Hash{3}}, // built
		{ID: "wrong-row", Nonce: chain.Nonce{2}, Created: 5, LastSeq: 3, Head: chain.Hash{3}}, // not built
	}
	log := map[string]*Run{"ok": right, "wrong-seq": right, "wrong-row": right, "extra": right, "again": right}
	tb := &fakeTable{built: map[string]bool{"gone-built": true, "wrong-seq": true, "again": true}, deleted: map[string]bool{"deleted": true}}
	got := Reconcile(rows, log, tb, func(id, why string) error { return fmt.Errorf("broken %s", id) })
	want := []string{"drop gone-row", "fix gone-built false broken gone-built", "fix wrong-seq true broken wrong-seq",
		"drop wrong-row", "add wrong-row", "add extra", "relink"}
	if fmt.Sprint(tb.calls) != fmt.Sprint(want) {
		t.Fatalf("calls %q, want %q", tb.calls, want)
	}
	for _, id := range []string{"gone-row", "gone-built", "wrong-seq", "wrong-row", "extra"} {
		if !strings.Contains(got, fmt.Sprintf("%q", id)) {
			t.Errorf("mismatch %q does not name %s", got, id)
		}
	}
	if strings.Contains(got, `"ok"`) || strings.Contains(got, `"deleted"`) || strings.Contains(got, `"again"`) {
		t.Errorf("mismatch %q names a run that agrees", got)
	}
	// More than 8 disagreements: the first 8, then how many more.
	var many []layout.CheckpointRun
	for i := 0; i < 11; i++ {
		many = append(many, layout.CheckpointRun{ID: fmt.Sprintf("r%02d", i)})
	}
	tb = &fakeTable{}
	if got := Reconcile(many, nil, tb, func(id, why string) error { return nil }); !strings.HasSuffix(got, "; and 3 more") {
		t.Errorf("11 disagreements: %q", got)
	}
	if got := Reconcile(rows[:1], log, &fakeTable{built: map[string]bool{"extra": true, "wrong-seq": true, "wrong-row": true, "again": true}}, nil); got != "" {
		t.Errorf("agreeing rows: %q", got)
	}
}

// TestScanOthers: the records of other kinds the cursor's Skip lets
// through (the engine's records of waits, for the check of WAITS in the
// same read) are handed to Host.Other in the log's order, before and
// after the replay position, and change nothing of the runs; Other's
// error stops the scan.
func TestScanOthers(t *testing.T) {
	waitRec := func(run string, seq uint64) []byte {
		return record.AppendWaitRecord(nil, record.KindWait, run, seq, chain.Hash{}, chain.Hash{byte(seq)}, &record.WaitFields{Name: "go", At: 1})
	}
	skip := func(k record.Kind, raw []byte) bool { return k != record.KindWait && Skip(k, raw) }
	recs := [][]byte{record.AppendRun(nil, "a", chain.Nonce{1}, 10), atom("a", 1), waitRec("a", 1), atom("a", 2), waitRec("a", 2)}
	h := &host{deleted: map[string]bool{}}
	runs, err := scanSkip(t, h, false, skip, recs...)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(h.others); got != "[wait a/1 wait a/2]" {
		t.Fatalf("Other was handed %s", got)
	}
	if a := runs["a"]; a == nil || a.Last != 2 {
		t.Fatalf("runs %+v", runs)
	}
	// Skip as Scan's own: nothing else is handed over.
	h = &host{deleted: map[string]bool{}}
	if _, err := scan(t, h, false, recs...); err != nil || len(h.others) != 0 {
		t.Fatalf("with Skip: %v, others %v", err, h.others)
	}
	h = &host{deleted: map[string]bool{}, otherErr: errors.New("stop")}
	if _, err := scanSkip(t, h, false, skip, recs...); err == nil || err.Error() != "stop" {
		t.Fatalf("Other's error: %v", err)
	}
}

// TestSettle: the scan's deletions are merged into the engine's before
// the table changes; one that disagrees stops it there.
func TestSettle(t *testing.T) {
	rows := []layout.CheckpointRun{{ID: "gone-row", LastSeq: 1}}
	broken := func(id, why string) error { return nil }
	found := &Collector{}
	found.Gone.Mark("d", &retention.Gone{Seq: 5})
	var deleted retention.Registry
	tb := &fakeTable{deleted: map[string]bool{}}
	mismatch, why := Settle(rows, nil, found, &deleted, tb, broken)
	if why != "" || !deleted.Has("d") || !strings.Contains(mismatch, "gone-row") || fmt.Sprint(tb.calls) != "[drop gone-row relink]" {
		t.Fatalf("Settle = %q, %q; deleted d %v; calls %v", mismatch, why, deleted.Has("d"), tb.calls)
	}
	found = &Collector{}
	found.Gone.Mark("d", &retention.Gone{Seq: 6})
	tb = &fakeTable{deleted: map[string]bool{}}
	if mismatch, why := Settle(rows, nil, found, &deleted, tb, broken); why == "" || mismatch != "" || len(tb.calls) != 0 {
		t.Fatalf("a second deletion of d at another seq: Settle = %q, %q; calls %v", mismatch, why, tb.calls)
	}
}
