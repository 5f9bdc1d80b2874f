package main

import (
	"sort"
	"strings"
	"testing"
)

// TestBadRequests: every malformed request gets a clear answer: a status,
// a code, and the field it concerns; none reaches the engine.
func TestBadRequests(t *testing.T) {
	ts := startServer(t, "", func(c *serverConfig) { c.maxBody = 4 << 10 })
	ts.openRun("r")
	p, _ := ts.begin("r", nil)
	ts.must(200, "POST", p+"/calls/0", map[string]any{"tool": "t"})
	commit := p + "/commit"
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code, field        string
	}{
		{"malformed JSON", "POST", commit, `{"delta": [`, 400, codeBadRequest, ""},
		{"not JSON at all", "POST", commit, `delta=1`, 400, codeBadRequest, ""},
		{"two values", "POST", commit, `{"delta":[]} {}`, 400, codeBadRequest, ""},
		{"an array body", "POST", commit, `[]`, 400, codeBadRequest, ""},
		{"unknown field", "POST", commit, `{"delta":[],"deltas":[]}`, 400, codeBadRequest, "deltas"},
		{"wrong type", "POST", commit, `{"delta":{}}`, 400, codeBadRequest, "delta"},
		{"missing delta", "POST", commit, `{}`, 400, codeBadRequest, "delta"},
		{"op missing", "POST", commit, `{"delta":[{"key":"k"}]}`, 400, codeBadRequest, "delta[0].op"},
		{"unknown op", "POST", commit, `{"delta":[{"op":"explode"}]}`, 400, codeBadRequest, "delta[0].op"},
		{"op not an object", "POST", commit, `{"delta":[7]}`, 400, codeBadRequest, "delta[0]"},
		{"a field of another op", "POST", commit, `{"delta":[{"op":"delete","key":"k","value":"v"}]}`, 400, codeBadRequest, "delta[0].value"},
		{"a field no op has", "POST", commit, `{"delta":[{"op":"delete","key":"k","colour":"red"}]}`, 400, codeBadRequest, "delta[0].colour"},
		{"required field missing", "POST", commit, `{"delta":[{"op":"set","value":"v"}]}`, 400, codeBadRequest, "delta[0].key"},
		{"wrong type in an op", "POST", commit, `{"delta":[{"op":"set","key":"k","value":"v"},{"op":"drop_messages","count":"2"}]}`, 400, codeBadRequest, "delta[1].count"},
		{"bad subgoal status", "POST", commit, `{"delta":[{"op":"set_subgoal_status","id":"s","status":"finished"}]}`, 400, codeBadRequest, "delta[0].status"},
		{"bad role", "POST", commit, `{"delta":[{"op":"append_message","role":"robot"}]}`, 400, codeBadRequest, "delta[0].role"},
		{"value and value_base64", "POST", commit, `{"delta":[{"op":"set","key":"k","value":"a","value_base64":"YQ=="}]}`, 400, codeBadRequest, "delta[0].value"},
		{"bad base64", "POST", commit, `{"delta":[{"op":"set","key":"k","value_base64":"%%%"}]}`, 400, codeBadRequest, "delta[0].value_base64"},
		{"empty subgoal id", "POST", commit, `{"delta":[{"op":"add_subgoal","id":"","text":"x"}]}`, 400, codeBadRequest, "delta[0].id"},
		{"body too large", "POST", commit, `{"delta":[{"op":"set","key":"k","value":"` + strings.Repeat("x", 8<<10) + `"}]}`, 413, codeTooLarge, ""},
		{"call without tool", "POST", p + "/calls/1", `{"args":1}`, 400, codeBadRequest, "tool"},
		{"call number not a number", "POST", p + "/calls/one", `{"tool":"t"}`, 400, codeBadRequest, "call"},
		{"call args with duplicate keys", "POST", p + "/calls/1", `{"tool":"t","args":{"a":1,"a":2}}`, 422, codeInvalidArgs, "args"},
		{"bad redact pointer", "POST", p + "/calls/2", `{"tool":"t","args":{"a":1},"redact":["no-slash"]}`, 422, codeInvalidArgs, "redact"},
		{"redact not strings", "POST", p + "/calls/3", `{"tool":"t","redact":[1]}`, 400, codeBadRequest, "redact"},
		{"outcome with nothing", "POST", p + "/calls/0/outcome", `{}`, 400, codeBadRequest, "result"},
		{"outcome with both", "POST", p + "/calls/0/outcome", `{"result":"a","error":"b"}`, 400, codeBadRequest, "error"},
		{"outcome with an empty error", "POST", p + "/calls/0/outcome", `{"error":""}`, 400, codeBadRequest, "error"},
		{"outcome of no call", "POST", p + "/calls/99/outcome", `{"result":"a"}`, 404, codeCallNotFound, "call"},
		{"lease too short", "POST", "/v1/runs/r/attempts", `{"lease_ms":5}`, 400, codeBadRequest, "lease_ms"},
		{"lease not an integer", "POST", "/v1/runs/r/attempts", `{"lease_ms":1.5}`, 400, codeBadRequest, "lease_ms"},
		{"takeover not a boolean", "POST", "/v1/runs/r/attempts", `{"takeover":"yes"}`, 400, codeBadRequest, "takeover"},
		{"unknown run", "GET", "/v1/runs/nope", nil, 404, codeRunNotFound, "run"},
		{"begin of an unknown run", "POST", "/v1/runs/nope/attempts", `{}`, 404, codeRunNotFound, "run"},
		{"unknown attempt", "POST", "/v1/runs/r/attempts/att_0/commit", `{"delta":[]}`, 404, codeAttemptNotFound, "attempt"},
		{"attempt of another run", "GET", strings.Replace(p, "/runs/r/", "/runs/q/", 1), nil, 404, codeAttemptNotFound, "attempt"},
		{"bad seq", "GET", "/v1/runs/r/atoms/0", nil, 400, codeBadRequest, "seq"},
		{"bad query seq", "GET", "/v1/runs/r/state?seq=-1", nil, 400, codeBadRequest, "seq"},
		{"no such route", "GET", "/v2/runs", nil, 404, codeRouteNotFound, ""},
		{"wrong method", "DELETE", "/v1/runs/r", nil, 405, codeMethodNotAllowed, ""},
		{"a body where none is taken", "PUT", "/v1/runs/r", `{"x":1}`, 400, codeBadRequest, "x"},
		{"verify with a bad key", "POST", "/v1/verify", `{"public_key":"nonsense"}`, 400, codeBadRequest, "public_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.do(tc.method, tc.path, tc.body)
			wantError(t, r, tc.status, tc.code, tc.field)
			e := r.body["error"].(map[string]any)
			if msg, _ := e["message"].(string); msg == "" {
				t.Fatalf("no message: %s", r)
			}
		})
	}
	// None of it disturbed the attempt: the call still waits for its outcome.
	wantStatus(t, ts.must(200, "POST", p+"/calls/0/outcome", map[string]any{"result": "ok"}), "done")
	if r := ts.do("DELETE", "/v1/runs/r", nil); r.Allow() != "PUT, GET" {
		t.Fatalf("405 without the methods it takes in Allow: %s", r)
	}
	// A delta that does not apply is refused by the engine, and the
	// attempt stays open for a delta that does.
	wantError(t, ts.do("POST", commit, `{"delta":[{"op":"set_subgoal_status","id":"nope","status":"done"}]}`), 422, codeInvalidDelta, "delta")
	ts.commit(p)
}

// TestBearerToken: a server with a token answers only requests that carry
// it.
func TestBearerToken(t *testing.T) {
	ts := startServer(t, "", func(c *serverConfig) { c.token = []byte("s3cret-token-0123456789") })
	wantError(t, ts.do("GET", "/v1/health", nil), 401, codeUnauthorized, "")
	ts.token = "wrong-token-0123456789"
	wantError(t, ts.do("GET", "/v1/runs", nil), 401, codeUnauthorized, "")
	ts.token = "s3cret-token-0123456789x"
	wantError(t, ts.do("GET", "/v1/runs", nil), 401, codeUnauthorized, "")
	ts.token = "s3cret-token-0123456789"
	ts.must(200, "GET", "/v1/health", nil)
	ts.openRun("r")
}

// TestOpSpecs: opFieldNames is sorted (errors name the first stray field
// by name) and names every field opFields does, each at the bit
// givenFields sets for it.
func TestOpSpecs(t *testing.T) {
	if !sort.StringsAreSorted(opFieldNames) {
		t.Fatalf("opFieldNames is not sorted: %q", opFieldNames)
	}
	s := func(v string) *string { return &v }
	one := uint64(1)
	op := wireOp{Args: []byte(`{}`), CallID: s(""), Content: s(""), Count: &one, ID: s(""), IsError: new(bool), Key: s(""),
		Parts: []wirePart{}, Role: s(""), Status: s(""), Text: s(""), Tool: s(""), ToolCalls: []wireToolCall{}, Value: s("")}
	if g := op.givenFields(); g != 1<<len(opFieldNames)-1 {
		t.Fatalf("every field given: bits %b", g)
	}
	for name, spec := range opFields {
		sp := opSpecs[name]
		var want []string
		for _, f := range strings.Fields(strings.Replace(spec, "|", " ", 1)) {
			want = append(want, f)
		}
		var got []string
		for i, f := range opFieldNames {
			if sp.allowed&(1<<i) != 0 {
				got = append(got, f)
			}
		}
		sort.Strings(want)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("op %s allows %q, opFields says %q", name, got, want)
		}
	}
}
