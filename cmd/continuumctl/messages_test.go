package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// TestInspectAtomMessages: inspect of an atom lists the messages it sent
// (index, receiver, size) and the ids of those it consumed, in text and
// JSON.
func TestInspectAtomMessages(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "s")
	db, err := engine.Open(dir, storeOptions())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := db.Run(ctx, "a")
	b, _ := db.Run(ctx, "b")
	at, _ := a.Begin(ctx)
	if err := at.Send(ctx, "b", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := at.Commit(ctx, new(frame.Delta)); err != nil {
		t.Fatal(err)
	}
	bt, _ := b.Begin(ctx)
	if _, err := bt.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bt.Commit(ctx, new(frame.Delta)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", dir, "a", "--seq", "1"}, "messages sent: 1\n  0 to \"b\": 5 bytes\n"},
		{[]string{"inspect", dir, "b", "--seq", "1"}, "messages consumed: 1\n  \"a\"/1/0\n"},
		{[]string{"inspect", dir, "a", "--seq", "1", "--json"}, `"sent": [`},
		{[]string{"inspect", dir, "b", "--seq", "1", "--json"}, `"from": "a"`},
	} {
		code, out, errOut := runCLI(c.args...)
		if code != cli.ExitOK || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, stderr %q; output lacks %q:\n%s", c.args, code, errOut, c.want, out)
		}
	}
}

// TestInspectFrameMessageFields: the frame view of inspect (text and
// --json, of a run and of an atom) shows every field of a frame.Message:
// an assistant turn that only called tools (ToolCalls, no content), a
// tool message that reports a failure (IsError), an assistant message of
// parts (text and a tool call) and a user message of parts (a tool result
// as blocks, and a JSON block).
func TestInspectFrameMessageFields(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "s")
	db, err := engine.Open(dir, storeOptions())
	if err != nil {
		t.Fatal(err)
	}
	r, _ := db.Run(ctx, "agent")
	a, _ := r.Begin(ctx)
	d := new(frame.Delta).
		AppendMessage(frame.Message{Role: frame.RoleUser, Content: "weather in Oslo?"}).
		AppendMessage(frame.Message{Role: frame.RoleAssistant, ToolCalls: []frame.ToolCall{
			{ID: "call_w1", Name: "weather.get", Arguments: []byte(`{"city":"Oslo"}`)},
			{ID: "call_w2", Name: "clock.now"},
		}}).
		AppendMessage(frame.Message{Role: frame.RoleTool, Tool: "weather.get", CallID: "call_w1", Content: "upstream timeout", IsError: true}).
		AppendMessage(frame.Message{Role: frame.RoleAssistant, Parts: []frame.Part{
			{Kind: frame.PartText, Text: "retrying"},
			{Kind: frame.PartToolCall, Call: frame.ToolCall{ID: "toolu_9", Name: "weather.get", Arguments: []byte(`{"city":"Oslo","retry":1}`)}},
		}}).
		AppendMessage(frame.Message{Role: frame.RoleUser, Parts: []frame.Part{
			{Kind: frame.PartToolResult, CallID: "toolu_9", IsError: true, JSON: []byte(`[{"type":"text","text":"still down"}]`)},
			{Kind: frame.PartJSON, JSON: []byte(`{"type":"image","source":"s3://x"}`)},
		}})
	if err := a.Commit(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"inspect", dir, "agent"}, {"inspect", dir, "agent", "--seq", "1"}} {
		code, out, errOut := runCLI(args...)
		if code != cli.ExitOK {
			t.Fatalf("%v: exit %d, %s", args, code, errOut)
		}
		for _, want := range []string{
			`calls weather.get (call_w1) {"city":"Oslo"}`, "calls clock.now (call_w2)",
			"tool weather.get (call_w1) error: upstream timeout",
			"part 1 text: retrying", `part 2 tool_call weather.get (toolu_9) {"city":"Oslo","retry":1}`,
			`part 1 tool_result for toolu_9 error [{"type":"text","text":"still down"}]`,
			`part 2 json {"type":"image","source":"s3://x"}`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: the output lacks %q:\n%s", args, want, out)
			}
		}
		code, out, errOut = runCLI(append(args, "--json")...)
		var got struct {
			Frame struct {
				Messages []map[string]any `json:"messages"`
			} `json:"frame"`
		}
		if code != cli.ExitOK || json.Unmarshal([]byte(out), &got) != nil || len(got.Frame.Messages) != 5 {
			t.Fatalf("%v --json: exit %d, %s %s", args, code, out, errOut)
		}
		m := got.Frame.Messages
		norm := func(v any) string { b, _ := json.Marshal(v); return string(b) }
		for i, want := range []string{
			`{"content":"weather in Oslo?","role":"user"}`,
			`{"content":"","role":"assistant","tool_calls":[{"arguments":{"city":"Oslo"},"id":"call_w1","name":"weather.get"},{"id":"call_w2","name":"clock.now"}]}`,
			`{"call_id":"call_w1","content":"upstream timeout","is_error":true,"role":"tool","tool":"weather.get"}`,
			`{"content":"","parts":[{"kind":"text","text":"retrying"},{"call":{"arguments":{"city":"Oslo","retry":1},"id":"toolu_9","name":"weather.get"},"kind":"tool_call"}],"role":"assistant"}`,
			`{"content":"","parts":[{"call_id":"toolu_9","is_error":true,"json":[{"text":"still down","type":"text"}],"kind":"tool_result"},{"json":{"source":"s3://x","type":"image"},"kind":"json"}],"role":"user"}`,
		} {
			if g := norm(m[i]); g != want {
				t.Errorf("%v --json: message %d is\n%s\nwant\n%s", args, i, g, want)
			}
		}
	}
}
