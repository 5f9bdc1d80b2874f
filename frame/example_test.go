package frame_test

import (
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agenttext"
)

// An atom's delta, applied to the frame and stored compressed.
func Example() {
	f := &frame.Frame{}
	var d frame.Delta
	d.SetObjective("move the invoices bucket to eu-west-1").
		AddSubgoal("copy", "copy the objects").
		SetSubgoalStatus("copy", frame.SubgoalActive).
		AppendMessage(frame.Message{Role: frame.RoleUser, Content: "please move it today"}).
		AddPending(frame.Pending{CallID: "call_1", Tool: "create_bucket", Args: []byte(`{"region":"eu-west-1"}`)})
	if err := f.Apply(&d); err != nil {
		fmt.Println(err)
		return
	}

	c := frame.NewCompressor(nil)
	stored := c.Compress(nil, frame.AppendDelta(nil, &d), 0)

	// After a restart: decompress, decode, apply to the snapshot.
	raw, err := c.Decompress(nil, stored)
	if err != nil {
		fmt.Println(err)
		return
	}
	d2, err := frame.DecodeDelta(raw)
	if err != nil {
		fmt.Println(err)
		return
	}
	g := &frame.Frame{}
	if err := g.Apply(d2); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(g.Objective)
	fmt.Println(g.Subgoals[0].ID, g.Subgoals[0].Status)
	fmt.Println(len(g.Messages), "message,", len(g.Pending), "pending")
	// Output:
	// move the invoices bucket to eu-west-1
	// copy active
	// 1 message, 1 pending
}

// Apply is all or nothing: an op that cannot apply leaves the frame as it was.
func ExampleFrame_Apply() {
	f := &frame.Frame{Objective: "ship"}
	var d frame.Delta
	d.SetObjective("changed").SetSubgoalStatus("missing", frame.SubgoalDone)
	err := f.Apply(&d)
	fmt.Println(err)
	fmt.Println(f.Objective)
	// Output:
	// frame: invalid delta op: op 1 (set_subgoal_status): unknown subgoal "missing"
	// ship
}

// ToolOutput records a result and clears the matching pending action.
func ExampleDelta_ToolOutput() {
	f := &frame.Frame{}
	var d frame.Delta
	d.AddPending(frame.Pending{CallID: "call_7", Tool: "send_email", Key: "run-1/3/0"})
	f.Apply(&d)

	d.Reset()
	d.ToolOutput("call_7", "send_email", []byte(`{"status":"sent"}`))
	f.Apply(&d)
	m := f.Messages[0]
	fmt.Println(m.Role, m.Tool, m.CallID, m.Content, len(f.Pending))
	// Output:
	// tool send_email call_7 {"status":"sent"} 0
}

// A dictionary trained on earlier deltas makes small records much smaller.
// Register it under an id that never changes its bytes.
func ExampleTrainDict() {
	g := agenttext.New(1)
	delta := func() []byte {
		var d frame.Delta
		d.ToolOutput(g.CallID(), g.Tool(), g.ToolResult(200)).
			AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: g.Message(150)})
		return frame.AppendDelta(nil, &d)
	}
	var samples [][]byte
	for i := 0; i < 500; i++ {
		samples = append(samples, delta())
	}
	dict, err := frame.TrainDict(samples, 16<<10)
	if err != nil {
		fmt.Println(err)
		return
	}
	dicts := frame.NewDicts()
	if err := dicts.Add(1, dict); err != nil {
		fmt.Println(err)
		return
	}
	c := frame.NewCompressor(dicts)
	var raw, plain, withDict int
	for i := 0; i < 100; i++ {
		rec := delta()
		raw += len(rec)
		plain += len(c.Compress(nil, rec, 0))
		withDict += len(c.Compress(nil, rec, 1))
	}
	fmt.Println("dictionary at least 1.5x better:", float64(plain)/float64(withDict) >= 1.5)
	fmt.Println("reading without the dictionary fails:", func() bool {
		_, err := frame.NewCompressor(frame.NewDicts()).Decompress(nil, c.Compress(nil, delta(), 1))
		return errors.Is(err, frame.ErrUnknownDict)
	}())
	// Output:
	// dictionary at least 1.5x better: true
	// reading without the dictionary fails: true
}

// An assistant turn of two tool calls, and their results recorded as
// references to the certificates that hold them.
func ExampleDelta_ReferResults() {
	f := &frame.Frame{}
	var d frame.Delta
	d.AppendMessage(frame.Message{Role: frame.RoleAssistant, ToolCalls: []frame.ToolCall{
		{ID: "call_1", Name: "create_bucket", Arguments: []byte(`{"name":"logs","region":"eu-west-1"}`)},
		{ID: "call_2", Name: "send_email", Arguments: []byte(`{"to":"ops@example.com"}`)},
	}})
	if err := f.Apply(&d); err != nil {
		fmt.Println(err)
		return
	}

	// The next atom ran both tools (through Do): these are its certified
	// results, in the order of its actions.
	results := [][]byte{
		[]byte(`{"status":"created","arn":"arn:aws:s3:::logs"}`),
		[]byte(`{"status":"sent","message_id":"<1@example.com>"}`),
	}
	d.Reset()
	d.AppendMessage(frame.Message{Role: frame.RoleTool, CallID: "call_1", Content: string(results[0])}).
		AppendMessage(frame.Message{Role: frame.RoleTool, CallID: "call_2", Content: string(results[1])})
	stored := d.ReferResults(results)
	fmt.Println("inline:", frame.EncodedDeltaSize(&d), "bytes; referring:", frame.EncodedDeltaSize(stored), "bytes; refs", stored.Refs())

	rec := frame.AppendDelta(nil, stored)
	back, err := frame.DecodeDelta(rec)
	if err != nil {
		fmt.Println(err)
		return
	}
	err = f.ApplyWith(back, func(i int) ([]byte, error) { return results[i], nil })
	fmt.Println(err, len(f.Messages[0].ToolCalls), "calls;", f.Messages[2].Content)
	// Output:
	// inline: 116 bytes; referring: 24 bytes; refs [0 1]
	// <nil> 2 calls; {"status":"sent","message_id":"<1@example.com>"}
}
