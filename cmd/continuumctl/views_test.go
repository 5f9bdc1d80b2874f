package main

import (
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/offline"
)

// TestDescribeOp pins the one-line form of the ops of LLM-shaped messages
// (tool calls, parts, errors) and of texts that refer to an atom's
// certified results, as inspect and diff print them.
func TestDescribeOp(t *testing.T) {
	d := new(frame.Delta).
		AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: "Checking both.", ToolCalls: []frame.ToolCall{
			{ID: "call_1", Name: "get_weather", Arguments: []byte(`{"city":"Oslo"}`)},
			{ID: "call_2", Name: "get_time"},
		}}).
		AppendMessage(frame.Message{Role: frame.RoleTool, Tool: "get_weather", CallID: "call_1", Content: "no such city", IsError: true}).
		AppendMessage(frame.Message{Role: frame.RoleUser, Parts: []frame.Part{{Text: "a"}, {Text: "b"}}}).
		ToolOutputResult("call_2", "get_time", 1).
		ClearScratch()
	want := []string{
		`append_message role=assistant content="Checking both." tool_calls="get_weather(call_1) get_time(call_2)"`,
		`append_message role=tool tool="get_weather" call="call_1" content="no such city" is_error`,
		`append_message role=user content="" parts=2`,
		`tool_output_ref call="call_2" tool="get_time" refs=/content:#1`,
		`clear_scratch`,
	}
	ops := d.Ops()
	if len(ops) != len(want) {
		t.Fatalf("%d ops, want %d", len(ops), len(want))
	}
	for i, op := range ops {
		if got := describeOp(offline.ExportedOp{Op: op}); got != want[i] {
			t.Errorf("op %d:\n got %s\nwant %s", i, got, want[i])
		}
	}
	refs := new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleTool, Tool: "search", CallID: "c", Content: `{"hits":3}`}).
		ReferResults([][]byte{[]byte("other"), []byte(`{"hits":3}`)})
	if got, want := describeOp(offline.ExportedOp{Op: refs.Ops()[0]}), `append_message role=tool tool="search" call="c" content="" refs=/content:#1`; got != want {
		t.Errorf("a content that refers to a result:\n got %s\nwant %s", got, want)
	}
}
