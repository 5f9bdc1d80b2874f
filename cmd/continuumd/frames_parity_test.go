package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// parityStep is one request of the parity scenario. Its path and body may
// name what an earlier answer gave: {A}, {B}, {Q}, {W} the attempt
// prefixes saved under those names, {hash} and {size} the last blob's.
type parityStep struct {
	method, path string
	body         any // JSON-encoded unless a string (sent as it is)
	ctype        string
	save         string // save the answer's attempt as this name
}

// parityScenario touches every route of openapi.json, with answers of
// success and of error, and the errors the HTTP layer answers itself
// (404, 405, a path that is not canonical, 413, malformed JSON).
func parityScenario(maxBody int64) []parityStep {
	delta := []any{map[string]any{"op": "set", "key": "k", "value": "v"}, map[string]any{"op": "append_message", "role": "assistant", "content": "hi"}}
	return []parityStep{
		{method: "GET", path: "/v1/health"},
		{method: "PUT", path: "/v1/runs/p"},
		{method: "PUT", path: "/v1/runs/q"},
		{method: "GET", path: "/v1/runs/p"},
		{method: "GET", path: "/v1/runs"},
		{method: "POST", path: "/v1/runs/p/attempts", body: map[string]any{"request_id": "b1"}, save: "A"},
		{method: "POST", path: "/v1/runs/p/attempts", body: map[string]any{}},
		{method: "GET", path: "/v1/runs/p/attempts/{A}"},
		{method: "POST", path: "/v1/runs/p/attempts/{A}/heartbeat", body: map[string]any{}},
		{method: "POST", path: "/v1/runs/p/attempts/{A}/calls/0", body: map[string]any{"tool": "book", "args": map[string]any{"n": 1}, "compensate": map[string]any{"tool": "unbook", "args": map[string]any{"n": 1}}}},
		{method: "POST", path: "/v1/runs/p/attempts/{A}/calls/0/outcome", body: map[string]any{"result": "booked"}},
		{method: "POST", path: "/v1/runs/p/attempts/{A}/calls/1", body: map[string]any{"tool": "mail", "args": map[string]any{}}},
		{method: "POST", path: "/v1/runs/p/attempts/{A}/calls/1/resolve", body: map[string]any{"result": "x"}},
		{method: "POST", path: "/v1/runs/p/attempts/{A}/calls/1/outcome", body: map[string]any{"result": "sent"}},
		{method: "POST", path: "/v1/runs/p/attempts/{A}/calls/3", body: map[string]any{"tool": "x", "args": map[string]any{}}},
		{method: "POST", path: "/v1/runs/p/attempts/{A}/send", body: map[string]any{"to": "q", "payload": "hello"}},
		{method: "POST", path: "/v1/runs/p/attempts/{A}/streams/s1", body: map[string]any{"data": "c0"}},
		{method: "POST", path: "/v1/runs/p/attempts/{A}/blobs", body: "the blob's bytes", ctype: "text/plain"},
		{method: "POST", path: "/v1/runs/p/attempts/{A}/commit", body: map[string]any{"delta": delta}},
		{method: "POST", path: "/v1/runs/p/attempts/{A}/commit", body: map[string]any{"delta": []any{}}},
		{method: "GET", path: "/v1/runs/p/blobs/{hash}/{size}?media_type=text/plain"},
		{method: "GET", path: "/v1/runs/p/blobs/{hash}/1"},
		{method: "GET", path: "/v1/runs/p/state"},
		{method: "GET", path: "/v1/runs/p/atoms/1"},
		{method: "GET", path: "/v1/runs/p/atoms/7"},
		{method: "GET", path: "/v1/runs/p/read?seq=1&key=k&from=1"},
		{method: "GET", path: "/v1/heads"},
		{method: "GET", path: "/v1/runs/p/interrupted"},
		{method: "GET", path: "/v1/runs/p/streams"},
		{method: "GET", path: "/v1/runs/p/streams/s1?from=0"},
		{method: "POST", path: "/v1/runs/q/attempts", body: map[string]any{}, save: "Q"},
		{method: "POST", path: "/v1/runs/q/attempts/{Q}/receive", body: map[string]any{"wait_ms": 0}},
		{method: "POST", path: "/v1/runs/q/attempts/{Q}/fail", body: map[string]any{"reason": "not now"}},
		{method: "GET", path: "/v1/runs/q/inbox"},
		{method: "POST", path: "/v1/runs/p/branches", body: map[string]any{"name": "b1", "reads": []any{}}, save: "B"},
		{method: "POST", path: "/v1/runs/p/attempts/{B}/commit", body: map[string]any{"delta": []any{map[string]any{"op": "set", "key": "b", "value": "1"}}}},
		{method: "POST", path: "/v1/runs/p/branches", body: map[string]any{"name": ""}},
		{method: "POST", path: "/v1/runs/p/fork", body: map[string]any{"at": 1, "id": "pf"}},
		{method: "GET", path: "/v1/runs/p/diff?a=1&b=2"},
		{method: "POST", path: "/v1/runs/p/verify", body: map[string]any{}},
		{method: "GET", path: "/v1/runs/p/inspect"},
		{method: "POST", path: "/v1/verify", body: map[string]any{"deep": true}},
		{method: "POST", path: "/v1/runs/p/rollback", body: map[string]any{"to": 0, "allow_not_undone": true, "request_id": "rb"}},
		{method: "GET", path: "/v1/runs/p/rollback"},
		{method: "POST", path: "/v1/runs/p/rollback/outcome", body: map[string]any{"step": 0, "result": "unbooked"}},
		{method: "POST", path: "/v1/runs/p/rollback/resolve", body: map[string]any{"key": "nokey", "result": "x"}},
		{method: "GET", path: "/v1/runs/p/rollback"},
		{method: "PUT", path: "/v1/runs/w"},
		{method: "POST", path: "/v1/runs/w/wait", body: map[string]any{"name": "approval", "timeout_ms": 3600000}},
		{method: "GET", path: "/v1/runs/w/wait"},
		{method: "POST", path: "/v1/runs/w/events", body: map[string]any{"name": "approval", "sender": "s1", "payload": "yes"}},
		{method: "POST", path: "/v1/runs/w/events", body: map[string]any{"name": "approval", "sender": "s1", "payload": "no"}},
		{method: "GET", path: "/v1/ready?wait_ms=0"},
		{method: "POST", path: "/v1/runs/w/attempts", body: map[string]any{}, save: "W"},
		{method: "GET", path: "/v1/runs/w/attempts/{W}/wait"},
		{method: "POST", path: "/v1/runs/w/attempts/{W}/commit", body: map[string]any{"delta": []any{}}},
		{method: "POST", path: "/v1/runs/w/sleep", body: map[string]any{"duration_ms": 3600000}},
		{method: "POST", path: "/v1/runs/w/wait/cancel", body: map[string]any{}},
		{method: "POST", path: "/v1/runs/p/memory/k/erase", body: map[string]any{"reason": "gdpr"}},
		{method: "POST", path: "/v1/runs/q/end", body: map[string]any{"status": "completed"}},
		{method: "POST", path: "/v1/runs/q/erase", body: map[string]any{"reason": "gdpr"}},
		{method: "POST", path: "/v1/runs/q/delete", body: map[string]any{"reason": "done"}},
		{method: "GET", path: "/v1/runs/q"},
		{method: "POST", path: "/v1/gc", body: map[string]any{}},
		{method: "GET", path: "/v1/stats"},
		// the errors of the layers around the handlers
		{method: "GET", path: "/v1/nothing"},
		{method: "DELETE", path: "/v1/runs/p"},
		{method: "GET", path: "/v1/runs/p/../q"},
		{method: "GET", path: "/v1/runs/%2e%2e"},
		{method: "POST", path: "/v1/runs/p/attempts", body: "{not json"},
		{method: "POST", path: "/v1/runs/p/attempts", body: `{"request_id":"` + strings.Repeat("x", int(maxBody)) + `"}`},
		{method: "PUT", path: "/v1/runs/" + strings.Repeat("r", 300)},
	}
}

// parityAnswer is an answer as the parity test compares it.
type parityAnswer struct {
	Status  int
	Code    string
	Headers map[string]string
	Body    any
}

// normalize replaces in v what differs between two servers given the
// same requests: attempt tokens (by their order of appearance), times,
// the durations of stats, and store ids.
func normalize(v any, tokens map[string]string) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			switch {
			case k == "attempt" || k == "token" || k == "store_id":
				if s, ok := e.(string); ok {
					if tokens[s] == "" {
						tokens[s] = fmt.Sprintf("<%s %d>", k, len(tokens))
					}
					e = tokens[s]
				}
			case strings.HasSuffix(k, "_ms") || strings.HasSuffix(k, "_ns") || strings.HasSuffix(k, "_seconds") || strings.HasSuffix(k, "_bytes") || k == "bytes" || k == "size_on_disk":
				if _, ok := e.(float64); ok {
					e = "<measure>"
				}
			}
			out[k] = normalize(e, tokens)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e, tokens)
		}
		return out
	case string:
		if _, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return "<time>"
		}
		if t := tokens[x]; t != "" {
			return t
		}
		if hex64.MatchString(x) {
			return "<hash>" // chain heads differ: the records hold times
		}
		for _, r := range textNoise {
			x = r.re.ReplaceAllString(x, r.with)
		}
		return x
	}
	return v
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// textNoise is what differs between two stores in a text: times,
// attempt tokens, store ids, temporary directories.
var textNoise = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "<time>"},
	{regexp.MustCompile(`att_[0-9a-f]{32}`), "<attempt>"},
	{regexp.MustCompile(`^[0-9a-f]{32}$`), "<store>"},
	{regexp.MustCompile(`continuum-[0-9a-f]{16}`), "<origin>"},
	{regexp.MustCompile(`/[^ ]*/store/`), "<dir>/store/"},
}

// runParity runs the scenario against ts and returns its answers.
func runParity(t *testing.T, ts *testServer, steps []parityStep) []parityAnswer {
	t.Helper()
	vars := map[string]string{}
	tokens := map[string]string{}
	var out []parityAnswer
	for i, st := range steps {
		path := st.path
		for k, v := range vars {
			path = strings.ReplaceAll(path, "{"+k+"}", v)
		}
		var rd io.Reader
		switch b := st.body.(type) {
		case nil:
		case string:
			rd = strings.NewReader(b)
		default:
			j, err := json.Marshal(b)
			if err != nil {
				t.Fatal(err)
			}
			rd = bytes.NewReader(j)
		}
		req, err := http.NewRequest(st.method, "http://continuumd"+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if st.ctype != "" {
			req.Header.Set("Content-Type", st.ctype)
		}
		if ts.token != "" {
			req.Header.Set("Authorization", "Bearer "+ts.token)
		}
		resp, err := ts.cl.Do(req)
		if err != nil {
			t.Fatalf("step %d %s %s: %v", i, st.method, path, err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("step %d %s %s: %v", i, st.method, path, err)
		}
		a := parityAnswer{Status: resp.StatusCode, Headers: map[string]string{}}
		for _, h := range []string{"Content-Type", "Allow", "Www-Authenticate", "Retry-After", "X-Content-Type-Options"} {
			if v := resp.Header.Get(h); v != "" {
				a.Headers[h] = v
			}
		}
		var body any
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatalf("step %d %s %s: not JSON: %q", i, st.method, path, raw)
			}
			if m, ok := body.(map[string]any); ok {
				if e, ok := m["error"].(map[string]any); ok {
					a.Code, _ = e["code"].(string)
				}
				if at, ok := m["attempt"].(string); ok && st.save != "" && resp.StatusCode < 300 {
					vars[st.save] = at
				}
				if h, ok := m["hash"].(string); ok {
					vars["hash"] = h
					vars["size"] = fmt.Sprint(m["size"])
				}
			}
			a.Body = normalize(body, tokens)
		} else {
			a.Body = string(raw)
		}
		out = append(out, a)
	}
	return out
}

// TestFramesParity sends every route of openapi.json over HTTP and over
// frames, to two servers given the same requests, and compares status,
// error code, the headers the protocol names and the body (modulo
// attempt tokens, times and measures).
func TestFramesParity(t *testing.T) {
	steps := parityScenario(testConfig("").maxBody)
	// every route of openapi.json is in the scenario
	doc := loadOpenAPI(t)
	mux := http.NewServeMux()
	for p, ops := range doc.Paths {
		for m := range ops {
			mux.HandleFunc(strings.ToUpper(m)+" "+p, func(http.ResponseWriter, *http.Request) {})
		}
	}
	hit := map[string]bool{}
	for _, st := range steps {
		r, _ := http.NewRequest(st.method, "http://x"+strings.NewReplacer("{A}", "a", "{B}", "b", "{Q}", "q", "{W}", "w", "{hash}", "h", "{size}", "1").Replace(st.path), nil)
		if _, pat := mux.Handler(r); pat != "" {
			hit[pat] = true
		}
	}
	var missing []string
	for p, ops := range doc.Paths {
		for m := range ops {
			if !hit[strings.ToUpper(m)+" "+p] {
				missing = append(missing, strings.ToUpper(m)+" "+p)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("the scenario misses routes of openapi.json: %v", missing)
	}

	overHTTP := runParity(t, startServer(t, "", nil), steps)
	overFrames := runParity(t, startFramesServer(t, nil), steps)
	statuses := map[int]int{}
	for i := range steps {
		statuses[overHTTP[i].Status]++
		if d := cmp.Diff(overHTTP[i], overFrames[i]); d != "" {
			t.Errorf("step %d %s %s: HTTP and frames differ (-http +frames):\n%s", i, steps[i].method, steps[i].path, d)
		}
	}
	t.Logf("%d requests, statuses %v", len(steps), statuses)
}
