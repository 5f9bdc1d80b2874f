package frame_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// These tests take a conversation as each API sends it (testdata), map it
// into frame messages and back the way a user would, field by field with
// no converter, and check that it survives the trip through deltas, the
// codec, compression and whole frames, tool results being recorded as
// references to their certificates.

// OpenAI chat completions, declared as a user would for encoding/json.
type openAIRequest struct {
	Model    string          `json:"model"`
	Messages []openAIMessage `json:"messages"`
}

type openAIMessage struct {
	Role       string           `json:"role"`
	Content    json.RawMessage  `json:"content"` // a string, a list of parts, or null
	ToolCalls  []openAIToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

type openAIToolCall struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Function openAIFunction `json:"function"`
}

type openAIFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Anthropic messages, declared as a user would for encoding/json.
type anthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens int                `json:"max_tokens"`
	System    string             `json:"system,omitempty"`
	Messages  []anthropicMessage `json:"messages"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or a list of blocks
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"` // tool_result: a string or a list of blocks
	IsError   bool            `json:"is_error,omitempty"`
}

// Role.String names the roles as both APIs do.
var roles = map[string]frame.Role{
	"system": frame.RoleSystem, "developer": frame.RoleDeveloper, "user": frame.RoleUser,
	"assistant": frame.RoleAssistant, "tool": frame.RoleTool,
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func isString(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '"' }

func fromOpenAI(t *testing.T, m openAIMessage) frame.Message {
	out := frame.Message{Role: roles[m.Role], CallID: m.ToolCallID}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, frame.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: []byte(c.Function.Arguments)})
	}
	switch {
	case isString(m.Content):
		if err := json.Unmarshal(m.Content, &out.Content); err != nil {
			t.Fatal(err)
		}
	case len(m.Content) > 0 && m.Content[0] == '[':
		var parts []json.RawMessage
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			t.Fatal(err)
		}
		for _, raw := range parts {
			var p struct{ Type, Text string }
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			if p.Type == "text" {
				out.Parts = append(out.Parts, frame.Part{Kind: frame.PartText, Text: p.Text})
			} else { // image_url, input_audio, file: kept as they are
				out.Parts = append(out.Parts, frame.Part{Kind: frame.PartJSON, JSON: raw})
			}
		}
	}
	return out
}

func toOpenAI(t *testing.T, m frame.Message) openAIMessage {
	out := openAIMessage{Role: m.Role.String(), ToolCallID: m.CallID}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, openAIToolCall{ID: c.ID, Type: "function",
			Function: openAIFunction{Name: c.Name, Arguments: string(c.Arguments)}})
	}
	switch {
	case m.Parts != nil:
		var parts []json.RawMessage
		for _, p := range m.Parts {
			if p.Kind == frame.PartText {
				parts = append(parts, mustJSON(t, map[string]string{"type": "text", "text": p.Text}))
			} else {
				parts = append(parts, p.JSON)
			}
		}
		out.Content = mustJSON(t, parts)
	case m.Content != "" || m.ToolCalls == nil:
		out.Content = mustJSON(t, m.Content)
	} // else null: an assistant turn of tool calls only
	return out
}

func fromAnthropic(t *testing.T, m anthropicMessage) frame.Message {
	out := frame.Message{Role: roles[m.Role]}
	if isString(m.Content) {
		if err := json.Unmarshal(m.Content, &out.Content); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		t.Fatal(err)
	}
	for _, raw := range blocks {
		var b anthropicBlock
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Fatal(err)
		}
		switch b.Type {
		case "text":
			out.Parts = append(out.Parts, frame.Part{Kind: frame.PartText, Text: b.Text})
		case "tool_use":
			out.Parts = append(out.Parts, frame.Part{Kind: frame.PartToolCall, Call: frame.ToolCall{ID: b.ID, Name: b.Name, Arguments: b.Input}})
		case "tool_result":
			p := frame.Part{Kind: frame.PartToolResult, CallID: b.ToolUseID, IsError: b.IsError}
			if isString(b.Content) {
				if err := json.Unmarshal(b.Content, &p.Text); err != nil {
					t.Fatal(err)
				}
			} else {
				p.JSON = b.Content
			}
			out.Parts = append(out.Parts, p)
		default: // thinking, image, document, ...: kept as they are
			out.Parts = append(out.Parts, frame.Part{Kind: frame.PartJSON, JSON: raw})
		}
	}
	return out
}

func toAnthropic(t *testing.T, m frame.Message) anthropicMessage {
	out := anthropicMessage{Role: m.Role.String()}
	if m.Parts == nil {
		out.Content = mustJSON(t, m.Content)
		return out
	}
	var blocks []json.RawMessage
	for _, p := range m.Parts {
		var b anthropicBlock
		switch p.Kind {
		case frame.PartText:
			b = anthropicBlock{Type: "text", Text: p.Text}
		case frame.PartToolCall:
			b = anthropicBlock{Type: "tool_use", ID: p.Call.ID, Name: p.Call.Name, Input: p.Call.Arguments}
		case frame.PartToolResult:
			b = anthropicBlock{Type: "tool_result", ToolUseID: p.CallID, IsError: p.IsError, Content: p.JSON}
			if p.JSON == nil {
				b.Content = mustJSON(t, p.Text)
			}
		case frame.PartJSON:
			blocks = append(blocks, p.JSON)
			continue
		}
		blocks = append(blocks, mustJSON(t, b))
	}
	out.Content = mustJSON(t, blocks)
	return out
}

// toolResults returns what the tools returned in m, the results its atom
// certified: a tool message's content, the text of its tool_result parts.
func toolResults(m frame.Message) [][]byte {
	var out [][]byte
	if m.Role == frame.RoleTool {
		out = append(out, []byte(m.Content))
	}
	for _, p := range m.Parts {
		if p.Kind == frame.PartToolResult && p.Text != "" {
			out = append(out, []byte(p.Text))
		}
	}
	return out
}

// record commits each message as its own atom's delta, through the codec
// and compression, and returns the frame an agent sees (live: the deltas
// applied as built) and the one a restart rebuilds (replayed: each delta
// encoded with references to its atom's certified results, compressed,
// decompressed, decoded and applied with a resolver). It checks that they
// are equal, and that tool results are stored as references.
func record(t *testing.T, msgs []frame.Message) *frame.Frame {
	t.Helper()
	c := frame.NewCompressor(nil)
	live, replayed := &frame.Frame{}, &frame.Frame{}
	referred := 0
	for i, m := range msgs {
		var d frame.Delta
		d.AppendMessage(m)
		if err := live.Apply(&d); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		results := toolResults(m)
		stored := d.ReferResults(results)
		raw, err := c.Decompress(nil, c.Compress(nil, frame.AppendDelta(nil, stored), 0))
		if err != nil {
			t.Fatal(err)
		}
		back, err := frame.DecodeDelta(raw)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if len(results) > 0 {
			if len(back.Refs()) != len(results) {
				t.Fatalf("message %d: %d tool results, %d stored as references", i, len(results), len(back.Refs()))
			}
			// A reference costs a flag byte and an index where the text
			// cost a length and its bytes.
			inline, total := frame.EncodedDeltaSize(&d), 0
			for _, r := range results {
				total += len(r)
			}
			if n := frame.EncodedDeltaSize(stored); n > inline-total+2*len(results) {
				t.Fatalf("message %d: %d bytes with references, %d inline: a result is stored again", i, n, inline)
			}
			referred += len(results)
		}
		err = replayed.ApplyWith(back, func(i int) ([]byte, error) { return results[i], nil })
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if referred == 0 {
		t.Fatal("no tool result was recorded")
	}
	if diff := cmp.Diff(msgs, live.Messages, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("the frame's messages are not those recorded (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(live, replayed, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("the replayed frame differs from the live one (-live +replayed):\n%s", diff)
	}
	enc := frame.AppendFrame(nil, replayed)
	if !bytes.Equal(enc, frame.AppendFrame(nil, live)) {
		t.Fatal("the replayed frame encodes differently from the live one")
	}
	snap, err := frame.DecodeFrame(enc)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(live, snap, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("the frame after encoding differs (-want +got):\n%s", diff)
	}
	return snap
}

// sameJSON compares two JSON documents as values (key order and spacing
// aside; strings, such as OpenAI's arguments, byte for byte).
func sameJSON(t *testing.T, want, got []byte) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Fatalf("the conversation did not round-trip (-fixture +after):\n%s", diff)
	}
}

func TestOpenAIConversationRoundTrip(t *testing.T) {
	fixture, err := os.ReadFile("testdata/openai_chat.json")
	if err != nil {
		t.Fatal(err)
	}
	var req openAIRequest
	if err := json.Unmarshal(fixture, &req); err != nil {
		t.Fatal(err)
	}
	var msgs []frame.Message
	for _, m := range req.Messages {
		msgs = append(msgs, fromOpenAI(t, m))
	}
	if n := len(msgs[2].ToolCalls); n != 2 {
		t.Fatalf("the fixture's assistant turn maps to %d tool calls", n)
	}
	f := record(t, msgs)

	out := openAIRequest{Model: req.Model}
	for _, m := range f.Messages {
		out.Messages = append(out.Messages, toOpenAI(t, m))
	}
	sameJSON(t, fixture, mustJSON(t, out))
	// Arguments are kept as the model wrote them, spacing included.
	if got, want := string(f.Messages[2].ToolCalls[1].Arguments), req.Messages[2].ToolCalls[1].Function.Arguments; got != want {
		t.Fatalf("arguments %q, want %q", got, want)
	}
}

func TestAnthropicConversationRoundTrip(t *testing.T) {
	fixture, err := os.ReadFile("testdata/anthropic_messages.json")
	if err != nil {
		t.Fatal(err)
	}
	var req anthropicRequest
	if err := json.Unmarshal(fixture, &req); err != nil {
		t.Fatal(err)
	}
	msgs := []frame.Message{{Role: frame.RoleSystem, Content: req.System}}
	for _, m := range req.Messages {
		msgs = append(msgs, fromAnthropic(t, m))
	}
	if p := msgs[3].Parts[1]; p.Kind != frame.PartToolResult || !p.IsError || p.JSON == nil {
		t.Fatalf("the fixture's failed tool_result maps to %+v", p)
	}
	f := record(t, msgs)

	out := anthropicRequest{Model: req.Model, MaxTokens: req.MaxTokens}
	for i, m := range f.Messages {
		if i == 0 && m.Role == frame.RoleSystem {
			out.System = m.Content
			continue
		}
		out.Messages = append(out.Messages, toAnthropic(t, m))
	}
	sameJSON(t, fixture, mustJSON(t, out))
}
