package retention

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/runview"
	"github.com/continuumdb/continuum/record"
)

type fakeRun struct {
	id   string
	last uint64
}

func (r *fakeRun) ID() string   { return r.id }
func (r *fakeRun) Base() uint64 { return 0 }
func (r *fakeRun) ChainHead() (uint64, chain.Hash, bool) {
	return r.last + 1, chain.Hash{byte(r.last)}, true
}
func (r *fakeRun) StateAt(context.Context, uint64) (*frame.Frame, error) {
	return nil, errors.New("not read")
}

// fakeTable is a table of ended runs; gc is the lock Delete must hold
// while it takes and writes.
type fakeTable struct {
	gc        *GC
	runs      map[string]*fakeRun
	parents   map[string]string
	taken     []string
	appended  [][]byte
	appendErr error
	restored  []string
	gone      map[string]*Gone
	tracked   int
}

func (t *fakeTable) LogFailed() error                 { return nil }
func (t *fakeTable) WaitLedger(context.Context) error { return nil }
func (t *fakeTable) CheckRegistry() error             { return nil }
func (t *fakeTable) StartDirSyncs()                   {}
func (t *fakeTable) Track() func()                    { t.tracked++; return func() { t.tracked-- } }

func (t *fakeTable) Take(choose func([]Candidate, *Registry) ([]string, error)) ([]runview.Run, error) {
	if t.gc.mu.TryLock() {
		t.gc.mu.Unlock()
		return nil, errors.New("Take without GC's lock")
	}
	var cands []Candidate
	for id := range t.runs {
		cands = append(cands, Candidate{ID: id, Parent: t.parents[id], Ended: true, Status: "completed", EndedAt: time.Unix(100, 0)})
	}
	var reg Registry
	for id, g := range t.gone {
		reg.Mark(id, g)
	}
	ids, err := choose(cands, &reg)
	if err != nil {
		return nil, err
	}
	var out []runview.Run
	for _, id := range ids {
		out = append(out, t.runs[id])
		delete(t.runs, id)
		t.taken = append(t.taken, id)
	}
	return out, nil
}

func (t *fakeTable) Append(_ context.Context, recs [][]byte) error {
	if t.tracked != 1 {
		return fmt.Errorf("the records are written untracked (%d)", t.tracked)
	}
	if t.appendErr != nil {
		return t.appendErr
	}
	t.appended = recs
	return nil
}

func (t *fakeTable) Restore(rs []runview.Run) {
	for _, r := range rs {
		t.runs[r.ID()] = r.(*fakeRun)
		t.restored = append(t.restored, r.ID())
	}
}

func (t *fakeTable) Gone(k record.Kind, ids []string, g []*Gone, rs []runview.Run) {
	if k != record.KindDelete || len(ids) != len(rs) {
		panic(fmt.Sprintf("Gone of kind %v, %d ids, %d runs", k, len(ids), len(rs)))
	}
	for i, id := range ids {
		t.gone[id] = g[i]
	}
}

func newTable() *fakeTable {
	t := &fakeTable{gc: new(GC), runs: map[string]*fakeRun{}, parents: map[string]string{"c": "b"}, gone: map[string]*Gone{}}
	for i, id := range []string{"a", "b", "c"} {
		t.runs[id] = &fakeRun{id: id, last: uint64(3 + i)}
	}
	return t
}

// TestDeleteConducted: Delete writes one record per chosen run, under
// GC's lock and tracked, and marks them gone; refusals and a failed write
// leave every run in the table, none gone.
func TestDeleteConducted(t *testing.T) {
	ctx := context.Background()
	h, err := chain.NewHasher(nil)
	if err != nil {
		t.Fatal(err)
	}
	sign := Signing{Hasher: h, StoreID: "store"}

	tb := newTable()
	ds, err := Delete(ctx, tb.gc, tb, Selection{IDs: []string{"a", "b", "c"}, Reason: "why"}, testErrs, sign)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 3 || len(tb.appended) != 3 || len(tb.gone) != 3 || len(tb.runs) != 0 || tb.tracked != 0 {
		t.Fatalf("deleted %d, appended %d, gone %d, left %d, tracked %d", len(ds), len(tb.appended), len(tb.gone), len(tb.runs), tb.tracked)
	}
	for _, d := range ds {
		g := tb.gone[d.Run]
		want := uint64(map[string]uint64{"a": 4, "b": 5, "c": 6}[d.Run]) + 1
		if d.Seq != want || g.Seq != d.Seq || g.Head != d.Head || g.Final != d.Final || d.Reason != "why" || g.Parent != tb.parents[d.Run] {
			t.Fatalf("deletion %+v, gone %+v: want the link after the end at seq %d", d, g, want-1)
		}
	}
	if !tb.gc.mu.TryLock() {
		t.Fatal("GC's lock held after Delete")
	}
	tb.gc.mu.Unlock()

	// A run with a fork not deleted with it: refused, nothing taken.
	tb = newTable()
	if _, err := Delete(ctx, tb.gc, tb, Selection{IDs: []string{"b"}}, testErrs, sign); !errors.Is(err, testErrs.HasForks) || len(tb.taken) != 0 || len(tb.gone) != 0 {
		t.Fatalf("a parent without its fork: %v, taken %v", err, tb.taken)
	}
	// The write fails: every run taken is put back, none is gone.
	tb = newTable()
	tb.appendErr = errors.New("disk full")
	if _, err := Delete(ctx, tb.gc, tb, Selection{IDs: []string{"a", "b", "c"}}, testErrs, sign); !errors.Is(err, tb.appendErr) {
		t.Fatalf("a failed write: %v", err)
	}
	slices.Sort(tb.restored)
	if !slices.Equal(tb.restored, []string{"a", "b", "c"}) || len(tb.runs) != 3 || len(tb.gone) != 0 || tb.tracked != 0 {
		t.Fatalf("after a failed write: restored %v, table %d, gone %d, tracked %d", tb.restored, len(tb.runs), len(tb.gone), tb.tracked)
	}
	// An invalid selection is refused before anything.
	tb = newTable()
	if _, err := Delete(ctx, tb.gc, tb, Selection{}, testErrs, sign); !errors.Is(err, testErrs.Invalid) || len(tb.taken) != 0 {
		t.Fatalf("an empty selection: %v", err)
	}
}
