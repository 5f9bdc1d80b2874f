package engine_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// A planner sends a task to a researcher, which does not exist yet; the
// message is the planner's atom's, so it exists once that atom commits.
// The researcher consumes it in its own atom: once it commits, the
// message is gone from its inbox, also after a restart.
func ExampleAtom_Send() {
	dir, err := os.MkdirTemp("", "continuum-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := engine.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}

	planner, err := db.Run(ctx, "planner")
	if err != nil {
		log.Fatal(err)
	}
	a, err := planner.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := a.Send(ctx, "researcher", []byte("find the outage's cause")); err != nil {
		log.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).AddSubgoal("research", "delegated")); err != nil {
		log.Fatal(err)
	}

	researcher, err := db.Run(ctx, "researcher")
	if err != nil {
		log.Fatal(err)
	}
	r, err := researcher.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	m, err := r.Receive(ctx) // waits for a message, until ctx ends
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s from %s (atom %d): %s\n", m.To, m.From(), m.ID.Seq, m.Payload)
	if err := r.Commit(ctx, new(frame.Delta).SetObjective(string(m.Payload))); err != nil {
		log.Fatal(err) // without the commit, the message stays in the inbox
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}

	db, err = engine.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	researcher, err = db.Run(ctx, "researcher")
	if err != nil {
		log.Fatal(err)
	}
	inbox, err := researcher.Inbox(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after a restart:", len(inbox), "messages,", researcher.State().Objective)
	// Output:
	// researcher from planner (atom 1): find the outage's cause
	// after a restart: 0 messages, find the outage's cause
}
