package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/ledger"
)

// TestCloseDuringExec: Close while an action's exec runs (its intent
// durable, no certificate) writes a CHECKPOINT that lists the action with
// the interrupted atom, so that after the restart Run.Interrupted reports
// it in doubt, as a replay of its intent would, and a Do of it does not
// call exec again.
func TestCloseDuringExec(t *testing.T) {
	mem := vfs.NewMem()
	db, err := Open("store", testOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	run := commitN(t, db, "r", 2)
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	act := ledger.Action{Tool: "payments.charge", Args: []byte(`{"cents":500}`)}
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := a.Do(ctx, act, func(context.Context, string) ([]byte, error) {
			close(started)
			<-release
			return []byte(`{"charged":true}`), nil
		})
		done <- err
	}()
	<-started
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	close(release)
	<-done // the certificate cannot be written: the store is closed

	db2 := openTest(t, mem, testOptions(mem))
	r2, err := db2.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	seq, acts, err := r2.Interrupted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seq != 3 || len(acts) != 1 || acts[0].Status != ledger.StatusIntent {
		t.Fatalf("Interrupted = seq %d, %+v; want seq 3 with the charge in doubt", seq, acts)
	}
	a2, err := r2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a2.Do(ctx, act, func(context.Context, string) ([]byte, error) {
		t.Fatal("exec called again for an action in doubt")
		return nil, nil
	})
	if !errors.Is(err, ledger.ErrInDoubt) {
		t.Fatalf("Do of the action in doubt: %v, want ledger.ErrInDoubt", err)
	}
}
