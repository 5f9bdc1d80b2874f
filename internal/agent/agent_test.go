package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/crashmem"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/continuumdb/continuum/ledger"
)

// flaky is a World whose Lookup fails, and which can take a crash clone of
// the store right after the effect of the first call.
type flaky struct {
	*World
	mem     *crashmem.FS
	crashed *vfs.MemFS
}

func (f *flaky) Exec(ctx context.Context, tool string, args []byte, key string, idem bool) ([]byte, error) {
	r, err := f.World.Exec(ctx, tool, args, key, idem)
	if f.crashed == nil {
		f.crashed = f.mem.CrashClone(vfs.CrashCloneCfg{})
	}
	return r, err
}

func (f *flaky) Lookup(ctx context.Context, key string) ([]byte, bool, error) {
	return nil, false, errors.New("downstream unreachable")
}

// TestStepLookupFailureKeepsDoubt: when the downstream cannot say whether an
// in-doubt call took effect, Step fails and the action stays in doubt; it
// is never taken for a call that did not run (which could run it twice).
func TestStepLookupFailureKeepsDoubt(t *testing.T) {
	ctx := context.Background()
	opts := func(fs vfs.FS) *engine.Options {
		return &engine.Options{FS: fs, SegmentSize: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	}
	// Find a run whose first atom calls a non-idempotent tool.
	id := ""
	for i := 0; i < 100 && id == ""; i++ {
		if a := workload.Script(workload.RunID(i), 1, 1); !a.Idempotent {
			id = workload.RunID(i)
		}
	}
	mem := crashmem.New(vfs.NewCrashableMem()) // cloned beside the live store
	ds := &flaky{World: NewWorld(), mem: mem}
	db, err := engine.Open("s", opts(mem))
	if err != nil {
		t.Fatal(err)
	}
	run, _ := db.Run(ctx, id)
	if _, err := Step(ctx, run, 1, ds); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db2, err := engine.Open("s", opts(ds.crashed))
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	run2, _ := db2.Run(ctx, id)
	if _, err := Step(ctx, run2, 1, ds); err == nil {
		t.Fatal("Step succeeded though the in-doubt call could not be reconciled")
	}
	if n := ds.Calls()[workload.IdempotencyKey(id, 1)]; n != 1 {
		t.Fatalf("the non-idempotent call was made %d times", n)
	}
	// Still in doubt: the next attempt is refused again, exec not called.
	atom, err := run2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := workload.Script(id, 1, 1)
	_, err = atom.Do(ctx, Action(a), func(context.Context, string) ([]byte, error) {
		t.Fatal("exec called for an action in doubt")
		return nil, nil
	})
	if !errors.Is(err, ledger.ErrInDoubt) {
		t.Fatalf("Do after a failed reconciliation: %v, want ErrInDoubt", err)
	}
}
