package agentloop_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/continuumdb/continuum/agentloop"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// A loop with one tool and a model that calls it once, then answers. A
// real program passes a model such as agentloop/openai's Client.Complete,
// and a Reconcile that asks the downstream about a key.
func ExampleLoop() {
	dir, err := os.MkdirTemp("", "agentloop-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := engine.Open(filepath.Join(dir, "store"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	run, err := db.Run(ctx, "weather-1")
	if err != nil {
		log.Fatal(err)
	}

	model := func(ctx context.Context, req *agentloop.Request) (frame.Message, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == frame.RoleTool {
			return frame.Message{Role: frame.RoleAssistant, Content: "It is " + last.Content + " in Lisbon."}, nil
		}
		return frame.Message{Role: frame.RoleAssistant, ToolCalls: []frame.ToolCall{
			{ID: "call_1", Name: "weather", Arguments: []byte(`{"city": "Lisbon"}`)},
		}}, nil
	}
	loop := &agentloop.Loop{
		Run:     run,
		Model:   model,
		ModelID: "example",
		Tools: map[string]agentloop.Tool{
			"weather": {
				Description: "The weather in a city.",
				Parameters:  []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`),
				Idempotent:  true, // a read: calling it again under its key is harmless
				Func: func(ctx context.Context, call frame.ToolCall, key string) ([]byte, error) {
					return []byte("sunny, 21°C"), nil
				},
			},
		},
		Prompt: []frame.Message{{Role: frame.RoleUser, Content: "What is the weather in Lisbon?"}},
	}
	status, answer, err := loop.Drive(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(status, string(answer))
	for _, m := range run.State().Messages {
		fmt.Printf("%-9v %q %d calls %q\n", m.Role, m.Content, len(m.ToolCalls), m.CallID)
	}
	// Output:
	// completed It is sunny, 21°C in Lisbon.
	// user      "What is the weather in Lisbon?" 0 calls ""
	// assistant "" 1 calls ""
	// tool      "sunny, 21°C" 0 calls "call_1"
	// assistant "It is sunny, 21°C in Lisbon." 0 calls ""
}
