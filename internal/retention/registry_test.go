package retention

import (
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

func TestMergeGone(t *testing.T) {
	h := func(b byte) chain.Hash { return chain.Hash{b} }
	at := time.Unix(100, 0)
	del := &Gone{Seq: 5, Final: h(1), Head: h(2), At: at, Reason: "policy", Parent: "p"}
	era := &Gone{Seq: 6, Final: h(2), Head: h(3), At: at, Reason: "gdpr",
		Erasure: &Erasure{Seq: 6, Head: h(3), At: at, Reason: "gdpr"}}
	merged := del.WithErasure(era.Erasure)
	other := &Gone{Seq: 5, Final: h(9), Head: h(8), At: at}
	for _, tc := range []struct {
		name string
		a, b *Gone
		want *Gone
		why  string
	}{
		{"first", nil, del, del, ""},
		{"same twice", del, del, del, ""},
		{"delete then erase", del, era, merged, ""},
		{"erase then delete", era, del, merged, ""},
		{"merged then erase record again", merged, era, merged, ""},
		{"merged then delete record again", merged, del, merged, ""},
		{"two deletions", del, other, nil, "deletes run \"r\" twice"},
		{"erase not after the delete", other, era, nil, "deletes run \"r\" twice"},
	} {
		got, why := Merge("r", tc.a, tc.b)
		if tc.why != "" {
			if got != nil || !strings.Contains(why, tc.why) {
				t.Errorf("%s: got %+v, %q; want nil, %q", tc.name, got, why, tc.why)
			}
			continue
		}
		if why != "" || got == nil || !got.same(tc.want) || got.Parent != tc.want.Parent {
			t.Errorf("%s: got %+v, %q; want %+v", tc.name, got, why, tc.want)
		}
	}
	// An erasure read first keeps the parent the deletion knew.
	noParent := *del
	noParent.Parent = ""
	eraP := *era
	eraP.Parent = "p"
	if got, _ := Merge("r", &eraP, &noParent); got == nil || got.Parent != "p" || got.Erasure == nil {
		t.Errorf("parent lost: %+v", got)
	}
}

func TestRegistry(t *testing.T) {
	var r Registry
	at := time.Unix(1, 0)
	r.Mark("b", nil) // being deleted
	if !r.Has("b") || len(r.Durable()) != 0 {
		t.Fatalf("a deletion being written: Has %v, Durable %v", r.Has("b"), r.Durable())
	}
	r.Unmark("b")
	if r.Has("b") {
		t.Fatal("Unmark kept b")
	}
	if why := r.Merge("a", &Gone{Seq: 2, At: at, Parent: "root"}); why != "" {
		t.Fatal(why)
	}
	if why := r.Merge("c", &Gone{Seq: 3, At: at, Erasure: &Erasure{Seq: 3}}); why != "" {
		t.Fatal(why)
	}
	if why := r.Merge("a", &Gone{Seq: 2, Final: chain.Hash{7}, At: at}); why == "" {
		t.Fatal("a second, different deletion of a merged")
	}
	ids, gone := r.Sorted()
	if strings.Join(ids, ",") != "a,c" || gone[0].Seq != 2 || gone[1].Seq != 3 {
		t.Fatalf("Sorted: %v %+v", ids, gone)
	}
	if e := r.Erased(); len(e) != 1 || e[0] != "c" {
		t.Fatalf("Erased: %v", e)
	}
	if f := r.ForksOf("root"); len(f) != 1 || f[0] != "a" {
		t.Fatalf("ForksOf: %v", f)
	}
	// A batch made durable: each id marked with its own deletion.
	r.Mark("d", nil)
	r.MarkGone([]string{"d", "e"}, []*Gone{{Seq: 4, At: at}, {Seq: 5, At: at}})
	if d, ok := r.Get("d"); !ok || d == nil || d.Seq != 4 {
		t.Fatalf("MarkGone d: %+v", d)
	}
	if e, ok := r.Get("e"); !ok || e == nil || e.Seq != 5 {
		t.Fatalf("MarkGone e: %+v", e)
	}
}

// TestRegistryReplay: a delete record that follows the run's end is
// marked with the run's parent; one that does not, or of an active run,
// is refused and marks nothing; an erase record after a deletion merges.
func TestRegistryReplay(t *testing.T) {
	at := time.Unix(100, 0).UnixNano()
	run := &fakeRun{id: "r", last: 3} // ends at seq 4 with head {3}
	del := &record.Record{Kind: record.KindDelete, Run: "r", Seq: 5, Final: chain.Hash{3}, Head: chain.Hash{7}, Deleted: at}
	var reg Registry
	bad := *del
	bad.Seq = 6
	if why := reg.Replay(&bad, run, "p"); !strings.Contains(why, "ends at seq 4") || reg.Has("r") {
		t.Fatalf("a deletion past the end: %q, marked %v", why, reg.Has("r"))
	}
	if why := reg.Replay(del, run, "p"); why != "" {
		t.Fatal(why)
	}
	if g, _ := reg.Get("r"); g == nil || g.Seq != 5 || g.Parent != "p" || g.Erasure != nil {
		t.Fatalf("marked %+v", g)
	}
	era := &record.Record{Kind: record.KindErase, Run: "r", Seq: 6, Final: chain.Hash{7}, Head: chain.Hash{8}, Deleted: at, Reason: "gdpr"}
	if why := reg.Replay(era, nil, ""); why != "" {
		t.Fatal(why)
	}
	if g, _ := reg.Get("r"); g == nil || g.Seq != 5 || g.Erasure == nil || g.Erasure.Seq != 6 {
		t.Fatalf("merged %+v", g)
	}
	// A run the replay has not built: marked as the record says.
	if why := reg.Replay(&record.Record{Kind: record.KindDelete, Run: "x", Seq: 2, Deleted: at}, nil, ""); why != "" || !reg.Has("x") {
		t.Fatalf("an unbuilt run: %q", why)
	}
}
