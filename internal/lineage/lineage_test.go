package lineage

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
)

// run is a fake Run: its parent, fork point, and its actions' intents by
// (seq, index).
type run struct {
	id      string
	parent  string
	at      uint64
	held    *run
	intents map[[2]uint64][]*ledger.Intent
	err     error // of Intents
	asked   int
	states  map[uint64]*frame.Frame // StateAt's; none: an error
}

func (r *run) ID() string                            { return r.id }
func (r *run) Base() uint64                          { return r.at }
func (r *run) ChainHead() (uint64, chain.Hash, bool) { return 0, chain.Hash{}, false }
func (r *run) StateAt(_ context.Context, seq uint64) (*frame.Frame, error) {
	if f, ok := r.states[seq]; ok {
		return f, nil
	}
	return nil, errors.New("lineage reads no state but ParentState's")
}

func (r *run) Link() (string, uint64, Run) {
	if r.held == nil {
		return r.parent, r.at, nil
	}
	return r.parent, r.at, r.held
}

func (r *run) Actions(_ context.Context, seq uint64, index uint32) ([]ledger.Fingerprint, error) {
	r.asked++
	// First the actions of the atom's other positions, and one the ledger
	// holds no intent of (Actions may list more than the position's):
	// Intents leaves them out.
	fps := []ledger.Fingerprint{{0xee}}
	for k, ins := range r.intents {
		if k[0] == seq && k[1] != uint64(index) {
			for _, in := range ins {
				fps = append(fps, in.Fingerprint)
			}
		}
	}
	for _, in := range r.intents[[2]uint64{seq, uint64(index)}] {
		fps = append(fps, in.Fingerprint)
	}
	return fps, r.err
}

func (r *run) Where() (string, string) { return "/s/wal", "/s/CHECKPOINT" }

// book is a fake Ledger over the intents of runs: the intent at Offset i
// is ins[i-1].
type book struct{ ins []*ledger.Intent }

func bookOf(runs ...*run) *book {
	b := &book{}
	for _, r := range runs {
		for _, ins := range r.intents {
			b.ins = append(b.ins, ins...)
		}
	}
	return b
}

func (b *book) Lookup(fp ledger.Fingerprint) (ledger.Entry, bool) {
	for i, in := range b.ins {
		if in.Fingerprint == fp {
			return ledger.Entry{Fingerprint: fp, Status: ledger.StatusIntent, IntentLoc: ledger.Loc{Segment: 1, Offset: int64(i) + 1}}, true
		}
	}
	return ledger.Entry{}, false
}

func (b *book) Intent(loc ledger.Loc) (*ledger.Intent, error) {
	if loc.Offset < 1 || loc.Offset > int64(len(b.ins)) {
		return nil, errors.New("no intent there")
	}
	return b.ins[loc.Offset-1], nil
}

func fork(id string, p *run, at uint64) *run { return &run{id: id, parent: p.id, at: at, held: p} }

func intent(t *testing.T, act ledger.Action, run string, seq uint64, index uint32) *ledger.Intent {
	t.Helper()
	in, err := ledger.NewIntent(act, run, seq, index)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func (r *run) did(in *ledger.Intent) {
	if r.intents == nil {
		r.intents = map[[2]uint64][]*ledger.Intent{}
	}
	k := [2]uint64{in.Seq, uint64(in.Index)}
	r.intents[k] = append(r.intents[k], in)
}

// TestParentDamaged: a parent the store does not hold is the log's
// damage; a lineage that loops or passes MaxDepth is CHECKPOINT's.
func TestParentDamaged(t *testing.T) {
	root := &run{id: "root"}
	f := fork("f", root, 2)
	if p, err := Parent(f); err != nil || p != Run(root) {
		t.Fatalf("Parent: %v, %v", p, err)
	}
	orphan := &run{id: "o", parent: "gone", at: 3}
	_, err := Parent(orphan)
	var ce *record.CorruptionError
	if !errors.As(err, &ce) || ce.File != "/s/wal" || ce.Run != "o" || ce.Seq != 3 || !strings.Contains(ce.Reason, `"gone"`) {
		t.Fatalf("orphan: %v", err)
	}
	a, b := &run{id: "a", parent: "b", at: 1}, &run{id: "b", parent: "a", at: 1}
	a.held, b.held = b, a
	if _, err := Parent(a); !errors.As(err, &ce) || ce.File != "/s/CHECKPOINT" || !strings.Contains(ce.Reason, "loops") {
		t.Fatalf("cycle: %v", err)
	}
	self := &run{id: "s", parent: "s", at: 1}
	self.held = self
	if _, err := Parent(self); !errors.As(err, &ce) {
		t.Fatalf("a run its own parent: %v", err)
	}
	// A chain of MaxDepth forks above the run is too long; one less is not.
	deep := &run{id: "r0"}
	for i := 1; i < MaxDepth; i++ {
		deep = fork("r", deep, 1)
	}
	if _, err := Parent(fork("x", deep, 1)); err != nil {
		t.Fatalf("a lineage of %d forks: %v", MaxDepth, err)
	}
	if _, err := Parent(fork("x", fork("y", deep, 1), 1)); !errors.As(err, &ce) || !strings.Contains(ce.Reason, "longer than") {
		t.Fatalf("a lineage past MaxDepth: %v", err)
	}
}

// TestKey: a fork's default-key action after its fork point takes the
// parent's key for the same action at the same position, and keeps its
// own for a differing one (args, tool, compensation) or at another index.
func TestKey(t *testing.T) {
	ctx := context.Background()
	email := ledger.Action{Tool: "email", Args: []byte(`{"to":"a@b"}`)}
	root := &run{id: "root"}
	root.did(intent(t, email, "root", 3, 0))
	root.did(intent(t, ledger.Action{Tool: "charge", Args: []byte(`{"n":1}`), Key: "explicit"}, "root", 3, 1))
	root.did(intent(t, email, "root", 3, 1))
	f := fork("f", root, 2)
	l := bookOf(root)

	in := intent(t, email, "f", 3, 0)
	got, err := Key(ctx, f, 3, in, l)
	if err != nil || got.Key != ledger.DefaultKey("root", 3, 0) || got.Index != 0 || got.RunID != "f" {
		t.Fatalf("a repeat: %+v, %v", got, err)
	}
	if in.Key != ledger.DefaultKey("f", 3, 0) {
		t.Fatal("Key changed its argument")
	}
	// Index 1 shares its position with an explicit-key action: the
	// default-key email there is the one repeated.
	if got, _ := Key(ctx, f, 3, intent(t, email, "f", 3, 1), l); got.Key != ledger.DefaultKey("root", 3, 1) {
		t.Fatalf("at a shared index: %q", got.Key)
	}
	for name, act := range map[string]ledger.Action{
		"other args": {Tool: "email", Args: []byte(`{"to":"c@d"}`)},
		"other tool": {Tool: "sms", Args: []byte(`{"to":"a@b"}`)},
		"compensated": {Tool: "email", Args: []byte(`{"to":"a@b"}`),
			Compensate: &ledger.Action{Tool: "unsend", Args: []byte(`{}`)}},
	} {
		in := intent(t, act, "f", 3, 0)
		if got, err := Key(ctx, f, 3, in, l); err != nil || got != in {
			t.Fatalf("%s: %+v, %v", name, got, err)
		}
	}
	// At or before the fork point, and in a run that is no fork: itself,
	// the parent not asked.
	root.asked = 0
	for _, c := range []struct {
		r   *run
		seq uint64
	}{{f, 2}, {root, 3}} {
		in := intent(t, email, c.r.id, c.seq, 0)
		if got, err := Key(ctx, c.r, c.seq, in, l); err != nil || got != in {
			t.Fatalf("run %s seq %d: %+v, %v", c.r.id, c.seq, got, err)
		}
	}
	if root.asked != 0 {
		t.Fatal("the parent was asked for a position the fork does not share")
	}
	// The parent's error names the position.
	root.err = errors.New("disk on fire")
	if _, err := Key(ctx, f, 3, in, l); err == nil || !strings.Contains(err.Error(), `run "f" seq 3 call 0: the action of parent "root"`) || !errors.Is(err, root.err) {
		t.Fatalf("the parent's error: %v", err)
	}
}

// ledgerOf is a fake Ledger holding the given fingerprints.
type ledgerOf map[ledger.Fingerprint]ledger.Status

func (l ledgerOf) Lookup(fp ledger.Fingerprint) (ledger.Entry, bool) {
	s, ok := l[fp]
	return ledger.Entry{Status: s}, ok
}

func (l ledgerOf) Intent(ledger.Loc) (*ledger.Intent, error) {
	return nil, errors.New("BranchKey reads no intent")
}

// TestBranchKey: a branch's action takes the branch key of the nearest
// run of its lineage whose ledger record holds the same call.
func TestBranchKey(t *testing.T) {
	act := ledger.Action{Tool: "email", Args: []byte(`{"to":"a@b"}`)}
	root := &run{id: "root"}
	mid := fork("mid", root, 1)
	leaf := fork("leaf", mid, 2)
	in := intent(t, act, "leaf", 0, 0).WithKey(ledger.BranchKey("leaf", "b", 0), 0)
	atRoot := in.WithKey(ledger.BranchKey("root", "b", 0), 0)
	atMid := in.WithKey(ledger.BranchKey("mid", "b", 0), 0)

	l := ledgerOf{atRoot.Fingerprint: ledger.StatusDone}
	if got, err := BranchKey(leaf, "b", in, l); err != nil || got.Key != atRoot.Key {
		t.Fatalf("the root's: %+v, %v", got, err)
	}
	l[atMid.Fingerprint] = ledger.StatusIntent
	if got, _ := BranchKey(leaf, "b", in, l); got.Key != atMid.Key {
		t.Fatalf("the nearest: %q", got.Key)
	}
	if got, _ := BranchKey(leaf, "other", in, l); got != in {
		t.Fatalf("another branch name: %q", got.Key)
	}
	if got, _ := BranchKey(root, "b", in, l); got != in {
		t.Fatalf("no lineage: %q", got.Key)
	}
	broken := &run{id: "x", parent: "gone", at: 1}
	if _, err := BranchKey(broken, "b", in, l); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("a broken lineage: %v", err)
	}
}

// TestParentState: a fork's state at or before its fork point is its
// parent's, asked of the parent; a broken lineage is damage, not a state.
func TestParentState(t *testing.T) {
	ctx := context.Background()
	want := &frame.Frame{Objective: "root at 2"}
	root := &run{id: "root", states: map[uint64]*frame.Frame{2: want}}
	f := fork("f", root, 2)
	if got, err := ParentState(ctx, f, 2); err != nil || got != want {
		t.Fatalf("at the fork point: %v, %v", got, err)
	}
	if _, err := ParentState(ctx, f, 1); err == nil {
		t.Fatal("a state the parent does not have")
	}
	broken := &run{id: "x", parent: "gone", at: 1}
	if _, err := ParentState(ctx, broken, 1); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("a broken lineage: %v", err)
	}
}

// TestIntent: a branch's call takes its key as BranchKey gives it, an
// atom's as Key does.
func TestIntent(t *testing.T) {
	ctx := context.Background()
	email := ledger.Action{Tool: "email", Args: []byte(`{"to":"a@b"}`)}
	root := &run{id: "root"}
	root.did(intent(t, email, "root", 3, 0))
	f := fork("f", root, 2)
	in := intent(t, email, "f", 3, 0)
	if got, err := Intent(ctx, f, 3, "", in, bookOf(root)); err != nil || got.Key != ledger.DefaultKey("root", 3, 0) {
		t.Fatalf("an atom's call: %+v, %v", got, err)
	}
	bin := intent(t, email, "f", 0, 0).WithKey(ledger.BranchKey("f", "b", 0), 0)
	atRoot := bin.WithKey(ledger.BranchKey("root", "b", 0), 0)
	l := ledgerOf{atRoot.Fingerprint: ledger.StatusDone}
	if got, err := Intent(ctx, f, 3, "b", bin, l); err != nil || got.Key != atRoot.Key {
		t.Fatalf("a branch's call: %+v, %v", got, err)
	}
}
