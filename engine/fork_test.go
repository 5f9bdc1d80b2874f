package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

// lineageAgent is a deterministic agent: atom s of any run sends the email
// of step s (the same action in every run of the lineage) and, at the
// steps in differ, charges a card with run-specific args.
type lineageAgent struct {
	effects map[string]int // idempotency key -> effects downstream
	calls   map[string]string
}

func newLineageAgent() *lineageAgent {
	return &lineageAgent{effects: map[string]int{}, calls: map[string]string{}}
}

func (g *lineageAgent) exec(req string) ledger.Exec {
	return func(ctx context.Context, key string) ([]byte, error) {
		if prev, ok := g.calls[key]; ok && prev != req {
			return nil, fmt.Errorf("key %q reused for %s after %s", key, req, prev)
		}
		g.calls[key] = req
		g.effects[key]++
		return []byte("ok " + req), nil
	}
}

func (g *lineageAgent) step(t *testing.T, run *Run, charge string) {
	t.Helper()
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	email := fmt.Sprintf(`{"step":%d}`, a.Seq())
	if _, err := a.Do(ctx, ledger.Action{Tool: "email", Args: []byte(email)}, g.exec("email "+email)); err != nil {
		t.Fatal(err)
	}
	if charge != "" {
		if _, err := a.Do(ctx, ledger.Action{Tool: "charge", Args: []byte(charge)}, g.exec("charge "+charge)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Commit(ctx, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprintf("%s %d %s", run.ID(), a.Seq(), charge)})); err != nil {
		t.Fatal(err)
	}
}

// TestForkState: a fork's state at its fork point is its parent's there,
// StateAt below it answers from the parent's history, its first atom is
// the fork point + 1, and all of it survives a restart (replay and
// CHECKPOINT); forks of forks, at 0 and at the parent's last seq.
func TestForkState(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem)
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	g := newLineageAgent()
	src, _ := db.Run(ctx, "src")
	for i := 0; i < 6; i++ {
		g.step(t, src, "")
	}
	want := map[uint64]*frame.Frame{}
	for s := uint64(0); s <= 6; s++ {
		if want[s], err = src.StateAt(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	f, err := db.Fork(ctx, "src", 3, "f")
	if err != nil {
		t.Fatal(err)
	}
	if f.LastSeq() != 3 || f.Info().Parent != "src" || f.Info().ForkedAt != 3 {
		t.Fatalf("fork: %+v", f.Info())
	}
	g.step(t, f, `{"fork":"f"}`)
	ff, err := db.Fork(ctx, "f", 4, "ff") // a fork of a fork
	if err != nil {
		t.Fatal(err)
	}
	g.step(t, ff, `{"fork":"ff"}`)
	for _, at := range []uint64{0, 6} {
		r, err := db.Fork(ctx, "src", at, fmt.Sprint("at", at))
		if err != nil {
			t.Fatalf("fork at %d: %v", at, err)
		}
		if st, _ := r.StateE(); len(st.Messages) != len(want[at].Messages) {
			t.Fatalf("fork at %d: %d messages, want %d", at, len(st.Messages), len(want[at].Messages))
		}
	}
	for name, err := range map[string]error{
		"beyond the last seq": func() error { _, err := db.Fork(ctx, "src", 7, "x"); return err }(),
		"an existing id":      func() error { _, err := db.Fork(ctx, "src", 1, "f"); return err }(),
		"an unknown source":   func() error { _, err := db.Fork(ctx, "nope", 1, "y"); return err }(),
	} {
		if err == nil {
			t.Errorf("fork of %s succeeded", name)
		}
	}
	check := func(db *DB) {
		t.Helper()
		f, _ := db.Run(ctx, "f")
		ff, _ := db.Run(ctx, "ff")
		for s := uint64(0); s <= 3; s++ {
			got, err := f.StateAt(ctx, s)
			if err != nil || len(got.Messages) != len(want[s].Messages) {
				t.Fatalf("fork's StateAt(%d): %d messages, %v; want %d", s, len(got.Messages), err, len(want[s].Messages))
			}
		}
		st, err := ff.StateE()
		if err != nil || len(st.Messages) != 5 || st.Messages[3].Content != "f 4 {\"fork\":\"f\"}" || st.Messages[4].Content != "ff 5 {\"fork\":\"ff\"}" {
			t.Fatalf("fork of a fork: %+v, %v", st, err)
		}
		if ff.Info().Parent != "f" || ff.Info().ForkedAt != 4 || ff.LastSeq() != 5 {
			t.Fatalf("fork of a fork: %+v", ff.Info())
		}
	}
	check(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, mem, opts)
	check(db)
}

// TestLineageNoDuplicateEffects (I10): a fork that repeats its parent's
// actions at the same positions gets their certificates without calling
// exec, through a fork of a fork too; an action that differs gets a key no
// run of the lineage used; an action in doubt at the fork point stays in
// doubt in the fork.
func TestLineageNoDuplicateEffects(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, testOptions(mem))
	g := newLineageAgent()
	src, _ := db.Run(ctx, "src")
	for i := 0; i < 4; i++ {
		g.step(t, src, fmt.Sprintf(`{"cents":%d}`, 100*i))
	}
	f, err := db.Fork(ctx, "src", 1, "f")
	if err != nil {
		t.Fatal(err)
	}
	// Steps 2 and 3 again: the emails are the same actions at the same
	// positions, the charges differ from src's.
	g.step(t, f, `{"cents":7}`)
	g.step(t, f, `{"cents":200}`) // src charged 200 at step 3, at the same position
	ff, err := db.Fork(ctx, "f", 2, "ff")
	if err != nil {
		t.Fatal(err)
	}
	g.step(t, ff, `{"cents":200}`)
	for key, n := range g.effects {
		if n != 1 {
			t.Errorf("key %q took effect %d times", key, n)
		}
	}
	// 4 emails and 4 charges by src, 1 charge by f at step 2; f's step 3
	// and ff's step 3 repeat src's charge of 200 at step 3.
	if len(g.effects) != 9 {
		t.Errorf("%d effects, want 9: %v", len(g.effects), g.calls)
	}

}

// TestForkInDoubt: an action in doubt in the parent at the fork point (its
// intent durable, its certificate lost in a crash) stays in doubt in a
// fork that repeats it: ErrInDoubt with the parent's key, exec not called;
// once the fork resolves it, the parent finds it certified too.
func TestForkInDoubt(t *testing.T) {
	act := ledger.Action{Tool: "wire", Args: []byte(`{"usd":5}`)}
	crashed, key := crashInFlight(t, act)
	db := openTest(t, crashed, testOptions(crashed))
	f, err := db.Fork(ctx, "r", 0, "f")
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	called := false
	_, err = a.Do(ctx, act, func(context.Context, string) ([]byte, error) { called = true; return nil, nil })
	var e *ledger.InDoubtError
	if !errors.As(err, &e) || e.Key != key || called {
		t.Fatalf("the fork's repeat of an in-doubt action: %v (exec called %v), want ErrInDoubt with the parent's key %q", err, called, key)
	}
	if err := a.ResolveInDoubt(ctx, e, []byte("sent")); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, msg("wired")); err != nil {
		t.Fatal(err)
	}
	r, _ := db.Run(ctx, "r")
	b, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Do(ctx, act, func(context.Context, string) ([]byte, error) { called = true; return nil, nil })
	if err != nil || string(res) != "sent" || called {
		t.Fatalf("the parent after the fork resolved its action: %q, %v (exec called %v)", res, err, called)
	}
	if err := b.Commit(ctx, msg("wired")); err != nil {
		t.Fatal(err)
	}
}
