package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/engine"
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
