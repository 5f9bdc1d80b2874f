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

// A planner fans out to two branches of one run. Both read the state at
// the same base; the one that commits second wrote the key the first one
// wrote, so its Commit fails with ErrConflict and applies nothing. Its
// retry, a branch of the same name, gets the search it already made from
// the ledger (the key derives from the branch's name) and commits on top
// of the newer state.
func ExampleRun_Branch() {
	dir, err := os.MkdirTemp("", "continuum-branch")
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
	run, err := db.Run(ctx, "plan-7")
	if err != nil {
		log.Fatal(err)
	}

	searches := 0
	search := func(ctx context.Context, key string) ([]byte, error) {
		searches++
		return []byte("3 papers"), nil
	}
	act := ledger.Action{Tool: "search", Args: []byte(`{"q":"optimistic concurrency"}`)}

	research, _ := run.Branch(ctx, "research")
	review, _ := run.Branch(ctx, "review", engine.MemoryKey("draft")) // it reads the draft
	found, _ := research.Do(ctx, act, search)

	if err := review.Commit(ctx, new(frame.Delta).Set("summary", []byte("reviewed"))); err != nil {
		log.Fatal(err)
	}
	err = research.Commit(ctx, new(frame.Delta).Set("summary", found).Set("draft", found))
	fmt.Println("research:", errors.Is(err, engine.ErrConflict))

	research, _ = run.Branch(ctx, "research") // the retry: same name, new base
	found, _ = research.Do(ctx, act, search)  // certified: search is not called again
	if err := research.Commit(ctx, new(frame.Delta).Set("draft", found)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("seqs:", review.Seq(), research.Seq(), "base of the retry:", research.Base())
	fmt.Println("searches:", searches, "draft:", string(run.State().Memory["draft"]))
	// Output:
	// research: true
	// seqs: 1 2 base of the retry: 1
	// searches: 1 draft: 3 papers
}
