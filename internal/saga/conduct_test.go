package saga

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
)

var errNotUndone = errors.New("not undone")

// fakeAtom records what Conduct asked of it; its history is the Store.
type fakeAtom struct {
	*history
	rec       []byte        // the record appended
	pending   *Pending      // Pend's
	written   []record.Undo // its undo list
	ran       []uint64      // the seqs of the actions compensated, in order
	failAt    uint64        // Compensate of the action of this seq fails
	completed *frame.Frame
}

func (a *fakeAtom) ID() string                            { return "r" }
func (a *fakeAtom) Base() uint64                          { return 0 }
func (a *fakeAtom) ChainHead() (uint64, chain.Hash, bool) { return 9, chain.Hash{9}, false }
func (a *fakeAtom) Seq() uint64                           { return 10 }

func (a *fakeAtom) StateAt(_ context.Context, seq uint64) (*frame.Frame, error) {
	return &frame.Frame{Memory: map[string][]byte{"at": []byte(fmt.Sprint(seq))}}, nil
}

func (a *fakeAtom) Sealer() *record.Sealer { return nil }

func (a *fakeAtom) Append(_ context.Context, rec []byte) (uint64, error) {
	a.rec = rec
	return 7, nil
}

func (a *fakeAtom) Pend(p *Pending) { a.pending, a.written = p, p.Undo }

func (a *fakeAtom) Compensate(_ context.Context, u *record.Undo) ([]byte, error) {
	if u.Seq == a.failAt {
		return nil, errors.New("downstream down")
	}
	a.ran = append(a.ran, u.Seq)
	return []byte(fmt.Sprint("undid ", u.Seq)), nil
}

func (a *fakeAtom) Complete(_ context.Context, f *frame.Frame) error {
	a.completed = f
	return nil
}

// planned is a history whose rollback to 3 from seq 10 undoes the actions
// of seqs 8 and 4 and leaves seq 6's, which has no compensation.
func planned() *history {
	h := newHistory()
	for _, s := range []uint64{8, 6, 4} {
		var c *ledger.Compensation
		if s != 6 {
			c = comp("undo")
		}
		h.atoms[s] = []ledger.Fingerprint{h.act(fmt.Sprint("a", s), "r", s, ledger.StatusDone, c)}
	}
	return h
}

func undo(seq uint64, comp bool) record.Undo {
	u := record.Undo{Seq: seq, Tool: fmt.Sprint("tool", seq), Action: ledger.Fingerprint{byte(seq)}}
	if comp {
		u.Compensation = &ledger.Compensation{Tool: "undo", Key: fmt.Sprint("k", seq)}
	}
	return u
}

// TestConduct: the refusal of actions without a compensation writes
// nothing; a rollback runs the compensations in the plan's order and
// completes with the state at its target; a failed compensation leaves
// it pending, and a resume neither plans nor writes again.
func TestConduct(t *testing.T) {
	ctx := context.Background()
	errs := Errors{NotUndone: errNotUndone, TooLarge: errors.New("too large")}

	a := &fakeAtom{history: planned()}
	res, err := Conduct(ctx, a, 3, nil, nil, false, errs)
	if !errors.Is(err, errNotUndone) || a.written != nil || a.ran != nil || a.completed != nil {
		t.Fatalf("a plan with an action not undone: err %v, written %v, ran %v", err, a.written, a.ran)
	}
	if len(res.NotUndone) != 1 || res.NotUndone[0].Seq != 6 {
		t.Fatalf("NotUndone %+v", res.NotUndone)
	}

	a = &fakeAtom{history: planned()}
	res, err = Conduct(ctx, a, 3, nil, nil, true, errs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.ran, []uint64{8, 4}) || len(a.written) != 3 || string(a.completed.Memory["at"]) != "3" {
		t.Fatalf("ran %v, wrote %d, completed with %v", a.ran, len(a.written), a.completed)
	}
	if res.To != 3 || res.Seq != 10 || res.Resumed || len(res.Undone) != 2 || string(res.Results[1]) != "undid 4" || len(res.NotUndone) != 1 {
		t.Fatalf("result %+v", res)
	}
	if p := a.pending; p.Seq != 10 || p.To != 3 || p.Head != (chain.Hash{9}) || p.Pin != 7 || p.Seal != record.RollbackSeal(a.rec) {
		t.Fatalf("pending %+v", p)
	}

	a = &fakeAtom{history: planned(), failAt: 4}
	res, err = Conduct(ctx, a, 3, nil, nil, true, errs)
	if err == nil || a.completed != nil || len(res.Undone) != 1 {
		t.Fatalf("a failed compensation: err %v, completed %v, undone %v", err, a.completed, res.Undone)
	}
	pending := &Pending{Seq: 10, To: 3, Undo: a.written}
	b := &fakeAtom{history: newHistory()}
	res, err = Conduct(ctx, b, 3, pending, nil, false, errs)
	if err != nil || len(b.reads) != 0 || b.written != nil || !res.Resumed || !slices.Equal(b.ran, []uint64{8, 4}) || b.completed == nil {
		t.Fatalf("resumed: err %v, read %v, written %v, ran %v, %+v", err, b.reads, b.written, b.ran, res)
	}
}

// TestStart: each refusal matches its sentinel, in the order Start
// checks them, and a rollback that may begin or resume passes.
func TestStart(t *testing.T) {
	errs := Errors{RunEnded: errors.New("ended"), AtomInProgress: errors.New("in progress"), NotInDoubt: errors.New("not in doubt"),
		RollbackPending: errors.New("pending"), SeqOutOfRange: errors.New("out of range")}
	broken := errors.New("broken")
	idle := State{Run: "r", LastSeq: 10, Base: 2}
	pend := &Pending{Seq: 11, To: 5}
	with := func(f func(*State)) State { s := idle; f(&s); return s }
	for _, c := range []struct {
		name  string
		st    State
		to    uint64
		fresh bool
		want  error
	}{
		{"a rollback", idle, 5, true, nil},
		{"to the fork point", idle, 2, true, nil},
		{"to the last seq", idle, 10, true, errs.SeqOutOfRange},
		{"before the fork point", idle, 1, true, errs.SeqOutOfRange},
		{"broken first", with(func(s *State) { s.Broken, s.Ended = broken, true }), 5, true, broken},
		{"ended", with(func(s *State) { s.Ended, s.Running = true, 11 }), 5, true, errs.RunEnded},
		{"an atom running", with(func(s *State) { s.Running, s.Branches = 11, true }), 5, true, errs.AtomInProgress},
		{"branches", with(func(s *State) { s.Branches = true }), 5, true, errs.AtomInProgress},
		{"nothing to settle", idle, 0, false, errs.NotInDoubt},
		{"settle", with(func(s *State) { s.Pending = pend }), 0, false, nil},
		{"resume", with(func(s *State) { s.Pending = pend }), 5, true, nil},
		{"another target pending", with(func(s *State) { s.Pending = pend }), 4, true, errs.RollbackPending},
		{"a pending one past the range", with(func(s *State) { s.Pending, s.LastSeq = pend, 5 }), 5, true, nil},
	} {
		err := Start(c.st, c.to, c.fresh, errs)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

type lookupOf map[ledger.Fingerprint]ledger.Status

func (l lookupOf) Lookup(fp ledger.Fingerprint) (ledger.Entry, bool) {
	s, ok := l[fp]
	return ledger.Entry{Fingerprint: fp, Status: s}, ok
}

// TestCompensation: the intent is the compensation's, the exec execFor's
// until the ledger certified it, and one execFor does not give refuses.
func TestCompensation(t *testing.T) {
	u := undo(7, true)
	asked := 0
	execFor := func(x record.Undo) ledger.Exec {
		asked++
		if x.Compensation.Tool != "undo" {
			return nil
		}
		return func(context.Context, string) ([]byte, error) { return []byte("ran"), nil }
	}
	in, exec, err := Compensation(lookupOf{}, &u, "r", 10, 2, execFor)
	if err != nil || in.Tool != "undo" || in.Key != "k7" || in.Undoes != u.Action || in.Seq != 10 || in.Index != 2 || asked != 1 {
		t.Fatalf("a compensation to run: %+v, %v (asked %d)", in, err, asked)
	}
	if out, _ := exec(context.Background(), in.Key); string(out) != "ran" {
		t.Fatalf("not execFor's exec: %q", out)
	}
	for _, s := range []ledger.Status{ledger.StatusIntent, ledger.StatusFailed} {
		if _, _, err := Compensation(lookupOf{in.Fingerprint: s}, &u, "r", 10, 2, execFor); err != nil || asked != 2 {
			t.Fatalf("%s in the ledger: %v, asked %d", s, err, asked)
		}
		asked = 1
	}
	for _, s := range []ledger.Status{ledger.StatusDone, ledger.StatusResolved} {
		_, exec, err := Compensation(lookupOf{in.Fingerprint: s}, &u, "r", 10, 2, execFor)
		if err != nil || asked != 1 {
			t.Fatalf("%s: %v, asked %d", s, err, asked)
		}
		if _, err := exec(context.Background(), in.Key); err == nil {
			t.Fatalf("%s: the exec of a certified compensation ran", s)
		}
	}
	other := u
	other.Compensation = &ledger.Compensation{Tool: "unknown", Key: "k"}
	if _, _, err := Compensation(lookupOf{}, &other, "r", 10, 2, execFor); err == nil || !strings.Contains(err.Error(), `"unknown"`) {
		t.Fatalf("no exec: %v", err)
	}
}
