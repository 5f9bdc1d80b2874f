package offline_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/seal"
)

// erasedActionStore writes an encrypted store at dir with two runs that
// made actions (default-key and explicit-key Do calls): "gone", ended and
// then erased with DB.Erase, and "kept". It returns the keyring.
func erasedActionStore(t testing.TB, dir string) seal.Keyring {
	t.Helper()
	ctx := context.Background()
	ring, err := seal.NewKeyring(map[string][]byte{"k1": bytes.Repeat([]byte{0x42}, seal.KeySize)}, "k1")
	if err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(dir, &engine.Options{Keyring: ring})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"gone", "kept"} {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			a, err := r.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Do(ctx, ledger.Action{Tool: "lookup", Args: []byte(fmt.Sprintf(`{"q":"%s-%d"}`, id, i))},
				func(context.Context, string) ([]byte, error) { return []byte(`"found"`), nil })
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Do(ctx, ledger.Action{Tool: "charge", Key: fmt.Sprintf("%s-charge-%d", id, i), Args: []byte(`{}`)},
				func(context.Context, string) ([]byte, error) { return []byte(`"charged"`), nil }); err != nil {
				t.Fatal(err)
			}
			if err := a.Commit(ctx, new(frame.Delta).Set("k", res).ToolOutput(fmt.Sprint("call-", i), "lookup", res)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := mustEnd(db, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Erase(ctx, "gone", "request 1"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return ring
}

func mustEnd(db *engine.DB, id string) error {
	r, err := db.Run(context.Background(), id)
	if err != nil {
		return err
	}
	return r.End(context.Background(), engine.StatusCompleted, nil)
}

// TestInspectErasedActions: Inspect with the keyring of an encrypted
// store in which a run that made actions was erased reads the store
// (its intent and certificate records no longer open) instead of
// panicking, and every view of the run that was kept reads as before.
func TestInspectErasedActions(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	ring := erasedActionStore(t, dir)
	in, err := engine.Inspect(ctx, dir, &engine.InspectOptions{Keyring: ring})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, ok := in.Run("kept"); !ok {
		t.Fatalf("run kept is missing: %v", in.Runs())
	}
	for seq := uint64(1); seq <= 3; seq++ {
		info, err := in.Atom(ctx, "kept", seq)
		if err != nil {
			t.Fatalf("Atom kept %d: %v", seq, err)
		}
		if len(info.Actions) != 2 {
			t.Errorf("Atom kept %d: %d actions, want 2", seq, len(info.Actions))
		}
	}
	if _, err := in.Export(ctx, io.Discard, "kept", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Diff(ctx, "kept", 1, "kept", 3); err != nil {
		t.Fatal(err)
	}
	if st := in.Stats(); st.Runs < 1 {
		t.Fatalf("stats: %+v", st)
	}
	// The erased run's views fail or read what is left; none panics.
	for seq := uint64(0); seq <= 4; seq++ {
		info, err := in.Atom(ctx, "gone", seq)
		t.Logf("Atom gone %d: %v, %v", seq, info != nil, err)
		_, err = in.StateAt(ctx, "gone", seq)
		t.Logf("StateAt gone %d: %v", seq, err)
	}
	_, err = in.Export(ctx, io.Discard, "gone", 0, 0)
	t.Logf("Export gone: %v", err)
	_, err = in.Diff(ctx, "gone", 1, "kept", 3)
	t.Logf("Diff gone kept: %v", err)
}
