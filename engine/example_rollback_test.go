package engine_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

// A saga: each charge carries the refund that undoes it, and a rollback
// to the state before the charges refunds them, newest first, exactly
// once, then puts the agent's state back.
func ExampleRun_Rollback() {
	dir, err := os.MkdirTemp("", "continuum-rollback")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := engine.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	run, err := db.Run(ctx, "trip-7")
	if err != nil {
		log.Fatal(err)
	}

	book := func(what string) {
		atom, err := run.Begin(ctx)
		if err != nil {
			log.Fatal(err)
		}
		act := ledger.Action{Tool: "book", Args: []byte(fmt.Sprintf(`{"item":%q}`, what)),
			Compensate: &ledger.Action{Tool: "cancel", Args: []byte(fmt.Sprintf(`{"item":%q}`, what)), Idempotent: true}}
		if _, err := atom.Do(ctx, act, func(context.Context, string) ([]byte, error) {
			return []byte("booked " + what), nil
		}); err != nil {
			log.Fatal(err)
		}
		if err := atom.Commit(ctx, new(frame.Delta).AddSubgoal(what, "book the "+what).Set(what, []byte("booked"))); err != nil {
			log.Fatal(err)
		}
	}
	book("flight")
	book("hotel")
	book("car")

	// The hotel and the car fall through: back to the state after the flight.
	res, err := run.Rollback(ctx, 1, engine.RollbackOptions{
		Exec: func(u engine.Undo) ledger.Exec {
			return func(ctx context.Context, key string) ([]byte, error) {
				// The downstream call; key is the compensation's idempotency key.
				return []byte("cancelled " + string(u.Compensation.Args)), nil
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	for i, u := range res.Undone {
		fmt.Printf("seq %d %s: %s\n", u.Seq, u.Tool, res.Results[i])
	}
	fmt.Println("last seq", run.LastSeq(), "subgoals", len(run.State().Subgoals), "memory", len(run.State().Memory))
	// Output:
	// seq 3 book: cancelled {"item":"car"}
	// seq 2 book: cancelled {"item":"hotel"}
	// last seq 4 subgoals 1 memory 1
}
