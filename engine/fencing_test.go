package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/continuumdb/continuum/ledger"
)

// fencedReplica is a memReplica that holds the store by a lease the test
// controls.
type fencedReplica struct {
	memReplica
	fence    Fence
	lost     chan struct{}
	lostOnce sync.Once
}

func newFencedReplica(token uint64, bound time.Duration, after time.Time) *fencedReplica {
	f := &fencedReplica{lost: make(chan struct{})}
	f.fence = Fence{Token: token, Lost: func() <-chan struct{} { return f.lost }, CallBound: bound, InDoubtAfter: after}
	return f
}

func (f *fencedReplica) Fence() Fence { return f.fence }
func (f *fencedReplica) lose()        { f.lostOnce.Do(func() { close(f.lost) }) }

// TestFencingToken: an exec reads its writer's token; a local store's token
// grows from one Open to the next once the first wrote.
func TestFencingToken(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var tokens []uint64
	for i := range 3 {
		db, err := Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		run, err := db.Run(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got uint64
		var ok bool
		_, err = a.Do(ctx, ledger.Action{Tool: "t", Args: []byte(`{}`), Key: "k" + string(rune('0'+i))}, func(ctx context.Context, key string) ([]byte, error) {
			got, ok = FencingToken(ctx)
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !ok || got != db.FencingToken() {
			t.Fatalf("open %d: exec read token %d, %v; the DB's is %d", i, got, ok, db.FencingToken())
		}
		tokens = append(tokens, got)
		if err := a.Fail(ctx, "test"); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens of successive opens %v do not grow", tokens)
		}
	}
	if _, ok := FencingToken(ctx); ok {
		t.Fatal("a plain context carries a token")
	}
}

// TestFenceLostInExec: the writer loses its lease while exec runs: exec's
// context is cancelled, its result is not certified (the action is in
// doubt), and no later exec starts.
func TestFenceLostInExec(t *testing.T) {
	ctx := context.Background()
	f := newFencedReplica(7, 0, time.Time{})
	db, err := Open(t.TempDir(), &Options{Replicator: f})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run, _ := db.Run(ctx, "r")
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var cause error
	go func() { <-started; f.lose() }()
	_, err = a.Do(ctx, ledger.Action{Tool: "pay", Args: []byte(`{}`), Idempotent: true}, func(ctx context.Context, key string) ([]byte, error) {
		if tok, _ := FencingToken(ctx); tok != 7 {
			t.Errorf("token %d, want 7", tok)
		}
		close(started)
		<-ctx.Done()
		cause = context.Cause(ctx)
		return []byte("late"), nil // ignores the cancellation: must not be certified
	})
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, ledger.ErrInDoubt) {
		t.Fatalf("Do after the lease was lost: %v, want ErrLeaseLost, ErrInDoubt", err)
	}
	if !errors.Is(cause, ErrLeaseLost) {
		t.Fatalf("exec's context cause %v, want ErrLeaseLost", cause)
	}
	in, _ := ledger.NewIntent(ledger.Action{Tool: "pay", Args: []byte(`{}`), Idempotent: true}, "r", a.Seq(), 0)
	if e, ok := db.ledger.Lookup(in.Fingerprint); !ok || e.Status != ledger.StatusIntent {
		t.Fatalf("ledger after a late result: %+v %v, want in doubt", e, ok)
	}
	calls := 0
	_, err = a.Do(ctx, ledger.Action{Tool: "other", Args: []byte(`{}`)}, func(ctx context.Context, key string) ([]byte, error) {
		calls++
		return nil, nil
	})
	if calls != 0 || !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Do after the lease was lost: exec called %d times, err %v", calls, err)
	}
}

// TestFenceCallBound: an exec past the bound has its context cancelled and
// its result left in doubt; its Err says so by the clock.
func TestFenceCallBound(t *testing.T) {
	ctx := context.Background()
	f := newFencedReplica(1, 50*time.Millisecond, time.Time{})
	db, err := Open(t.TempDir(), &Options{Replicator: f})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run, _ := db.Run(ctx, "r")
	a, _ := run.Begin(ctx)
	_, err = a.Do(ctx, ledger.Action{Tool: "slow", Args: []byte(`{}`)}, func(ctx context.Context, key string) ([]byte, error) {
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > 50*time.Millisecond {
			t.Errorf("exec's deadline %v, %v: want the bound", d, ok)
		}
		<-ctx.Done()
		if !errors.Is(ctx.Err(), ErrCallBound) || !errors.Is(context.Cause(ctx), ErrCallBound) {
			t.Errorf("Err %v, cause %v: want ErrCallBound", ctx.Err(), context.Cause(ctx))
		}
		return nil, ctx.Err()
	})
	var doubt *ledger.InDoubtError
	if !errors.Is(err, ErrCallBound) || !errors.As(err, &doubt) {
		t.Fatalf("Do past the bound: %v, want ErrCallBound and an InDoubtError", err)
	}
	// Within the bound: certified.
	out, err := a.Do(ctx, ledger.Action{Tool: "fast", Args: []byte(`{}`)}, func(ctx context.Context, key string) ([]byte, error) {
		return []byte("ok"), nil
	})
	if err != nil || string(out) != "ok" {
		t.Fatalf("Do within the bound: %q, %v", out, err)
	}
	// The agent settles the slow one.
	if err := a.ResolveInDoubt(ctx, doubt, []byte("checked")); err != nil {
		t.Fatal(err)
	}
}

// TestFenceInDoubtWait: an idempotent action in doubt is executed again
// only after Fence.InDoubtAfter; a new action is not delayed.
//
// The second writer's InDoubtAfter is a window from its Open. A step that
// must start before the window ends ("not delayed", "not executed before")
// is only judged if it started in the window's first half; on a machine
// so loaded that it did not, the scenario runs again in a fresh store with
// a window four times as long (the last is about 20 s).
func TestFenceInDoubtWait(t *testing.T) {
	for window := 300 * time.Millisecond; ; window *= 4 {
		if fenceInDoubtScenario(t, window) {
			return
		}
		if t.Failed() {
			return
		}
		if window > 10*time.Second {
			t.Fatalf("every window up to %s ended before its steps could start", window)
		}
		t.Logf("the %s window ended before a step could start; again with a longer one", window)
	}
}

// fenceInDoubtScenario is TestFenceInDoubtWait with a window; false if a
// step that must start early in it started too late to be judged.
func fenceInDoubtScenario(t *testing.T, window time.Duration) bool {
	ctx := context.Background()
	dir := t.TempDir()
	act := ledger.Action{Tool: "ship", Args: []byte(`{}`), Idempotent: true, Key: "ship-1"}
	// A first writer leaves the action in doubt (its exec outlived the bound).
	f1 := newFencedReplica(1, 10*time.Millisecond, time.Time{})
	db, err := Open(dir, &Options{Replicator: f1})
	if err != nil {
		t.Fatal(err)
	}
	run, _ := db.Run(ctx, "r")
	a, _ := run.Begin(ctx)
	if _, err := a.Do(ctx, act, func(ctx context.Context, key string) ([]byte, error) {
		<-ctx.Done()
		return []byte("late"), nil
	}); !errors.Is(err, ledger.ErrInDoubt) {
		t.Fatalf("first writer: %v, want in doubt", err)
	}
	// And a non-idempotent one.
	manual := ledger.Action{Tool: "mail", Args: []byte(`{}`), Key: "mail-1"}
	if _, err := a.Do(ctx, manual, func(ctx context.Context, key string) ([]byte, error) {
		<-ctx.Done()
		return nil, nil
	}); !errors.Is(err, ledger.ErrInDoubt) {
		t.Fatalf("first writer: %v, want in doubt", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(window)
	early := func() bool { return time.Until(after) > window/2 }
	f2 := newFencedReplica(2, 0, after)
	db, err = Open(dir, &Options{Replicator: f2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run, _ = db.Run(ctx, "r")
	a, _ = run.Begin(ctx)
	if !early() {
		return false
	}
	// A step that ran past the window is judged only in the last one: a
	// wait for InDoubtAfter is late in every window, load in one.
	last := window > 10*time.Second
	late := false
	if _, err := a.Do(ctx, ledger.Action{Tool: "new", Args: []byte(`{}`), Key: "fresh"}, func(ctx context.Context, key string) ([]byte, error) {
		late = time.Now().After(after)
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if late {
		if last {
			t.Error("a new action waited for InDoubtAfter")
		}
		return false
	}
	// A context that ends before InDoubtAfter: not executed, still in doubt.
	if !early() {
		return false
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	_, err = a.Do(sctx, act, func(ctx context.Context, key string) ([]byte, error) {
		if late = !time.Now().Before(after); !late || last {
			t.Errorf("executed at %s, InDoubtAfter %s, its context's deadline long past", time.Now(), after)
		}
		return nil, nil
	})
	cancel()
	if late {
		return false
	}
	if !errors.Is(err, ledger.ErrInDoubt) {
		t.Fatalf("Do whose context ended in the wait: %v, want in doubt", err)
	}
	// Reported in doubt only after InDoubtAfter, for the agent to ask the
	// downstream once the earlier call is over.
	if _, err := a.Do(ctx, manual, func(ctx context.Context, key string) ([]byte, error) {
		t.Error("a non-idempotent action in doubt executed")
		return nil, nil
	}); !errors.Is(err, ledger.ErrInDoubt) || time.Now().Before(after) {
		t.Fatalf("Do of a non-idempotent action in doubt: %v at %s, want ErrInDoubt after %s", err, time.Now(), after)
	}
	var at time.Time
	if _, err := a.Do(ctx, act, func(ctx context.Context, key string) ([]byte, error) {
		at = time.Now()
		return []byte("shipped"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if at.Before(after) {
		t.Fatalf("the in-doubt action ran again at %s, before %s", at, after)
	}
	return true
}
