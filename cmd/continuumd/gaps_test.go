package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCommitMismatch: a repeated commit of a committed attempt answers
// the commit only when it carries the same delta; another delta is
// commit_mismatch, and the store holds the first.
func TestCommitMismatch(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	p, _ := ts.begin("r", nil)
	a := map[string]any{"op": "set", "key": "k", "value": "a"}
	first := ts.commit(p, a)
	again := ts.commit(p, map[string]any{"value": "a", "key": "k", "op": "set"}) // the same delta, its fields in another order
	if again.str("head") != first.str("head") {
		t.Fatalf("a repeated commit answered %s, the first %s", again, first)
	}
	wantError(t, ts.do("POST", p+"/commit", map[string]any{"delta": []any{map[string]any{"op": "set", "key": "k", "value": "b"}}}), 409, codeCommitMismatch, "delta")
	wantError(t, ts.do("POST", p+"/commit", map[string]any{"delta": []any{}}), 409, codeCommitMismatch, "delta")
	st := ts.must(200, "GET", "/v1/runs/r/state", nil)
	if mem, _ := st.body["memory"].(map[string]any); mem["k"] != "a" {
		t.Fatalf("the state after a mismatched commit: %s", st)
	}
}

// TestUTF8Everywhere: a body that is not UTF-8 is refused alike whatever
// field holds the bad bytes (encoding/json would replace them without a
// word), naming the field.
func TestUTF8Everywhere(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	p, _ := ts.begin("r", nil)
	bad := "\xff\xfe"
	for _, tc := range []struct {
		name, path, body, field string
	}{
		{"tool", p + "/calls/0", `{"tool":"a` + bad + `"}`, "tool"},
		{"args", p + "/calls/0", `{"tool":"t","args":{"x":"` + bad + `"}}`, "args.x"},
		{"key", p + "/calls/0", `{"tool":"t","key":"` + bad + `"}`, "key"},
		{"redact", p + "/calls/0", `{"tool":"t","redact":["/a","/` + bad + `"]}`, "redact[1]"},
		{"memory key", p + "/commit", `{"delta":[{"op":"set","key":"ok","value":"v"},{"op":"set","key":"` + bad + `","value":"v"}]}`, "delta[1].key"},
		{"memory value", p + "/commit", `{"delta":[{"op":"set","key":"k","value":"` + bad + `"}]}`, "delta[0].value"},
		{"fail reason", p + "/fail", `{"reason":"` + bad + `"}`, "reason"},
		{"request id", "/v1/runs/r/attempts", `{"request_id":"` + bad + `"}`, "request_id"},
		// The path named stays short: half a million levels deep, or a key
		// of half a megabyte (fieldAt's bounds).
		{"deep", "/v1/runs/r/attempts", `{"x":` + strings.Repeat("[", 1<<19) + bad, "x" + strings.Repeat("[0]", fieldDepth-1) + "..."},
		{"long key", "/v1/runs/r/attempts", `{"` + strings.Repeat("k", 1<<19) + `":"` + bad + `"}`, strings.Repeat("k", fieldKey) + "..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, ts.do("POST", tc.path, tc.body), 400, codeBadRequest, tc.field)
		})
	}
	// An escaped lone surrogate is no character either (encoding/json
	// would read U+FFFD): refused alike, where a pair and an escaped
	// backslash before "u" are text.
	for _, tc := range []struct {
		name, path, body, field string
	}{
		{"high surrogate alone", p + "/calls/0", `{"tool":"a\ud800"}`, "tool"},
		{"low surrogate alone", p + "/calls/0", `{"tool":"t","args":{"x":"\uDC00"}}`, "args.x"},
		{"high then not low", p + "/commit", `{"delta":[{"op":"set","key":"k","value":"\ud83d\u0041"}]}`, "delta[0].value"},
		{"pair reversed", p + "/fail", `{"reason":"\ude00\ud83d"}`, "reason"},
		{"at the end", "/v1/runs/r/attempts", `{"request_id":"x\udbff"}`, "request_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, ts.do("POST", tc.path, tc.body), 400, codeBadRequest, tc.field)
		})
	}
	// Nothing of it reached the attempt: it takes a call and commits.
	ts.act(p, 0, map[string]any{"tool": "t"}, "ok")
	ts.must(200, "POST", p+"/commit", `{"delta":[{"op":"set","key":"k\\ud800","value":"\ud83d\ude00 \u00e9"}]}`)
	st := ts.must(200, "GET", "/v1/runs/r/state", nil)
	if mem, _ := st.body["memory"].(map[string]any); mem[`k\ud800`] != "\U0001F600 \u00e9" {
		t.Fatalf("escaped text was not kept as sent: %s", st)
	}
}

// rawExchange writes req on a new connection to ts and reads one answer.
func rawExchange(t *testing.T, ts *testServer, req string) (*http.Response, map[string]any) {
	t.Helper()
	c, err := net.Dial("unix", ts.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go io.WriteString(c, req) // the server may answer before reading all of it
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("%d answer is not JSON (%v): %q", resp.StatusCode, err, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	return resp, body
}

func errorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// TestHTTPErrorsAreJSON: the answers net/http would write by itself (a
// header too large, a malformed request, the redirect of a path that is
// not canonical) are JSON errors with a code.
func TestHTTPErrorsAreJSON(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	for _, tc := range []struct {
		name, req string
		status    int
		code      string
	}{
		{"header too large", "GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", 431, codeHeaderTooLarge},
		{"malformed header", "GET /v1/health HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400, codeBadRequest},
		{"unknown transfer encoding", "POST /v1/runs/r/end HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, codeBadRequest},
		{"dot-dot", "GET /v1/runs/../health HTTP/1.1\r\nHost: x\r\n\r\n", 400, codeBadRequest},
		{"dot", "GET /v1/./health HTTP/1.1\r\nHost: x\r\n\r\n", 400, codeBadRequest},
		{"double slash", "GET /v1//runs HTTP/1.1\r\nHost: x\r\n\r\n", 400, codeBadRequest},
		{"connect", "CONNECT x:80 HTTP/1.1\r\nHost: x:80\r\n\r\n", 405, codeMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := rawExchange(t, ts, tc.req)
			if resp.StatusCode != tc.status || errorCode(body) != tc.code {
				t.Fatalf("got %d %v, want %d %s", resp.StatusCode, body, tc.status, tc.code)
			}
		})
	}
	// A percent-encoded ".." is a run id like any other, not a path step.
	wantError(t, ts.do("GET", "/v1/runs/%2E%2E", nil), 404, codeRunNotFound, "run")
}

// TestBodyTimeout: a client that sends its body slowly is answered 408
// request_timeout after --body-timeout, and its connection closed.
func TestBodyTimeout(t *testing.T) {
	ts := startServer(t, "", func(c *serverConfig) { c.bodyTimeout = 200 * time.Millisecond })
	ts.openRun("r")
	c, err := net.Dial("unix", ts.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/runs/r/attempts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	raw, _ := io.ReadAll(resp.Body)
	var body map[string]any
	json.Unmarshal(raw, &body)
	if resp.StatusCode != 408 || errorCode(body) != codeTimeout {
		t.Fatalf("got %d %q", resp.StatusCode, raw)
	}
	// A long call waiting for its outcome is not cut by the body timeout.
	p, _ := ts.begin("r", nil)
	r := ts.must(200, "POST", p+"/calls/0", map[string]any{"tool": "t"})
	wantStatus(t, r, "execute")
	time.Sleep(300 * time.Millisecond)
	wantStatus(t, ts.must(200, "POST", p+"/calls/0/outcome", map[string]any{"result": "ok"}), "done")
	ts.commit(p)
}

// TestMaxConns: past --max-conns a new connection's request is answered
// 503 too_many_connections; when one closes, the next is served.
func TestMaxConns(t *testing.T) {
	ts := &testServer{t: t, dir: shortTempDir(t) + "/store", maxConns: 2}
	ts.sock = ts.dir + ".sock"
	ts.cfg = testConfig(ts.dir)
	ts.start()
	t.Cleanup(ts.stop)
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("unix", ts.sock)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// The server accepts in order: a request on each held connection makes
	// sure both hold their slot.
	for _, c := range held {
		fmt.Fprintf(c, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("a held connection: %v %v", resp, err)
		}
		io.Copy(io.Discard, resp.Body)
	}
	resp, body := rawExchange(t, ts, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 503 || errorCode(body) != codeTooManyConns {
		t.Fatalf("got %d %v, want 503 %s", resp.StatusCode, body, codeTooManyConns)
	}
	held[0].Close()
	waitFor(t, 10*time.Second, "a slot freed by a closed connection", func() bool {
		r, err := ts.send("GET", "/v1/health", nil)
		ts.cl.CloseIdleConnections()
		return err == nil && r.status == 200
	})
	held[1].Close()
}
