package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/agentloop"
	"github.com/continuumdb/continuum/frame"
	"github.com/google/go-cmp/cmp"
)

var ctx = context.Background()

// trickyArgs are arguments as a model may write them: white space, a
// newline, escapes that a re-encoding would change, characters that
// encoding/json escapes for HTML.
const trickyArgs = "{ \"q\" : \"caf\\u00e9 <b>&</b>\",\n  \"n\": 1.50e2, \"e\": \"😀\" }"

// server answers with reply and hands each request to got.
func server(t *testing.T, status int, reply string, got func(r *http.Request, body []byte)) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read request: %v", err)
		}
		if got != nil {
			got(r, body)
		}
		w.Header().Set("Content-Type", "application/json")
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "7")
		}
		w.WriteHeader(status)
		io.WriteString(w, reply)
	}))
	t.Cleanup(s.Close)
	return s
}

func client(t *testing.T, url string) *Client {
	t.Helper()
	temp := 0.0
	c, err := New(Options{BaseURL: url + "/v1/", APIKey: "sk-test", Model: "gpt-test", Temperature: &temp})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func completion(message string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"message":` +
		message + `,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
}

// TestArgumentsByteForByte: the arguments the server wrote come back in
// the frame.Message exactly, and go back to the server exactly.
func TestArgumentsByteForByte(t *testing.T) {
	argsJSON, _ := json.Marshal(trickyArgs)
	reply := completion(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":` +
		string(argsJSON) + `}}]}`)
	var sent []byte
	var hdr http.Header
	s := server(t, 200, reply, func(r *http.Request, body []byte) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			t.Errorf("%s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
		}
		sent, hdr = body, r.Header
	})
	c := client(t, s.URL)
	req := &agentloop.Request{
		Messages: []frame.Message{{Role: frame.RoleUser, Content: "find a café"}},
		Tools:    []agentloop.ToolSpec{{Name: "search", Description: "search the web", Parameters: []byte(`{"type": "object",  "properties": {"q": {"type":"string"}}}`)}},
		Key:      "ck1-3:r-1:1:0",
	}
	m, err := c.Complete(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.ToolCalls) != 1 || string(m.ToolCalls[0].Arguments) != trickyArgs || m.Content != "" || m.Role != frame.RoleAssistant {
		t.Fatalf("got %+v, want one call with arguments %q", m, trickyArgs)
	}
	if hdr.Get("Authorization") != "Bearer sk-test" || hdr.Get("Idempotency-Key") != req.Key || hdr.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", hdr)
	}
	if !strings.Contains(string(sent), `"parameters":{"type": "object",  "properties": {"q": {"type":"string"}}}`) {
		t.Errorf("the tool's Parameters were not sent verbatim: %s", sent)
	}

	// The turn and a tool message go back: the server reads the same
	// arguments string it wrote.
	req.Messages = append(req.Messages, m, frame.Message{Role: frame.RoleTool, CallID: "call_1", Tool: "search", Content: `{"hits":3}`})
	if _, err := c.Complete(ctx, req); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Role       string  `json:"role"`
			Content    *string `json:"content"`
			ToolCallID string  `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(sent, &body); err != nil {
		t.Fatalf("request is not JSON: %v\n%s", err, sent)
	}
	asst := body.Messages[1]
	if asst.Content != nil || len(asst.ToolCalls) != 1 || asst.ToolCalls[0].Function.Arguments != trickyArgs ||
		asst.ToolCalls[0].ID != "call_1" || asst.ToolCalls[0].Type != "function" {
		t.Errorf("assistant turn sent as %+v", asst)
	}
	if tm := body.Messages[2]; tm.Role != "tool" || tm.ToolCallID != "call_1" || *tm.Content != `{"hits":3}` {
		t.Errorf("tool message sent as %+v", tm)
	}
}

// TestRequestBody pins the request a conversation of every shape makes.
func TestRequestBody(t *testing.T) {
	var sent string
	s := server(t, 200, completion(`{"role":"assistant","content":"ok"}`), func(_ *http.Request, b []byte) { sent = string(b) })
	seed := int64(7)
	par := false
	c, err := New(Options{BaseURL: s.URL, Model: "m", Seed: &seed, MaxCompletionTokens: 64, ParallelToolCalls: &par})
	if err != nil {
		t.Fatal(err)
	}
	req := &agentloop.Request{Messages: []frame.Message{
		{Role: frame.RoleDeveloper, Content: "be brief <always> & kind\n"},
		{Role: frame.RoleUser, Parts: []frame.Part{
			{Kind: frame.PartText, Text: "what is this?"},
			{Kind: frame.PartJSON, JSON: []byte(`{"type":"image_url", "image_url":{"url":"https://x/y.png"}}`)},
		}},
		{Role: frame.RoleAssistant, Content: "Looking.", ToolCalls: []frame.ToolCall{{ID: "c1", Name: "look", Arguments: []byte(`{"a":1}`)}}},
		{Role: frame.RoleTool, CallID: "c1", Tool: "look", Content: "a cat", IsError: false},
		{Role: frame.RoleAssistant, Tool: "look", CallID: "c2"},
		{Role: frame.RoleTool, CallID: "c2", Content: "failed", IsError: true},
		{Role: frame.RoleAssistant, Parts: []frame.Part{
			{Kind: frame.PartText, Text: "again"},
			{Kind: frame.PartToolCall, Call: frame.ToolCall{ID: "c3", Name: "look", Arguments: []byte(`{}`)}},
		}},
	}, Tools: []agentloop.ToolSpec{{Name: "look"}}}
	if _, err := c.Complete(ctx, req); err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","messages":[` +
		`{"role":"developer","content":"be brief <always> & kind\n"},` +
		`{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url", "image_url":{"url":"https://x/y.png"}}]},` +
		`{"role":"assistant","content":"Looking.","tool_calls":[{"id":"c1","type":"function","function":{"name":"look","arguments":"{\"a\":1}"}}]},` +
		`{"role":"tool","content":"a cat","tool_call_id":"c1"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"look","arguments":"{}"}}]},` +
		`{"role":"tool","content":"failed","tool_call_id":"c2"},` +
		`{"role":"assistant","content":[{"type":"text","text":"again"}],"tool_calls":[{"id":"c3","type":"function","function":{"name":"look","arguments":"{}"}}]}` +
		`],"tools":[{"type":"function","function":{"name":"look"}}],"parallel_tool_calls":false,"seed":7,"max_completion_tokens":64}`
	if sent != want {
		t.Errorf("request body\n%s\nwant\n%s", sent, want)
	}
	if !json.Valid([]byte(sent)) {
		t.Errorf("request body is not JSON")
	}
}

func TestResponseShapes(t *testing.T) {
	for name, c := range map[string]struct {
		message string
		want    frame.Message
	}{
		"string": {`{"role":"assistant","content":"Hi <3"}`, frame.Message{Role: frame.RoleAssistant, Content: "Hi <3"}},
		"null":   {`{"role":"assistant","content":null}`, frame.Message{Role: frame.RoleAssistant}},
		"refusal": {`{"role":"assistant","content":null,"refusal":"I can't help with that."}`,
			frame.Message{Role: frame.RoleAssistant, Content: "I can't help with that."}},
		"parts": {`{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"text","text":"b","annotations":[]},{"type":"refusal","refusal":"no"}]}`,
			frame.Message{Role: frame.RoleAssistant, Parts: []frame.Part{
				{Kind: frame.PartText, Text: "a"},
				{Kind: frame.PartJSON, JSON: []byte(`{"type":"text","text":"b","annotations":[]}`)},
				{Kind: frame.PartJSON, JSON: []byte(`{"type":"refusal","refusal":"no"}`)},
			}}},
		"empty arguments": {`{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"n","arguments":""}}]}`,
			frame.Message{Role: frame.RoleAssistant, ToolCalls: []frame.ToolCall{{ID: "c", Name: "n"}}}},
	} {
		s := server(t, 200, completion(c.message), nil)
		got, err := client(t, s.URL).Complete(ctx, &agentloop.Request{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	for name, reply := range map[string]string{
		"no choices":    `{"choices":[]}`,
		"not json":      `{"choices":`,
		"user role":     completion(`{"role":"user","content":"x"}`),
		"custom call":   completion(`{"role":"assistant","tool_calls":[{"id":"c","type":"custom","custom":{"name":"n","input":"x"}}]}`),
		"content shape": completion(`{"role":"assistant","content":5}`),
	} {
		s := server(t, 200, reply, nil)
		if m, err := client(t, s.URL).Complete(ctx, &agentloop.Request{}); err == nil {
			t.Errorf("%s: got %+v, want an error", name, m)
		}
	}
}

func TestAPIError(t *testing.T) {
	s := server(t, http.StatusTooManyRequests, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, nil)
	_, err := client(t, s.URL).Complete(ctx, &agentloop.Request{})
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != 429 || ae.Code != "rate_limit_exceeded" || ae.Type != "requests" ||
		ae.Message != "Rate limit reached" || ae.RetryAfter != 7*time.Second {
		t.Fatalf("got %#v (%v)", ae, err)
	}
	if !strings.Contains(err.Error(), "HTTP 429") || !strings.Contains(err.Error(), "Rate limit reached") {
		t.Errorf("message %q", err)
	}
	s = server(t, http.StatusBadGateway, "<html>bad gateway</html>", nil)
	_, err = client(t, s.URL).Complete(ctx, &agentloop.Request{})
	if !errors.As(err, &ae) || ae.StatusCode != 502 || ae.Message != "<html>bad gateway</html>" {
		t.Fatalf("got %#v (%v)", ae, err)
	}
}

func TestRefusals(t *testing.T) {
	for name, opts := range map[string]Options{
		"no model":   {BaseURL: "http://localhost"},
		"bad url":    {Model: "m", BaseURL: "localhost:8080"},
		"bad scheme": {Model: "m", BaseURL: "ftp://x"},
		"bad tokens": {Model: "m", MaxCompletionTokens: -1},
	} {
		if _, err := New(opts); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s := server(t, 200, completion(`{"role":"assistant","content":"x"}`), func(*http.Request, []byte) { t.Errorf("a refused request was sent") })
	c := client(t, s.URL)
	for name, m := range map[string]frame.Message{
		"tool result part": {Role: frame.RoleUser, Parts: []frame.Part{{Kind: frame.PartToolResult, CallID: "c", Text: "x"}}},
		"tool without id":  {Role: frame.RoleTool, Content: "x"},
		"bad role":         {Role: frame.Role(9)},
		"bad json part":    {Role: frame.RoleUser, Parts: []frame.Part{{Kind: frame.PartJSON, JSON: []byte(`[1]`)}}},
	} {
		if _, err := c.Complete(ctx, &agentloop.Request{Messages: []frame.Message{m}}); err == nil {
			t.Errorf("%s: sent", name)
		}
	}
	if id := client(t, s.URL).ID(); id != "gpt-test temperature=0" {
		t.Errorf("ID() = %q", id)
	}
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(completion(`{"role":"assistant","content":"x","tool_calls":[{"id":"c","type":"function","function":{"name":"n","arguments":"{}"}}]}`)))
	f.Add([]byte(completion(`{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"refusal","refusal":"no"}]}`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeResponse(b)
		if err != nil {
			return
		}
		if m.Role != frame.RoleAssistant {
			t.Fatalf("decoded a %v message", m.Role)
		}
	})
}
