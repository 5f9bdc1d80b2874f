package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/wireframe"
)

// fuzzRoutes are the endpoints that take a body, with the run "fz" and
// the attempt the fuzz function keeps open in place of {attempt}.
var fuzzRoutes = []struct{ method, path string }{
	{"PUT", "/v1/runs/fz"},
	{"POST", "/v1/runs/fz/attempts"},
	{"POST", "/v1/runs/fz/attempts/{attempt}/calls/%d"},
	{"POST", "/v1/runs/fz/attempts/{attempt}/calls/%d/outcome"},
	{"POST", "/v1/runs/fz/attempts/{attempt}/calls/%d/resolve"},
	{"POST", "/v1/runs/fz/attempts/{attempt}/commit"},
	{"POST", "/v1/runs/fz/attempts/{attempt}/fail"},
	{"POST", "/v1/runs/fz/attempts/{attempt}/heartbeat"},
	{"POST", "/v1/verify"},
	{"POST", "/v1/runs/fz2/end"},
	{"POST", "/v1/runs/fz/fork"},
	{"POST", "/v1/runs/fz/wait"},
	{"POST", "/v1/runs/fz/sleep"},
	{"POST", "/v1/runs/fz/wait/cancel"},
	{"POST", "/v1/runs/fz/events"},
}

// FuzzRequests sends fuzzed bodies to every endpoint that takes one,
// through the whole handler, against one store (in memory) that lives as
// long as the fuzz worker: the server must answer each with a status it
// documents and a JSON body, an error with one of its codes; a panic or
// an internal error is a finding.
func FuzzRequests(f *testing.F) {
	seeds := [][]byte{
		[]byte(`{}`),
		[]byte(`{"name":"approval","timeout_ms":50,"seq":0,"sender":"s1","payload":"{\"approved\":true}"}`),
		[]byte(`{"until":"2026-12-06T12:00:00.5Z","duration_ms":1}`),
		[]byte(`{"request_id":"r1","takeover":true,"lease_ms":60000}`),
		[]byte(`{"tool":"t","args":{"a":[1,2,{"b":null}]},"key":"k","idempotent":true,"redact":["/a/0"],"redact_result":["/x"]}`),
		[]byte(`{"result":"ok"}`),
		[]byte(`{"result_base64":"AP8="}`),
		[]byte(`{"error":"no effect"}`),
		[]byte(`{"failed":"no trace","retry":true}`),
		[]byte(`{"delta":[{"op":"set_objective","text":"x"},{"op":"add_subgoal","id":"s","text":"t"},{"op":"set_subgoal_status","id":"s","status":"done"},{"op":"set","key":"k","value_base64":"AP8="},{"op":"delete","key":"k"},{"op":"append_scratch","value":"s"},{"op":"clear_scratch"},{"op":"append_message","role":"user","content":"c","tool":"t","call_id":"c"},{"op":"add_pending","call_id":"p","tool":"t","args":{},"key":"k"},{"op":"tool_output","call_id":"p","tool":"t","content":"o"},{"op":"remove_pending","call_id":"x"},{"op":"drop_messages","count":1}]}`),
		[]byte(`{"reason":"because"}`),
		[]byte(`{"deep":true,"unsigned_tail":3}`),
		[]byte(`{"status":"completed","result":"done"}`),
		[]byte(`{"at":0,"id":"fz-fork"}`),
		[]byte(`{"at":1,"id":"fz"}`),
		[]byte(`{"delta":[{"op":"set","key":"k","value":"v","value_base64":""}]}`),
		[]byte("\x00\xff{"),
	}
	for i, s := range seeds {
		for r := range fuzzRoutes {
			if (i+r)%3 == 0 {
				f.Add(uint8(r), uint8(i%4), s)
			}
		}
	}
	log := slog.New(slog.DiscardHandler)
	fs := vfs.NewMem()
	db, err := engine.Open("store", &engine.Options{FS: fs, NoSync: true, DictSamples: -1, Logger: log})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	cfg := testConfig("store")
	cfg.fs, cfg.callWait, cfg.maxBody = fs, 20*time.Millisecond, 64<<10
	srv := newServer(db, cfg, log)
	h := srv.handler()
	send := func(method, path string, body []byte) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, bytes.NewReader(body)))
		return w
	}
	for _, run := range []string{"fz", "fz2"} {
		if w := send("PUT", "/v1/runs/"+run, nil); w.Code != 200 {
			f.Fatal(w.Body.String())
		}
	}
	var token string
	f.Fuzz(func(t *testing.T, route, call uint8, body []byte) {
		if a := srv.mu.attempts[token]; token == "" || a == nil || a.describe().State != "open" {
			w := send("POST", "/v1/runs/fz/attempts", []byte(`{"takeover":true}`))
			if w.Code != 201 {
				t.Fatalf("begin: %d %s", w.Code, w.Body)
			}
			var b beginResponse
			json.Unmarshal(w.Body.Bytes(), &b)
			token = b.Attempt
		}
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		path := bytes.ReplaceAll([]byte(rt.path), []byte("{attempt}"), []byte(token))
		p := string(path)
		if bytes.Contains(path, []byte("%d")) {
			p = fmt.Sprintf(p, call%8)
		}
		w := send(rt.method, p, body)
		var out map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s %q: the answer is not a JSON object: %d %q", rt.method, p, body, w.Code, w.Body)
		}
		if !slices.Contains([]int{200, 201, 400, 404, 409, 413, 422}, w.Code) {
			t.Fatalf("%s %s %q: status %d: %s", rt.method, p, body, w.Code, w.Body)
		}
		if w.Code >= 400 {
			e, _ := out["error"].(map[string]any)
			code, _ := e["code"].(string)
			msg, _ := e["message"].(string)
			if !slices.Contains(errorCodes, code) || msg == "" {
				t.Fatalf("%s %s %q: error without a known code and a message: %s", rt.method, p, body, w.Body)
			}
		}
		if w.Code == 201 && rt.path == "/v1/runs/fz/attempts" {
			var b beginResponse
			json.Unmarshal(w.Body.Bytes(), &b)
			token = b.Attempt
		}
		if w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("Content-Type %q", w.Header().Get("Content-Type"))
		}
	})
}

// FuzzFrames writes fuzzed bytes after the preface of a frames connection
// to a server on a Unix socket (its store in memory, living as long as
// the fuzz worker), then closes its side: the server must answer only
// well-formed frames (a status, a JSON body, an error with one of its
// codes), never panic, and close the connection.
func FuzzFrames(f *testing.F) {
	req := func(id uint32, method, target string, h http.Header, body string) []byte {
		return wireframe.AppendFrame(nil, id, wireframe.AppendRequestHead(nil, method, target, h), []byte(body))
	}
	valid := req(1, "PUT", "/v1/runs/fz", nil, "")
	pipelined := append(append(req(1, "PUT", "/v1/runs/fz", nil, ""), req(2, "POST", "/v1/runs/fz/attempts", http.Header{"Content-Type": {"application/json"}}, `{"takeover":true}`)...), req(3, "GET", "/v1/runs/fz/state", nil, "")...)
	for _, s := range [][]byte{
		valid,
		pipelined,
		append(slices.Clone(valid), valid...), // a repeated id while in flight, or not
		req(4, "GET", "/v1/ready?wait_ms=100000", nil, ""),
		req(5, "POST", "/v1/runs/fz/events", nil, `{"name":"x","sender":"s","payload":"p"}`),
		req(6, "GET", "/v1/health", http.Header{"Authorization": {"Bearer nope"}}, ""),
		req(7, "GET", "/v1/runs/fz/../x", nil, ""),
		req(8, "POST", "/v1/runs/fz/attempts/att_x/blobs", http.Header{"Content-Type": {"text/plain"}}, "bytes"),
		valid[:len(valid)-3],
		wireframe.AppendFrame(nil, 9, []byte("GET /v1/health\nX: \x01\n"), nil),
		wireframe.AppendFrame(nil, 10, []byte("\xff\xfe\n"), nil),
		wireframe.AppendFrame(nil, 11, nil, []byte("{}")),
		{0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 0},
		{0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 9, 'G', 'E', 'T', ' '},
		{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 0},
		{0, 1, 0, 12, 0, 0, 0, 1, 0, 1, 0, 4},
		{},
	} {
		f.Add(s)
	}
	log := slog.New(slog.DiscardHandler)
	fs := vfs.NewMem()
	db, err := engine.Open("store", &engine.Options{FS: fs, NoSync: true, DictSamples: -1, Logger: log})
	if err != nil {
		f.Fatal(err)
	}
	cfg := testConfig("store")
	cfg.fs, cfg.callWait, cfg.maxBody = fs, 20*time.Millisecond, 64<<10
	srv := newServer(db, cfg, log)
	hs := srv.httpServer(log)
	dir, err := os.MkdirTemp("", "fz")
	if err != nil {
		f.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	l, err := listenUnix(sock)
	if err != nil {
		f.Fatal(err)
	}
	go hs.Serve(srv.listen(hs, l, 1024))
	f.Cleanup(func() {
		shutdown(srv, hs, 5*time.Second, make(chan os.Signal), log)
		os.RemoveAll(dir)
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			c.Write(append([]byte(wireframe.Preface), data...))
			c.(*net.UnixConn).CloseWrite()
		}()
		c.SetReadDeadline(time.Now().Add(hangGuard))
		out, err := io.ReadAll(c)
		if err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("the server did not close the connection: %v", err)
		}
		if !bytes.HasPrefix(out, []byte(wireframe.Preface)) {
			t.Fatalf("no preface: %q", out)
		}
		out = out[len(wireframe.Preface):]
		for len(out) > 0 {
			if len(out) < wireframe.FixedLen {
				t.Fatalf("a torn answer frame: %q", out)
			}
			n, id, hlen := wireframe.Fixed(out)
			if n < 8 || hlen > n-8 || int(n)+4 > len(out) {
				t.Fatalf("answer %d: a frame of %d bytes, head %d, with %d bytes left", id, n, hlen, len(out))
			}
			head, body := out[wireframe.FixedLen:wireframe.FixedLen+hlen], out[wireframe.FixedLen+hlen:4+n]
			out = out[4+n:]
			status, h, err := wireframe.ParseAnswerHead(head)
			if err != nil {
				t.Fatalf("answer %d: %v", id, err)
			}
			if h.Get("Content-Type") != "application/json" {
				continue // a blob's bytes
			}
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatalf("answer %d: not a JSON object: %d %q", id, status, body)
			}
			if status >= 400 {
				e, _ := m["error"].(map[string]any)
				code, _ := e["code"].(string)
				if !slices.Contains(errorCodes, code) || status == 500 && code == codeInternal {
					t.Fatalf("answer %d: %d %s", id, status, body)
				}
			}
		}
	})
}
