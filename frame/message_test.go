package frame

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeV2Malformed(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		is   error
		msg  string
	}{
		{"delta v2 without v2", rec(0xD2, 1, 7), ErrCorrupt, "offset 0: version 2 delta holds nothing of version 2"},
		{"empty delta v2", rec(0xD2, 0), ErrCorrupt, "holds nothing of version 2"},
		{"frame v2 without v2", rec(0xF2, 0, 0, 0, 0, 1, 1, 0, 0), ErrCorrupt, "version 2 frame holds nothing of version 2"},
		{"op 13 in v1", rec(0xD1, 1, 13, 0, 0, 0), ErrCorrupt, "offset 2: unknown op kind 13 (op 0)"},
		{"op 14 in v2", rec(0xD2, 1, 14, 0, 0, 0), ErrCorrupt, "unknown op kind 14"},
		{"developer in v1", rec(0xD1, 1, 8, 4, 0), ErrCorrupt, "unknown message role 4"},
		{"role 5 in v2", rec(0xD2, 1, 8, 5, 0), ErrCorrupt, "unknown message role 5"},
		{"head bit 7", rec(0xD2, 1, 8, 0x81, 0), ErrCorrupt, "message head 0x81 has reserved bits set"},
		{"flags truncated", rec(0xD2, 1, 8, 0x41), ErrCorrupt, "truncated: want message flags"},
		{"flags zero", rec(0xD2, 1, 8, 0x41, 0, 0), ErrCorrupt, "offset 4: message flags byte is zero"},
		{"flags reserved", rec(0xD2, 1, 8, 0x41, 0x10, 0), ErrCorrupt, "message flags 0x10 have reserved bits set"},
		{"call count zero", rec(0xD2, 1, 8, 0x42, 0x02, 0, 0), ErrCorrupt, "offset 6: tool call count is 0 but flagged present"},
		{"call count beyond input", rec(0xD2, 1, 8, 0x42, 0x02, 0, 50, 0, 0, 0), ErrCorrupt, "tool call count 50 exceeds"},
		{"call truncated", rec(0xD2, 1, 8, 0x42, 0x02, 0, 1, 1, "a", 2, "ls"), ErrCorrupt, "truncated: want tool call arguments length"},
		{"part count zero", rec(0xD2, 1, 8, 0x41, 0x04, 0, 0), ErrCorrupt, "part count is 0 but flagged present"},
		{"part kind", rec(0xD2, 1, 8, 0x41, 0x04, 0, 1, 0x07, 0), ErrCorrupt, "offset 7: unknown part kind 7"},
		{"part reserved", rec(0xD2, 1, 8, 0x41, 0x04, 0, 1, 0x40, 0), ErrCorrupt, "part head 0x40 has reserved bits set"},
		{"is_error on text", rec(0xD2, 1, 8, 0x41, 0x04, 0, 1, 0x10, 0), ErrCorrupt, "is_error flag on a text part"},
		{"ref on json", rec(0xD2, 1, 8, 0x41, 0x04, 0, 1, 0x23, 0), ErrCorrupt, "reference flag on a json part"},
		{"ref on tool_call", rec(0xD2, 1, 8, 0x42, 0x04, 0, 1, 0x21, 0, 0, 0), ErrCorrupt, "reference flag on a tool_call part"},
		{"result index too large", rec(0xD2, 1, 13, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x10), ErrCorrupt, "tool output result index 4294967296 exceeds 4294967295"},
		{"content ref too large", rec(0xD2, 1, 8, 0x43, 0x08, 0x80, 0x80, 0x80, 0x80, 0x10), ErrCorrupt, "message content result index 4294967296 exceeds"},
		{"frame content ref", rec(0xF2, 0, 0, 0, 0, 1, 0x43, 0x08, 0, 0), ErrCorrupt, "a frame's message refers to a certified result"},
		{"frame part ref", rec(0xF2, 0, 0, 0, 0, 1, 0x41, 0x04, 0, 1, 0x20, 0, 0), ErrCorrupt, "a frame's part refers to a certified result"},
		{"frame bad arguments", rec(0xF2, 0, 0, 0, 0, 1, 0x42, 0x02, 0, 1, 1, "a", 2, "ls", 1, "{", 0), ErrCorrupt, `message 0: tool call 0: call "a": arguments not valid JSON`},
		{"frame calls on user", rec(0xF2, 0, 0, 0, 0, 1, 0x41, 0x02, 0, 1, 1, "a", 2, "ls", 0, 0), ErrCorrupt, "tool calls on a message of role user"},
		{"frame v4", rec(0xF4, 0, 0, 0, 0, 0, 0), ErrVersion, "version 4 (this build reads versions 1 to 3)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.in[0]&0xf0 == 0xF0 {
				var f *Frame
				if f, err = DecodeFrame(tc.in); err == nil {
					t.Fatalf("decoded %+v", f)
				}
			} else {
				var d *Delta
				if d, err = DecodeDelta(tc.in); err == nil {
					t.Fatalf("decoded %v", d)
				}
			}
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v does not match %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

// TestApplyInvalidMessage: a message that breaks a rule is refused by
// CanApply and Apply with an error naming the op and the rule, the frame
// unchanged, and a frame holding it fails Validate with the same reason.
func TestApplyInvalidMessage(t *testing.T) {
	call := func(id, name, args string) ToolCall { return ToolCall{ID: id, Name: name, Arguments: []byte(args)} }
	tests := []struct {
		name string
		m    Message
		msg  string
	}{
		{"unknown role", Message{Role: Role(5)}, "unknown role 5"},
		{"calls on user", Message{Role: RoleUser, ToolCalls: []ToolCall{call("a", "ls", "")}}, "tool calls on a message of role user"},
		{"calls on tool", Message{Role: RoleTool, ToolCalls: []ToolCall{call("a", "ls", "")}}, "tool calls on a message of role tool"},
		{"empty call id", Message{Role: RoleAssistant, ToolCalls: []ToolCall{call("", "ls", "")}}, "tool call 0: empty id"},
		{"empty call name", Message{Role: RoleAssistant, ToolCalls: []ToolCall{call("a", "", "")}}, `tool call 0: call "a" has an empty name`},
		{"bad arguments", Message{Role: RoleAssistant, ToolCalls: []ToolCall{call("a", "ls", "{}"), call("b", "ls", `{"path": /tmp}`)}},
			`tool call 1: call "b": arguments not valid JSON: invalid character '/' looking for beginning of value (at byte 10 of 14)`},
		{"truncated arguments", Message{Role: RoleAssistant, ToolCalls: []ToolCall{call("a", "ls", `{"path":"/t`)}}, "arguments not valid JSON: unexpected end of JSON input"},
		{"repeated call id", Message{Role: RoleAssistant, ToolCalls: []ToolCall{call("a", "ls", ""), call("b", "rm", ""), call("a", "cp", "")}},
			`tool call 2 repeats id "a" of tool call 0`},
		{"is_error on assistant", Message{Role: RoleAssistant, Content: "x", IsError: true}, "IsError on a message of role assistant"},
		{"content and parts", Message{Role: RoleUser, Content: "x", Parts: []Part{{Kind: PartText, Text: "y"}}}, "both Content and Parts"},
		{"unknown part kind", Message{Role: RoleUser, Parts: []Part{{Kind: PartKind(9)}}}, "part 0 (part(9)): unknown part kind 9"},
		{"text part with call id", Message{Role: RoleUser, Parts: []Part{{Kind: PartText, Text: "y", CallID: "c"}}}, "part 0 (text): sets CallID"},
		{"text part with json", Message{Role: RoleUser, Parts: []Part{{Kind: PartText, JSON: []byte("{}")}}}, "part 0 (text): sets JSON"},
		{"text part with call", Message{Role: RoleUser, Parts: []Part{{Kind: PartText, Call: call("a", "", "")}}}, "sets Call"},
		{"tool_call in user", Message{Role: RoleUser, Parts: []Part{{Kind: PartToolCall, Call: call("a", "ls", "")}}}, "part 0 (tool_call): in a message of role user: only assistant messages request tool calls"},
		{"tool_call with text", Message{Role: RoleAssistant, Parts: []Part{{Kind: PartToolCall, Text: "x", Call: call("a", "ls", "")}}}, "sets Text"},
		{"tool_call bad args", Message{Role: RoleAssistant, Parts: []Part{{Kind: PartText, Text: "x"}, {Kind: PartToolCall, Call: call("a", "ls", "[1,")}}},
			`part 1 (tool_call): call "a": arguments not valid JSON`},
		{"tool_call empty id", Message{Role: RoleAssistant, Parts: []Part{{Kind: PartToolCall, Call: call("", "ls", "")}}}, "part 0 (tool_call): empty id"},
		{"repeated part call id", Message{Role: RoleAssistant, Parts: []Part{{Kind: PartToolCall, Call: call("a", "ls", "")}, {Kind: PartText, Text: "x"}, {Kind: PartToolCall, Call: call("a", "rm", "")}}},
			`part 2 repeats tool call id "a" of part 0`},
		{"calls in both places", Message{Role: RoleAssistant, ToolCalls: []ToolCall{call("a", "ls", "")}, Parts: []Part{{Kind: PartToolCall, Call: call("b", "ls", "")}}},
			"tool calls both in ToolCalls and in parts"},
		{"tool_result in assistant", Message{Role: RoleAssistant, Parts: []Part{{Kind: PartToolResult, CallID: "a"}}}, "in a message of role assistant: tool results go in user or tool messages"},
		{"tool_result without call id", Message{Role: RoleUser, Parts: []Part{{Kind: PartToolResult, Text: "ok"}}}, "empty CallID"},
		{"tool_result text and json", Message{Role: RoleUser, Parts: []Part{{Kind: PartToolResult, CallID: "a", Text: "ok", JSON: []byte("[]")}}}, "sets both Text and JSON"},
		{"tool_result json object", Message{Role: RoleUser, Parts: []Part{{Kind: PartToolResult, CallID: "a", JSON: []byte(` {"type":"text"}`)}}},
			"JSON (the result's blocks) is not a JSON array (it begins with '{')"},
		{"tool_result with call", Message{Role: RoleUser, Parts: []Part{{Kind: PartToolResult, CallID: "a", Call: call("a", "ls", "")}}}, "sets Call"},
		{"json part empty", Message{Role: RoleUser, Parts: []Part{{Kind: PartJSON}}}, "empty JSON"},
		{"json part array", Message{Role: RoleUser, Parts: []Part{{Kind: PartJSON, JSON: []byte("[]")}}}, "JSON is not a JSON object"},
		{"json part invalid", Message{Role: RoleUser, Parts: []Part{{Kind: PartJSON, JSON: []byte(`{"a":}`)}}}, "JSON not valid JSON"},
		{"json part with text", Message{Role: RoleUser, Parts: []Part{{Kind: PartJSON, Text: "x", JSON: []byte("{}")}}}, "sets Text"},
		{"json part with is_error", Message{Role: RoleUser, Parts: []Part{{Kind: PartJSON, IsError: true, JSON: []byte("{}")}}}, "sets IsError"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &Frame{Objective: "o", Messages: []Message{{Role: RoleUser, Content: "hi"}}}
			want := AppendFrame(nil, f)
			var d Delta
			d.SetObjective("changed").AppendMessage(tc.m)
			for _, err := range []error{f.CanApply(&d), f.Apply(&d)} {
				if !errors.Is(err, ErrInvalidOp) {
					t.Fatalf("error = %v, want ErrInvalidOp", err)
				}
				if !strings.Contains(err.Error(), "op 1 (append_message): ") || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("error %q does not say %q", err, tc.msg)
				}
			}
			if !bytes.Equal(AppendFrame(nil, f), want) {
				t.Fatal("a failed Apply changed the frame")
			}
			bad := &Frame{Messages: []Message{{Role: RoleUser, Content: "hi"}, tc.m}}
			if err := bad.Validate(); !errors.Is(err, ErrInvalidFrame) || !strings.Contains(err.Error(), "message 1: ") || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Validate = %v, want ErrInvalidFrame saying %q", err, tc.msg)
			}
		})
	}
}

// TestMessageShapes: well-formed messages of each shape apply, encode in
// version 2 only when they need it, and come back equal; the builder
// copies what it is given.
func TestMessageShapes(t *testing.T) {
	args := []byte(`{"region": "eu-west-1"}`)
	block := []byte(`{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}`)
	msgs := []Message{
		{Role: RoleSystem, Content: "be brief"},
		{Role: RoleDeveloper, Content: "answer in French"},
		{Role: RoleUser, Parts: []Part{{Kind: PartText, Text: "what is this?"}, {Kind: PartJSON, JSON: block}}},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: "create_bucket", Arguments: args}, {ID: "call_2", Name: "list"}}},
		{Role: RoleTool, CallID: "call_1", Content: `{"ok":true}`},
		{Role: RoleTool, CallID: "call_2", Tool: "list", Content: "permission denied", IsError: true},
		{Role: RoleAssistant, Parts: []Part{{Kind: PartText, Text: "checking"}, {Kind: PartToolCall, Call: ToolCall{ID: "toolu_1", Name: "ls", Arguments: []byte(`{}`)}}}},
		{Role: RoleUser, Parts: []Part{
			{Kind: PartToolResult, CallID: "toolu_1", Text: "a b c"},
			{Kind: PartToolResult, CallID: "toolu_2", JSON: []byte(`[{"type":"text","text":"boom"}]`), IsError: true},
			{Kind: PartToolResult, CallID: "toolu_3"},
		}},
		{Role: RoleTool, CallID: "toolu_1", Parts: []Part{{Kind: PartToolResult, CallID: "toolu_1", Text: "x"}}},
	}
	f := &Frame{}
	for i, m := range msgs {
		var d Delta
		d.AppendMessage(m)
		b := AppendDelta(nil, &d)
		if wantTag := map[bool]byte{false: tagDelta, true: tagDelta2}[m.needsV2()]; b[0] != wantTag {
			t.Fatalf("message %d: tag %#x, want %#x", i, b[0], wantTag)
		}
		back, err := DecodeDelta(b)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if err := f.Apply(back); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if diff := cmp.Diff(msgs, f.Messages, frameCmp); diff != "" {
		t.Fatalf("messages after encoding (-want +got):\n%s", diff)
	}
	fb, err := DecodeFrame(AppendFrame(nil, f))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f, fb, frameCmp); diff != "" {
		t.Fatalf("frame after encoding (-want +got):\n%s", diff)
	}

	// Arguments and blocks are kept byte for byte, not canonicalized.
	if got := string(fb.Messages[3].ToolCalls[0].Arguments); got != string(args) {
		t.Fatalf("arguments %q, want %q verbatim", got, args)
	}

	// The builder copies: changing what it was given changes nothing.
	m := Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c", Name: "n", Arguments: []byte(`{"a":1}`)}}}
	var d Delta
	d.AppendMessage(m)
	m.ToolCalls[0].Arguments[5] = '2'
	m.ToolCalls[0].ID = "changed"
	g := &Frame{}
	if err := g.Apply(&d); err != nil {
		t.Fatal(err)
	}
	if c := g.Messages[0].ToolCalls[0]; c.ID != "c" || string(c.Arguments) != `{"a":1}` {
		t.Fatalf("the delta kept the caller's slices: %+v", c)
	}

	// Clone is deep: changing a clone's calls and parts leaves f as it was.
	want := AppendFrame(nil, f)
	c := f.Clone()
	c.Messages[3].ToolCalls[0].Arguments[0] = 'X'
	c.Messages[3].ToolCalls[1].ID = "X"
	c.Messages[2].Parts[1].JSON[0] = 'X'
	c.Messages[6].Parts[1].Call.Arguments[0] = 'X'
	if !bytes.Equal(AppendFrame(nil, f), want) {
		t.Fatal("changing a clone's tool calls or parts changed the original")
	}

	// Empty lists are no lists: such a message stays in version 1.
	d.Reset()
	d.AppendMessage(Message{Role: RoleUser, Content: "u", ToolCalls: []ToolCall{}, Parts: []Part{}})
	if b := AppendDelta(nil, &d); b[0] != tagDelta {
		t.Fatalf("a message with empty lists encodes as version %x", b[0])
	}
}

func TestMessageStrings(t *testing.T) {
	var d Delta
	d.AppendMessage(Message{Role: RoleAssistant, Content: "ok", ToolCalls: []ToolCall{{ID: "a", Name: "ls", Arguments: []byte(`{}`)}}}).
		AppendMessage(Message{Role: RoleUser, Parts: []Part{{Kind: PartToolResult, CallID: "a", Text: "R", IsError: true}, {Kind: PartJSON, JSON: []byte(`{}`)}}}).
		ToolOutputResult("a", "ls", 3)
	want := `append_message assistant "ok" "" "" call("a" "ls" "{}")` + "\n" +
		`append_message user "" "" "" part(tool_result "a" error "R") part(json "{}")` + "\n" +
		`tool_output_ref "a" "ls" result#3`
	if got := d.String(); got != want {
		t.Fatalf("String:\n got %s\nwant %s", got, want)
	}
	r := d.ReferResults([][]byte{[]byte("R")})
	if got := strings.Split(r.String(), "\n")[1]; got != `append_message user "" "" "" part(tool_result "a" error result#0) part(json "{}")` {
		t.Fatalf("String of a reference: %s", got)
	}
	for _, tc := range []struct{ got, want string }{
		{RoleDeveloper.String(), "developer"}, {PartToolResult.String(), "tool_result"}, {PartKind(8).String(), "part(8)"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
