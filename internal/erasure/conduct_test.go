package erasure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/internal/runview"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/record"
)

// tableRun is a run of table: ended at seq 4 unless active.
type tableRun struct {
	id string
}

func (r *tableRun) ID() string   { return r.id }
func (r *tableRun) Base() uint64 { return 0 }
func (r *tableRun) ChainHead() (uint64, chain.Hash, bool) {
	return 4, chain.Hash{9}, true
}
func (r *tableRun) StateAt(context.Context, uint64) (*frame.Frame, error) {
	return nil, errors.New("not read")
}

// table is an erasure's Runs and its table of runs over one Eraser: the
// live runs as candidates, the registry of deleted runs, and what
// EraseRun asked of it, the locks and tracking it held.
type table struct {
	e        *Eraser
	cands    []retention.Candidate
	reg      retention.Registry
	locked   bool
	tracked  int
	restored []string
	gone     map[string]*retention.Gone
	finished int
	events   []string
}

func newTable(e *Eraser, cands ...retention.Candidate) *table {
	return &table{e: e, cands: cands, gone: map[string]*retention.Gone{}}
}

func ended(id, parent string) retention.Candidate {
	return retention.Candidate{ID: id, Parent: parent, Ended: true, Status: "completed"}
}

func (t *table) LogFailed() error                 { return nil }
func (t *table) WaitLedger(context.Context) error { return nil }
func (t *table) CheckRegistry() error             { return nil }
func (t *table) StartDirSyncs()                   {}
func (t *table) Lock()                            { t.locked = true }
func (t *table) Unlock()                          { t.locked = false }
func (t *table) Erased() []string                 { return t.reg.Erased() }
func (t *table) Deletion(run string) *retention.Gone {
	g, _ := t.reg.Get(run)
	return g
}
func (t *table) Track() func() {
	t.tracked++
	return func() { t.tracked--; t.events = append(t.events, "untrack") }
}

func (t *table) Take(choose func([]retention.Candidate, *retention.Registry) ([]string, error)) ([]runview.Run, error) {
	if !t.locked || t.tracked != 1 {
		return nil, errors.New("Take outside the lock or untracked")
	}
	ids, err := choose(slices.Clone(t.cands), &t.reg)
	if err != nil {
		return nil, err
	}
	var out []runview.Run
	for _, id := range ids {
		t.cands = slices.DeleteFunc(t.cands, func(c retention.Candidate) bool { return c.ID == id })
		t.reg.Mark(id, nil)
		out = append(out, &tableRun{id: id})
	}
	return out, nil
}

func (t *table) Append(context.Context, [][]byte) error { return errors.New("not a deletion") }

func (t *table) Restore(rs []runview.Run) {
	for _, r := range rs {
		t.reg.Unmark(r.ID())
		t.cands = append(t.cands, ended(r.ID(), ""))
		t.restored = append(t.restored, r.ID())
	}
}

func (t *table) Gone(k record.Kind, ids []string, g []*retention.Gone, rs []runview.Run) {
	if k != record.KindErase {
		panic(fmt.Sprintf("Gone of kind %v", k))
	}
	for i, id := range ids {
		t.reg.Mark(id, g[i])
		t.gone[id] = g[i]
	}
	t.events = append(t.events, fmt.Sprintf("recorded %d live", len(rs)))
}

func (t *table) Finish(_ context.Context, run string) error {
	t.finished++
	t.events = append(t.events, "finish")
	return t.e.DropRun(run)
}

// TestEraseRun: the steps in their order (the record durable and
// recorded before the replay position is let go, then the engine's
// steps), refusals that change nothing, a failed record that puts the
// run back, and an erased run finished only while KEYS holds its key.
func TestEraseRun(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, true)
	e := newEraser(s, "m")
	runWith(t, s, e, "r", "m", []byte("v"))

	// Refusals: nothing taken, nothing written, the key live.
	active := ended("r", "")
	active.Ended = false
	deletedFork := newTable(e, ended("r", ""))
	deletedFork.reg.Mark("f2", &retention.Gone{Seq: 3, Parent: "r"})
	beingDeleted := newTable(e)
	beingDeleted.reg.Mark("r", nil)
	for _, c := range []struct {
		name string
		tb   *table
		want error
	}{
		{"active", newTable(e, active), refusals.NotEnded},
		{"a live fork", newTable(e, ended("r", ""), ended("f", "r")), refusals.HasForks},
		{"a deleted fork", deletedFork, refusals.HasForks},
		{"being deleted", beingDeleted, refusals.Deleted},
		{"unknown", newTable(e), nil},
	} {
		err := e.EraseRun(ctx, c.tb, "r", "why")
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) || len(s.recs) != 0 || len(c.tb.restored) != 0 || len(c.tb.gone) != 0 || !e.Live("r") {
			t.Fatalf("%s: %v (want %v), %d records, restored %v, gone %v", c.name, err, c.want, len(s.recs), c.tb.restored, c.tb.gone)
		}
		if c.name == "a live fork" && len(c.tb.cands) != 2 {
			t.Fatalf("a refused erasure took a run: %v", c.tb.cands)
		}
	}

	s.failLog = errors.New("log failed")
	tb := newTable(e, ended("r", "p"))
	if err := e.EraseRun(ctx, tb, "r", "why"); !errors.Is(err, s.failLog) || !slices.Equal(tb.restored, []string{"r"}) || len(tb.gone) != 0 || tb.finished != 0 || !e.Live("r") || tb.reg.Has("r") {
		t.Fatalf("a failed record: %v, restored %v, gone %v, finished %d", err, tb.restored, tb.gone, tb.finished)
	}
	s.failLog = nil

	// A failed record whose mark could not be removed: the run back, the
	// next Open unclean (it removes the mark), a warning logged.
	var unclean atomic.Bool
	var logged bytes.Buffer
	e.cfg.Unclean, e.cfg.Logger = &unclean, slog.New(slog.NewTextHandler(&logged, nil))
	s.failLog, s.failKeysAfterLog = errors.New("log failed"), errors.New("disk full")
	tb = newTable(e, ended("r", "p"))
	if err := e.EraseRun(ctx, tb, "r", "why"); !errors.Is(err, s.failLog) || !slices.Equal(tb.restored, []string{"r"}) || len(tb.gone) != 0 ||
		!unclean.Load() || !strings.Contains(logged.String(), "remove the mark of an erasure that failed") || !strings.Contains(logged.String(), "disk full") {
		t.Fatalf("a failed record, the mark kept: %v, restored %v, gone %v, unclean %v, logged %q", err, tb.restored, tb.gone, unclean.Load(), logged.String())
	}
	s.failLog, s.failKeysAfterLog = nil, nil
	if err := e.Unmark("r"); err != nil || !e.Live("r") {
		t.Fatalf("the mark removed later: %v, live %v", err, e.Live("r"))
	}

	tb = newTable(e, ended("r", "p"))
	if err := e.EraseRun(ctx, tb, "r", "why"); err != nil {
		t.Fatal(err)
	}
	g := tb.gone["r"]
	if g == nil || g.Seq != 5 || g.Final != (chain.Hash{9}) || g.Parent != "p" || g.Erasure == nil || g.Erasure.Seq != 5 || g.Erasure.Reason != "why" ||
		len(s.recs) != 1 || e.Live("r") || tb.locked || tb.tracked != 0 {
		t.Fatalf("erased: gone %+v, %d records, live %v, locked %v, tracked %d", g, len(s.recs), e.Live("r"), tb.locked, tb.tracked)
	}
	if want := []string{"recorded 1 live", "untrack", "finish"}; !slices.Equal(tb.events, want) {
		t.Fatalf("steps %v, want %v", tb.events, want)
	}

	// Erased already, KEYS without the key: nothing to do.
	tb.events, tb.finished = nil, 0
	if err := e.EraseRun(ctx, tb, "r", "why"); err != nil || tb.finished != 0 || len(s.recs) != 1 {
		t.Fatalf("erased again: %v, finished %d, %d records", err, tb.finished, len(s.recs))
	}
	// Erased already, but KEYS holds a key of the run again (older KEYS):
	// finished, no second record.
	runWith(t, s, e, "r", "m", []byte("v"))
	if err := e.EraseRun(ctx, tb, "r", "why"); err != nil || tb.finished != 1 || len(s.recs) != 1 || e.Live("r") {
		t.Fatalf("an erased run whose key is back: %v, finished %d, %d records, live %v", err, tb.finished, len(s.recs), e.Live("r"))
	}

	// A deleted run: erased after its deletion's link, no run taken.
	runWith(t, s, e, "d", "m", []byte("v"))
	tb = newTable(e)
	del := &retention.Gone{Seq: 7, Head: chain.Hash{7}, Reason: "deleted", Parent: "q"}
	tb.reg.Mark("d", del)
	if err := e.EraseRun(ctx, tb, "d", "why"); err != nil {
		t.Fatal(err)
	}
	if g := tb.gone["d"]; g == nil || g.Seq != 7 || g.Reason != "deleted" || g.Parent != "q" || g.Erasure == nil || g.Erasure.Seq != 8 || e.Live("d") ||
		!slices.Equal(tb.events, []string{"recorded 0 live", "untrack", "finish"}) {
		t.Fatalf("a deleted run erased: %+v, live %v, steps %v", g, e.Live("d"), tb.events)
	}
}

// TestEraseChecks: Erase and EraseKey refuse a plaintext store, a reason
// too long, a closed queue; EraseKey a deleted or unknown run.
func TestEraseChecks(t *testing.T) {
	ctx := context.Background()
	plain := newEraser(newStore(t, false), "m")
	if _, err := plain.Erase(ctx, newTable(plain), "r", "", nil); !errors.Is(err, offline.ErrKeyring) {
		t.Fatalf("erase in a plaintext store: %v", err)
	}
	if _, err := plain.EraseKey(ctx, keyRuns{}, "r", "m", ""); !errors.Is(err, offline.ErrKeyring) {
		t.Fatal("erase key in a plaintext store")
	}
	s := newStore(t, true)
	e := newEraser(s, "m")
	long := string(make([]byte, record.MaxDeleteReason+1))
	if _, err := e.Erase(ctx, newTable(e), "r", long, nil); !errors.Is(err, errInvalidOptions) {
		t.Fatalf("a long reason: %v", err)
	}
	stop := make(chan struct{})
	close(stop)
	if _, err := e.Erase(ctx, newTable(e), "r", "", stop); !errors.Is(err, errClosed) {
		t.Fatalf("a closing store: %v", err)
	}
	// Served by the Jobs goroutine: the erasure as the registry holds it.
	runWith(t, s, e, "q", "m", []byte("v"))
	go func() { job := <-e.Jobs(); job() }()
	d, err := e.Erase(ctx, newTable(e, ended("q", "")), "q", "", make(chan struct{}))
	if err != nil || d == nil || d.Erasure == nil || d.Erasure.Reason != "erased by request" || e.Live("q") {
		t.Fatalf("erase: %+v, %v, live %v", d, err, e.Live("q"))
	}
	s.recs = nil
	if _, err := e.EraseKey(ctx, keyRuns{deleted: true}, "r", "m", ""); !errors.Is(err, refusals.Deleted) {
		t.Fatalf("erase key of a deleted run: %v", err)
	}
	if _, err := e.EraseKey(ctx, keyRuns{}, "r", "m", ""); err == nil {
		t.Fatal("erase key of an unknown run")
	}
	if _, err := e.EraseKey(ctx, keyRuns{run: &tableRun{id: "r"}}, "r", "", ""); !errors.Is(err, errInvalidOptions) {
		t.Fatalf("an empty key: %v", err)
	}
	runWith(t, s, e, "r", "m", []byte("v"))
	k, err := e.EraseKey(ctx, keyRuns{run: &tableRun{id: "r"}}, "r", "m", "")
	if err != nil || k.Seq != 4 || len(k.KeyNos) != 1 || k.Reason != "erased by request" || len(s.recs) != 1 {
		t.Fatalf("erase key: %+v, %v, %d records", k, err, len(s.recs))
	}
}

type keyRuns struct {
	run     runview.Run
	deleted bool
}

func (k keyRuns) Find(string) (runview.Run, bool, error) { return k.run, k.deleted, nil }
func (k keyRuns) Track() func()                          { return func() {} }
func (k keyRuns) LogFailed() error                       { return nil }
