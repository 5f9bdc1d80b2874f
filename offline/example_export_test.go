package offline_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/offline"
)

// Export a run's atoms as JSON Lines, read-only (beside a running agent
// too), and read them back the way an analysis tool does: by field name.
func ExampleInspector_Export() {
	dir, err := os.MkdirTemp("", "continuum-export-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	// An agent's run of two atoms.
	db, err := engine.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	run, err := db.Run(ctx, "deploy-42")
	if err != nil {
		log.Fatal(err)
	}
	atom, _ := run.Begin(ctx)
	out, err := atom.Do(ctx, ledger.Action{Tool: "billing.charge", Args: []byte(`{"customer":"c_42","cents":1200}`)},
		func(ctx context.Context, key string) ([]byte, error) { return []byte(`{"charge":"ch_1"}`), nil })
	if err != nil {
		log.Fatal(err)
	}
	if err := atom.Commit(ctx, new(frame.Delta).SetObjective("deploy the service").Set("charge", out)); err != nil {
		log.Fatal(err)
	}
	atom, _ = run.Begin(ctx)
	if err := atom.Commit(ctx, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: "Done."})); err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}

	// The export: seqs 0 and 0 mean the whole run.
	in, err := offline.Inspect(ctx, dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer in.Close()
	var jsonl bytes.Buffer
	n, err := in.Export(ctx, &jsonl, "deploy-42", 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("atoms:", n)

	// Each line is one atom: its delta op by op, its actions with their
	// arguments and results embedded as JSON.
	sc := bufio.NewScanner(&jsonl)
	sc.Buffer(nil, 256<<20)
	for sc.Scan() {
		var a struct {
			Seq   uint64
			Delta []struct {
				Op string
			}
			Actions []struct {
				Tool, Status string
				Result       json.RawMessage
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("seq %d: %d ops, first %s\n", a.Seq, len(a.Delta), a.Delta[0].Op)
		for _, act := range a.Actions {
			fmt.Printf("  %s %s %s\n", act.Tool, act.Status, act.Result)
		}
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// atoms: 2
	// seq 1: 2 ops, first set_objective
	//   billing.charge done {"charge":"ch_1"}
	// seq 2: 1 ops, first append_message
}
