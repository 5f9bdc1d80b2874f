package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

// An agent's atom: one tool call through the ledger, one delta. After a
// restart, the same call returns its certified result without running
// again.
func Example() {
	dir, err := os.MkdirTemp("", "continuum-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	charges := 0
	charge := func(ctx context.Context, key string) ([]byte, error) {
		charges++ // the real side effect; key is the idempotency key to pass downstream
		return []byte(`{"charge":"ch_1","status":"paid"}`), nil
	}
	act := ledger.Action{Tool: "billing.charge", Args: []byte(`{"customer":"c_42", "cents": 1200}`)}

	db, err := engine.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	run, err := db.Run(ctx, "deploy-42")
	if err != nil {
		log.Fatal(err)
	}
	atom, err := run.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	out, err := atom.Do(ctx, act, charge)
	if err != nil {
		log.Fatal(err)
	}
	err = atom.Commit(ctx, new(frame.Delta).
		SetObjective("deploy the service").
		AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: "Charged the customer."}).
		Set("charge", out))
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}

	// A new process: the run resumes where it stopped.
	db, err = engine.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	run, _ = db.Run(ctx, "deploy-42")
	state := run.State()
	fmt.Printf("seq %d, objective %q, charge %s\n", run.LastSeq(), state.Objective, state.Memory["charge"])

	// Replaying atom 1's call (same tool, args and key) does not charge again.
	act.Key = ledger.DefaultKey("deploy-42", 1, 0)
	atom, _ = run.Begin(ctx)
	out, _ = atom.Do(ctx, act, charge)
	fmt.Printf("charges %d, result %s\n", charges, out)
	// Output:
	// seq 1, objective "deploy the service", charge {"charge":"ch_1","status":"paid"}
	// charges 1, result {"charge":"ch_1","status":"paid"}
}

// Reconciling an action that was in flight when the process died: the
// engine never guesses; the agent asks the downstream and records what it
// found. The InDoubtError names the action, so the agent need not rebuild
// it, and default keys of later calls do not move.
func ExampleAtom_ResolveInDoubt() {
	var atom *engine.Atom // from run.Begin after a restart
	var act ledger.Action
	var exec ledger.Exec
	askDownstream := func(key string) ([]byte, bool) { return nil, false }
	ctx := context.Background()
	if atom == nil {
		return
	}

	out, err := atom.Do(ctx, act, exec)
	var doubt *ledger.InDoubtError
	if errors.As(err, &doubt) {
		if result, ok := askDownstream(doubt.Key); ok {
			out, err = result, atom.ResolveInDoubt(ctx, doubt, result) // it happened: record it
		} else if err = atom.ResolveInDoubtFailed(ctx, doubt, "no trace downstream"); err == nil {
			act.Key = doubt.Key // it did not: try again, under the same key
			out, err = atom.Do(ctx, act, exec)
		}
	}
	_ = out
}

// Settling an in-doubt action before the atom calls it: Interrupted
// lists the actions of the atom a crash stopped, and Resolve names an
// action itself. With a default key it names the atom's next default-key
// Do, here the first, which then returns the result without calling exec.
func ExampleAtom_Resolve() {
	var run *engine.Run   // after a restart
	var act ledger.Action // the atom's first action, with a default key
	var exec ledger.Exec
	askDownstream := func(key string) ([]byte, bool) { return nil, false }
	ctx := context.Background()
	if run == nil {
		return
	}

	_, actions, err := run.Interrupted(ctx)
	if err != nil {
		return
	}
	atom, err := run.Begin(ctx)
	if err != nil {
		return
	}
	if len(actions) > 0 && actions[0].Index == 0 && actions[0].Status == ledger.StatusIntent {
		if result, ok := askDownstream(actions[0].Key); ok {
			err = atom.Resolve(ctx, act, result)
		}
	}
	out, err := atom.Do(ctx, act, exec)
	_ = out
}
