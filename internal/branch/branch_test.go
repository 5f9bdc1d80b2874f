package branch

import (
	"errors"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
)

func mem(k string) record.StateKey { return record.StateKey{Kind: record.KeyMemory, Name: k} }

// core is a Core that records what the Set asked of it.
type core struct {
	durable  map[uint64]bool // seq -> durable
	failAt   uint64          // Apply of this seq fails
	log      []string
	released []uint64
}

func (c *core) Durable(x *Commit[string]) bool {
	if c.durable[x.Seq] {
		x.Durable = true
		return true
	}
	return false
}

func (c *core) Apply(x *Commit[string]) error {
	if x.Seq == c.failAt {
		return errors.New("apply failed")
	}
	c.log = append(c.log, "apply "+x.Payload)
	return nil
}

func (c *core) Release(x *Commit[string])   { c.released = append(c.released, x.Seq) }
func (c *core) Committed(x *Commit[string]) { c.log = append(c.log, "after "+x.Payload) }

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		reads []record.StateKey
		want  string // substring of the error, "" for none
	}{
		{"plan", nil, ""},
		{"plan", []record.StateKey{mem("a"), {Kind: record.KeyObjective}}, ""},
		{"", nil, `engine: branch of run "r"`},
		{"bad\x00name", nil, `engine: branch of run "r"`},
		{"plan", make([]record.StateKey, record.MaxBranchReads+1), "declares"},
		{"plan", []record.StateKey{{Kind: record.KeyObjective, Name: "x"}}, `engine: branch "plan" of run "r"`},
	}
	for i, tt := range tests {
		err := Check("r", tt.name, tt.reads)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%d: Check(%q): %v", i, tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%d: Check(%q) = %v, want an error with %q", i, tt.name, err, tt.want)
		}
	}
}

func TestBeginNames(t *testing.T) {
	s := NewSet[string]("r", Tail{Seq: 4}, 8)
	a := s.Begin("a", 4, []record.StateKey{mem("z"), mem("b")})
	if a == nil || a.Base != 4 || a.Reads[0] != mem("b") {
		t.Fatalf("Begin: %+v", a)
	}
	if s.Begin("a", 4, nil) != nil {
		t.Fatal("a second live branch of the same name")
	}
	s.Enqueue(a, nil, chain.Hash{1}, 10, 4, "a")
	if s.Begin("a", 4, nil) != nil {
		t.Fatal("a branch of the name of a committing one")
	}
	if s.Live(a) || s.Len() != 1 || s.Tail().Seq != 5 || s.Tail().Head != (chain.Hash{1}) {
		t.Fatalf("after Enqueue: live %v len %d tail %+v", s.Live(a), s.Len(), s.Tail())
	}
	s.Publish(&core{durable: map[uint64]bool{5: true}}, 4)
	if !s.Idle() || a.Seq() != 5 {
		t.Fatalf("after Publish: idle %v seq %d", s.Idle(), a.Seq())
	}
	if b := s.Begin("a", 5, nil); b == nil {
		t.Fatal("the name is not free after its commit")
	}
}

func TestConflictRule(t *testing.T) {
	s := NewSet[string]("r", Tail{Seq: 10}, 8)
	old := s.Begin("old", 10, []record.StateKey{mem("read")})
	other := s.Begin("other", 10, nil)
	first := s.Begin("first", 10, nil)
	s.Enqueue(first, []record.StateKey{mem("a"), mem("read")}, chain.Hash{}, 0, 10, "first") // seq 11
	if c := s.Conflict(other, []record.StateKey{mem("b")}); c != nil {
		t.Fatalf("disjoint writes conflict: %+v", c)
	}
	if c := s.Conflict(other, []record.StateKey{mem("a")}); c == nil || c.Seq != 11 || c.Key != mem("a") || c.Lost {
		t.Fatalf("a write-write conflict: %+v", c)
	}
	if c := s.Conflict(old, []record.StateKey{mem("c")}); c == nil || c.Key != mem("read") {
		t.Fatalf("a declared read written after the base: %+v", c)
	}
	// A branch based at the atom that wrote the key does not conflict.
	late := s.Begin("late", 11, nil)
	if c := s.Conflict(late, []record.StateKey{mem("a")}); c != nil {
		t.Fatalf("a write at the base itself conflicts: %+v", c)
	}
}

func TestWindow(t *testing.T) {
	s := NewSet[string]("r", Tail{Seq: 0}, 3)
	slow := s.Begin("slow", 0, nil)
	for i := range 5 {
		b := s.Begin("w", uint64(i), nil)
		s.Enqueue(b, []record.StateKey{mem("k")}, chain.Hash{}, 0, uint64(i), "w")
		s.Publish(&core{durable: map[uint64]bool{uint64(i + 1): true}}, uint64(i))
	}
	// Five atoms after slow's base, three write sets kept: atoms 1 and 2
	// are forgotten, so slow lost.
	c := s.Conflict(slow, []record.StateKey{mem("other")})
	if c == nil || !c.Lost || c.Seq != 3 {
		t.Fatalf("a base older than the window: %+v", c)
	}
	s.End(slow, 5)
	if !s.Idle() {
		t.Fatal("not idle after the last branch ended")
	}
	// No branch live: nothing at or below the last seq is kept.
	fresh := s.Begin("fresh", 5, nil)
	if c := s.Conflict(fresh, []record.StateKey{mem("k")}); c != nil {
		t.Fatalf("a fresh branch conflicts: %+v", c)
	}
}

func TestPublishInOrder(t *testing.T) {
	s := NewSet[string]("r", Tail{Seq: 0}, 8)
	var cs []*Commit[string]
	for _, n := range []string{"a", "b", "c"} {
		cs = append(cs, s.Enqueue(s.Begin(n, 0, nil), nil, chain.Hash{}, 0, 0, n))
	}
	k := &core{durable: map[uint64]bool{2: true, 3: true}}
	s.Publish(k, 0)
	if len(k.log) != 0 {
		t.Fatalf("applied past a commit that is not durable: %v", k.log)
	}
	k.durable[1] = true
	s.Publish(k, 0)
	want := "apply a,after a,apply b,after b,apply c,after c"
	if got := strings.Join(k.log, ","); got != want {
		t.Fatalf("Publish: %s, want %s", got, want)
	}
	for _, c := range cs {
		select {
		case <-c.Done():
		default:
			t.Fatalf("commit %d not settled", c.Seq)
		}
		if c.Err() != nil || !c.Settled() || c.Branch.Seq() != c.Seq {
			t.Fatalf("commit %d: err %v seq %d", c.Seq, c.Err(), c.Branch.Seq())
		}
	}
	if !s.Idle() {
		t.Fatal("not idle")
	}
}

func TestFailChain(t *testing.T) {
	s := NewSet[string]("r", Tail{Seq: 0}, 8)
	var cs []*Commit[string]
	for _, n := range []string{"a", "b", "c"} {
		cs = append(cs, s.Enqueue(s.Begin(n, 0, nil), nil, chain.Hash{}, 0, 0, n))
	}
	k := &core{durable: map[uint64]bool{1: true}}
	s.Publish(k, 0)
	bad := errors.New("log failed")
	s.Fail(cs[1], bad, k)
	if cs[0].Err() != nil || !errors.Is(cs[1].Err(), bad) || !errors.Is(cs[2].Err(), bad) {
		t.Fatalf("errs %v %v %v", cs[0].Err(), cs[1].Err(), cs[2].Err())
	}
	if !errors.Is(s.Failed(), bad) || s.Idle() || s.Len() != 0 {
		t.Fatalf("failed %v idle %v len %d", s.Failed(), s.Idle(), s.Len())
	}
	if got := k.released; len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("released %v", got)
	}
}

func TestApplyFailureFailsTheRest(t *testing.T) {
	s := NewSet[string]("r", Tail{Seq: 0}, 8)
	var cs []*Commit[string]
	for _, n := range []string{"a", "b", "c"} {
		cs = append(cs, s.Enqueue(s.Begin(n, 0, nil), nil, chain.Hash{}, 0, 0, n))
	}
	k := &core{durable: map[uint64]bool{1: true, 2: true, 3: true}, failAt: 2}
	s.Publish(k, 0)
	if cs[0].Err() != nil || cs[1].Err() == nil || cs[2].Err() == nil || s.Failed() == nil {
		t.Fatalf("errs %v %v %v failed %v", cs[0].Err(), cs[1].Err(), cs[2].Err(), s.Failed())
	}
	if got := strings.Join(k.log, ","); got != "apply a,after a" {
		t.Fatalf("log %s", got)
	}
}

func TestBound(t *testing.T) {
	s := NewSet[string]("r", Tail{Seq: 0, Bound: 100}, 8)
	if b, w := s.Bound(50, 1000); b != 150 || w != nil {
		t.Fatalf("Bound: %d %v", b, w)
	}
	if b, w := s.Bound(950, 1000); b != 1050 || w != nil {
		t.Fatalf("Bound over the limit, nothing queued: %d %v", b, w)
	}
	c := s.Enqueue(s.Begin("a", 0, nil), nil, chain.Hash{}, 500, 0, "a")
	if b, w := s.Bound(600, 1000); b != 1100 || w != c.Done() {
		t.Fatalf("Bound over the limit behind a queued commit: %d", b)
	}
}

func TestOtherKey(t *testing.T) {
	for _, tt := range []struct {
		key  string
		want bool
	}{
		{ledger.BranchKey("r", "a", 0), false},
		{ledger.BranchKey("r", "a", 7), false},
		{ledger.BranchKey("r", "b", 0), true},
		{ledger.BranchKey("r", "ab", 0), true},
		{ledger.BranchKey("r2", "b", 0), false},
		{ledger.BranchKey("", "b", 0), false},
		{"explicit", false},
	} {
		if got := OtherKey("r", "a", tt.key); got != tt.want {
			t.Errorf("OtherKey(r, a, %q) = %v, want %v", tt.key, got, tt.want)
		}
	}
}

// TestStart: each refusal matches its sentinel, in the order Start
// checks them; an idle run passes.
func TestStart(t *testing.T) {
	errs := Errors{AtomInProgress: errors.New("in progress"), RunEnded: errors.New("ended")}
	pending := errors.New("pending")
	for _, c := range []struct {
		st   State
		want error
	}{
		{State{Run: "r"}, nil},
		{State{Run: "r", Running: 4, Interrupted: 4, Ended: true, Rollback: pending}, errs.AtomInProgress},
		{State{Run: "r", Interrupted: 4, Ended: true}, errs.AtomInProgress},
		{State{Run: "r", Ended: true, Rollback: pending}, errs.RunEnded},
		{State{Run: "r", Rollback: pending}, pending},
	} {
		err := Start(c.st, errs)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.st, err, c.want)
		}
	}
}

// TestWithKey: a branch's calls take its BranchKey, an atom of Begin's
// the run's default key.
func TestWithKey(t *testing.T) {
	in := &ledger.Intent{Tool: "t"}
	s := NewSet[string]("r", Tail{}, 8)
	b, err := s.Open("a", 0, nil, Errors{})
	if err != nil {
		t.Fatal(err)
	}
	if got := WithKey(in, b, 3); got.Key != ledger.BranchKey("r", "a", 3) || got.Index != 3 {
		t.Fatalf("a branch's key: %q, index %d", got.Key, got.Index)
	}
	if got, want := WithKey(in, nil, 3), in.WithDefaultKey(3); got.Key != want.Key || got.Index != want.Index {
		t.Fatalf("an atom of Begin's key: %q, want %q", got.Key, want.Key)
	}
}

func TestRefuseBegin(t *testing.T) {
	errs := Errors{AtomInProgress: errors.New("atom in progress")}
	var none *Set[string]
	if none.Len() != 0 || none.RefuseBegin(errs) != nil {
		t.Fatalf("a run without a Set: len %d, refusal %v", none.Len(), none.RefuseBegin(errs))
	}
	s := NewSet[string]("r", Tail{Seq: 4}, 8)
	s.Begin("a", 4, nil)
	s.Enqueue(s.Begin("b", 4, nil), nil, chain.Hash{1}, 10, 4, "b")
	err := s.RefuseBegin(errs)
	if !errors.Is(err, errs.AtomInProgress) || err.Error() != `atom in progress: run "r" has 2 branches in flight: Begin waits for them to commit or fail` {
		t.Fatalf("RefuseBegin: %v", err)
	}
}

func TestExt(t *testing.T) {
	s := NewSet[string]("r", Tail{Seq: 4}, 8)
	b := s.Begin("plan", 4, []record.StateKey{mem("z"), mem("b")})
	x := b.Ext()
	if x.Tag != record.ExtTagBase {
		t.Fatalf("tag %d", x.Tag)
	}
	got, err := record.DecodeBranchBase(x.Data)
	if err != nil || got.Base != 4 || got.Branch != "plan" || len(got.Reads) != 2 || got.Reads[0] != mem("b") || got.Reads[1] != mem("z") {
		t.Fatalf("DecodeBranchBase: %+v, %v", got, err)
	}
}
