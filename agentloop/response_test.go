package agentloop

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/google/go-cmp/cmp"
	"github.com/zeebo/blake3"
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

// TestModelArgs pins the model call's ledger arguments (certified calls'
// fingerprints depend on them), and checks that the digest absorbed step
// by step is the digest of the whole conversation.
func TestModelArgs(t *testing.T) {
	msgs := []frame.Message{
		{Role: frame.RoleSystem, Content: "be brief"},
		{Role: frame.RoleUser, Content: "hi"},
		{Role: frame.RoleAssistant, ToolCalls: []frame.ToolCall{{ID: "c1", Name: "t", Arguments: []byte(`{"a": 1}`)}}},
		{Role: frame.RoleTool, CallID: "c1", Tool: "t", Content: "ok", IsError: true},
		{Role: frame.RoleAssistant, Content: "done"},
	}
	tools := []ToolSpec{{Name: "t", Description: "a tool", Parameters: []byte(`{"type":"object"}`)}}
	var inc convDigest
	for i := 0; i <= len(msgs); i++ {
		a, err := modelArgs("m", &Request{Messages: msgs[:i], Tools: tools}, &inc, toolsDigest(tools))
		if err != nil {
			t.Fatal(err)
		}
		b, err := modelArgs("m", &Request{Messages: msgs[:i], Tools: tools}, new(convDigest), toolsDigest(tools))
		if err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Fatalf("after %d messages: incremental %s, whole %s", i, a, b)
		}
	}
	// Fewer messages than absorbed (a compaction): starts over.
	a, _ := modelArgs("m", &Request{Messages: msgs[1:3], Tools: tools}, &inc, toolsDigest(tools))
	b, _ := modelArgs("m", &Request{Messages: msgs[1:3], Tools: tools}, new(convDigest), toolsDigest(tools))
	if string(a) != string(b) {
		t.Fatalf("after a compaction: %s, want %s", a, b)
	}
	got, _ := modelArgs("gpt-x", &Request{Messages: msgs, Tools: tools}, new(convDigest), toolsDigest(tools))
	const want = `{"model":"gpt-x","request":"REQ","messages":5,"tools":1}`
	var args struct{ Request string }
	_ = json.Unmarshal(got, &args)
	if string(got) != strings.Replace(want, "REQ", args.Request, 1) || args.Request != goldenDigest {
		t.Errorf("model args %s, want the request digest %s", got, goldenDigest)
	}
	// The digest is the one modelArgs documents.
	field := func(h *blake3.Hasher, b []byte) {
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(b))))
		h.Write(b)
	}
	c := blake3.New()
	c.WriteString("continuum agentloop conversation v1\x00")
	for i := range msgs {
		field(c, frame.AppendFrame(nil, &frame.Frame{Messages: msgs[i : i+1]}))
	}
	tl := blake3.New()
	tl.WriteString("continuum agentloop tools v1\x00")
	field(tl, []byte("t"))
	field(tl, []byte("a tool"))
	field(tl, []byte(`{"type":"object"}`))
	spec := blake3.Sum256(append(c.Sum(nil), tl.Sum(nil)...))
	if hex.EncodeToString(spec[:]) != goldenDigest {
		t.Errorf("the documented digest is %x, the golden one %s", spec, goldenDigest)
	}
	// Every part of the request moves the digest.
	for name, req := range map[string]*Request{
		"message":     {Messages: msgs[:4], Tools: tools},
		"tool":        {Messages: msgs},
		"description": {Messages: msgs, Tools: []ToolSpec{{Name: "t", Parameters: tools[0].Parameters}}},
	} {
		if b, _ := modelArgs("gpt-x", req, new(convDigest), toolsDigest(req.Tools)); strings.Contains(string(b), goldenDigest) {
			t.Errorf("a request without its %s has the same digest", name)
		}
	}
}

// goldenDigest is TestModelArgs's request digest: frozen.
const goldenDigest = "60ebf038f2804da46c8f19f2260e0f6c3fad52efcaf5d2069225783eeb0842b7"
