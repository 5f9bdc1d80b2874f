package agentloop

import (
	"strings"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/google/go-cmp/cmp"
)

// TestResponseRoundTrip: the certified form gives back the turn byte for
// byte, white space and escapes of the arguments included.
func TestResponseRoundTrip(t *testing.T) {
	for name, m := range map[string]frame.Message{
		"text": {Role: frame.RoleAssistant, Content: "a <b> & c\u2028 é 😀 \"q\" \\ \x00 \n"},
		"calls": {Role: frame.RoleAssistant, Content: "two calls", ToolCalls: []frame.ToolCall{
			{ID: "call_1", Name: "get", Arguments: []byte("{ \"a\" : [1, 2.50e3, \"x\\u00e9\\n\"] }\n")},
			{ID: "call_2", Name: "none"},
		}},
		"parts": {Role: frame.RoleAssistant, Parts: []frame.Part{
			{Kind: frame.PartJSON, JSON: []byte(`{"type":"thinking", "thinking":"…", "signature":"c2ln"}`)},
			{Kind: frame.PartText, Text: "Let me look."},
			{Kind: frame.PartToolCall, Call: frame.ToolCall{ID: "toolu_1", Name: "get", Arguments: []byte(`{"q":"x"}`)}},
		}},
		"empty": {Role: frame.RoleAssistant},
	} {
		b, err := encodeResponse(&m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := decodeResponse(b)
		if err != nil {
			t.Fatalf("%s: decode %s: %v", name, b, err)
		}
		if diff := cmp.Diff(m, got); diff != "" {
			t.Errorf("%s: round trip (-want +got):\n%s", name, diff)
		}
	}
}

// TestResponseFormat pins the certified form: certificates written by one
// version must read back in the next.
func TestResponseFormat(t *testing.T) {
	m := frame.Message{Role: frame.RoleAssistant, Content: "ok <3", ToolCalls: []frame.ToolCall{
		{ID: "c1", Name: "t", Arguments: []byte(`{"a": 1}`)},
	}, Parts: nil}
	b, err := encodeResponse(&m)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"v":1,"content":"ok \u003c3","tool_calls":[{"id":"c1","name":"t","arguments":"{\"a\": 1}"}]}`
	if string(b) != want {
		t.Errorf("encoded\n%s\nwant\n%s", b, want)
	}
	parts := `{"v":1,"parts":[{"type":"text","text":"hi"},{"type":"tool_call","id":"x","name":"n","arguments":"{}"},{"type":"json","json":"{\"k\":1}"}]}`
	got, err := decodeResponse([]byte(parts))
	if err != nil {
		t.Fatal(err)
	}
	wantMsg := frame.Message{Role: frame.RoleAssistant, Parts: []frame.Part{
		{Kind: frame.PartText, Text: "hi"},
		{Kind: frame.PartToolCall, Call: frame.ToolCall{ID: "x", Name: "n", Arguments: []byte("{}")}},
		{Kind: frame.PartJSON, JSON: []byte(`{"k":1}`)},
	}}
	if diff := cmp.Diff(wantMsg, got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}

func TestResponseRefusals(t *testing.T) {
	for name, m := range map[string]frame.Message{
		"user role":   {Role: frame.RoleUser, Content: "hi"},
		"is error":    {Role: frame.RoleAssistant, IsError: true},
		"tool set":    {Role: frame.RoleAssistant, Tool: "t", CallID: "c"},
		"tool result": {Role: frame.RoleAssistant, Parts: []frame.Part{{Kind: frame.PartToolResult, CallID: "c"}}},
		"bad utf-8":   {Role: frame.RoleAssistant, Content: "a\xffb"},
		"bad args":    {Role: frame.RoleAssistant, ToolCalls: []frame.ToolCall{{ID: "c", Name: "n", Arguments: []byte("\"\xc3\"")}}},
	} {
		if b, err := encodeResponse(&m); err == nil {
			t.Errorf("%s: encoded as %s, want a refusal", name, b)
		}
	}
	for name, b := range map[string]string{
		"not json":      `{"v":1`,
		"version":       `{"v":2,"content":"x"}`,
		"no version":    `{"content":"x"}`,
		"unknown field": `{"v":1,"role":"assistant"}`,
		"part type":     `{"v":1,"parts":[{"type":"image"}]}`,
		"trailing":      `{"v":1} {}`,
	} {
		if _, err := decodeResponse([]byte(b)); err == nil || !strings.Contains(err.Error(), "cannot be read") {
			t.Errorf("%s: decode: %v, want ErrBadResponse", name, err)
		}
	}
}

// TestNormalize: arguments that are not JSON are kept as a JSON string
// and the call is marked; others are untouched, the input unchanged.
func TestNormalize(t *testing.T) {
	in := frame.Message{Role: frame.RoleAssistant, ToolCalls: []frame.ToolCall{
		{ID: "a", Name: "t", Arguments: []byte(`{"ok":1}`)},
		{ID: "b", Name: "t", Arguments: []byte(`{"cut`)},
		{ID: "c", Name: "t"},
	}}
	out, bad := normalize(in)
	if string(in.ToolCalls[1].Arguments) != `{"cut` {
		t.Fatalf("normalize changed its input")
	}
	if string(out.ToolCalls[1].Arguments) != `"{\"cut"` || string(out.ToolCalls[0].Arguments) != `{"ok":1}` || out.ToolCalls[2].Arguments != nil {
		t.Errorf("normalized calls %+v", out.ToolCalls)
	}
	if len(bad) != 1 || !strings.Contains(bad[1], "not valid JSON") {
		t.Errorf("bad = %v, want call 1 marked", bad)
	}
	if err := checkTurn(&in); err != nil {
		t.Errorf("a turn with arguments that are not JSON is refused: %v", err)
	}
	if err := checkTurn(&frame.Message{Role: frame.RoleAssistant, ToolCalls: []frame.ToolCall{{ID: "a", Name: "t"}, {ID: "a", Name: "u"}}}); err == nil {
		t.Errorf("repeated call ids accepted")
	}
}

func TestTruncateUTF8(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 5, "abc"}, {"abc", 2, "ab"}, {"aé", 2, "a"}, {"a😀", 4, "a"}, {"a😀", 5, "a😀"}, {"😀😀", 7, "😀"},
	} {
		if got := string(truncateUTF8([]byte(c.in), c.n)); got != c.want {
			t.Errorf("truncateUTF8(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func FuzzResponse(f *testing.F) {
	f.Add([]byte(`{"v":1,"content":"ok","tool_calls":[{"id":"c1","name":"t","arguments":"{\"a\": 1}"}]}`))
	f.Add([]byte(`{"v":1,"parts":[{"type":"text","text":"hi"},{"type":"json","json":"{}"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeResponse(b)
		if err != nil {
			return
		}
		e, err := encodeResponse(&m)
		if err != nil {
			return // text that is not valid UTF-8 decodes replaced, and is refused
		}
		m2, err := decodeResponse(e)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", e, err)
		}
		if diff := cmp.Diff(m, m2); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
