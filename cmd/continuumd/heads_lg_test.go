package main

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"reflect"
	"testing"
)

type headsBody struct {
	Runs []struct {
		Run      string            `json:"run"`
		Seq      uint64            `json:"seq"`
		Parent   string            `json:"parent"`
		ForkedAt uint64            `json:"forked_at"`
		Memory   map[string]string `json:"memory"`
		Mem64    map[string]string `json:"memory_base64"`
	} `json:"runs"`
	Truncated bool `json:"truncated"`
}

func (ts *testServer) heads(query string) headsBody {
	ts.t.Helper()
	r := ts.must(200, "GET", "/v1/heads?"+query, nil)
	var b headsBody
	if err := json.Unmarshal(r.raw, &b); err != nil {
		ts.t.Fatalf("heads?%s: %v: %s", query, err, r)
	}
	return b
}

// TestHeads: GET /v1/heads answers the active runs of a prefix, sorted,
// each at its last seq with the keys asked for, forks with their source;
// not an ended run, not a run of another prefix; bad queries are 400.
func TestHeads(t *testing.T) {
	ts := startServer(t, "", nil)
	for _, id := range []string{"lg/t/a", "lg/t2/a", "lg/u/a"} {
		ts.openRun(url.PathEscape(id))
	}
	p, _ := ts.begin(url.PathEscape("lg/t/a"), nil)
	ts.commit(p, map[string]any{"op": "set", "key": "cp", "value": "1"},
		map[string]any{"op": "set", "key": "a/m/0", "value": "x"},
		map[string]any{"op": "set", "key": "i/1", "value": "e1"})
	p, _ = ts.begin(url.PathEscape("lg/t/a"), nil)
	ts.commit(p, map[string]any{"op": "set", "key": "cp", "value": "2"},
		map[string]any{"op": "set", "key": "a/m/1", "value": "y"},
		map[string]any{"op": "set", "key": "bin", "value_base64": "/w=="})
	ts.must(201, "POST", "/v1/runs/lg%2Ft%2Fa/fork", map[string]any{"at": 1, "id": "lg/t/b"})
	p, _ = ts.begin(url.PathEscape("lg/t2/a"), nil)
	ts.commit(p, map[string]any{"op": "set", "key": "cp", "value": "other"})
	ts.openRun(url.PathEscape("lg/t/c"))
	ts.must(200, "POST", "/v1/runs/lg%2Ft%2Fc/end", map[string]any{"status": "cancelled"})

	b := ts.heads("run_prefix=lg/t/&key=cp&key=bin&prefix=a/")
	if len(b.Runs) != 2 || b.Truncated {
		t.Fatalf("heads of lg/t/: %+v, want lg/t/a and lg/t/b", b)
	}
	a, f := b.Runs[0], b.Runs[1]
	if a.Run != "lg/t/a" || a.Seq != 2 || a.Parent != "" || !reflect.DeepEqual(a.Memory, map[string]string{"cp": "2", "a/m/0": "x", "a/m/1": "y"}) ||
		!reflect.DeepEqual(a.Mem64, map[string]string{"bin": "/w=="}) {
		t.Fatalf("head of lg/t/a: %+v", a)
	}
	if f.Run != "lg/t/b" || f.Seq != 1 || f.Parent != "lg/t/a" || f.ForkedAt != 1 || !reflect.DeepEqual(f.Memory, map[string]string{"cp": "1", "a/m/0": "x"}) {
		t.Fatalf("head of the fork lg/t/b: %+v", f)
	}
	if b := ts.heads("run_prefix=lg/t2/"); len(b.Runs) != 1 || b.Runs[0].Seq != 1 || len(b.Runs[0].Memory) != 0 {
		t.Fatalf("heads of lg/t2/ without keys: %+v", b)
	}
	if b := ts.heads("run_prefix=nothing/"); len(b.Runs) != 0 {
		t.Fatalf("heads of an unused prefix: %+v", b)
	}
	wantError(t, ts.do("GET", "/v1/heads", nil), 400, "bad_request", "run_prefix")
	wantError(t, ts.do("GET", "/v1/heads?run_prefix=", nil), 400, "bad_request", "run_prefix")
	wantError(t, ts.do("GET", "/v1/heads?run_prefix=a&run_prefix=b", nil), 400, "bad_request", "run_prefix")
	wantError(t, ts.do("GET", "/v1/heads?run_prefix=a&seq=1", nil), 400, "bad_request", "seq")
}

// TestHeadsScoped: a scoped token's heads are its runs only, and a token
// without read is refused.
func TestHeadsScoped(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	agent := makeToken(t, file, "agent7", "read,write", "agent-7-")
	writer := makeToken(t, file, "writer", "write", "*")
	b, err := readSecretFile("--tokens", file)
	if err != nil {
		t.Fatal(err)
	}
	set, err := parseTokens(b, file)
	if err != nil {
		t.Fatal(err)
	}
	const admin = "admin-token-0123456789abcdef"
	ts := startServer(t, "", func(c *serverConfig) { c.tokens, c.token = set, []byte(admin) })
	ts.token = admin
	ts.openRun("agent-7-a")
	ts.openRun("agent-8-a")
	ts.token = agent
	if b := ts.heads("run_prefix=agent-"); len(b.Runs) != 1 || b.Runs[0].Run != "agent-7-a" {
		t.Fatalf("a scoped token's heads: %+v", b)
	}
	ts.token = writer
	if r := ts.do("GET", "/v1/heads?run_prefix=agent-", nil); r.status != 403 {
		t.Fatalf("a token without read: %s", r)
	}
}
