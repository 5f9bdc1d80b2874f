package offline_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/offline"
)

// What a run did between two of its seqs: the delta ops of the atoms after
// the first, up to the second, with the actions each performed.
func ExampleInspector_Diff() {
	dir, err := os.MkdirTemp("", "continuum-diff-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	// An agent's run of three atoms.
	db, err := engine.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	run, err := db.Run(ctx, "deploy-42")
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range []*frame.Delta{
		new(frame.Delta).SetObjective("deploy checkout v2").AddSubgoal("build", "build the image"),
		new(frame.Delta).SetSubgoalStatus("build", frame.SubgoalDone).Set("image", []byte("checkout:v2")),
		new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: "Deployed."}),
	} {
		atom, err := run.Begin(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if atom.Seq() == 2 {
			_, err := atom.Do(ctx, ledger.Action{Tool: "registry.push", Args: []byte(`{"image":"checkout:v2"}`)},
				func(ctx context.Context, key string) ([]byte, error) { return []byte(`{"digest":"sha256:9f86"}`), nil })
			if err != nil {
				log.Fatal(err)
			}
		}
		if err := atom.Commit(ctx, d); err != nil {
			log.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}

	// From seq 1 to seq 3: the base is seq 1, and the second side holds
	// atoms 2 and 3.
	in, err := offline.Inspect(ctx, dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer in.Close()
	d, err := in.Diff(ctx, "deploy-42", 1, "deploy-42", 3)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("base: %s seq %d; a: %d atoms; b: %d atoms, %d ops\n", d.Base.Run, d.Base.Seq, len(d.A.Atoms), len(d.B.Atoms), d.B.Ops())
	for _, a := range d.B.Atoms {
		fmt.Printf("seq %d:\n", a.Seq)
		for _, op := range a.Delta.Ops() {
			fmt.Printf("  %s %s%s%s\n", op.Kind, op.ID, op.Key, op.Content)
		}
		for _, act := range a.Actions {
			fmt.Printf("  action %s %s: %s\n", act.Tool, act.StatusName(), act.Result)
		}
	}
	// Output:
	// base: deploy-42 seq 1; a: 0 atoms; b: 2 atoms, 3 ops
	// seq 2:
	//   set_subgoal_status build
	//   set image
	//   action registry.push done: {"digest":"sha256:9f86"}
	// seq 3:
	//   append_message Deployed.
}
