package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
)

// streamReader reads a stream over the wire and keeps what it read: a
// reader that resumes from its next offset after any crash.
type streamReader struct {
	ts   *testServer
	path string
	next uint64
	got  []map[string]any
}

func (r *streamReader) read(waitMS int) reply {
	r.ts.t.Helper()
	a := r.ts.must(200, "GET", fmt.Sprintf("%s?from=%d&wait_ms=%d", r.path, r.next, waitMS), nil)
	cs, _ := a.body["chunks"].([]any)
	for _, c := range cs {
		m := c.(map[string]any)
		if uint64(m["offset"].(float64)) != r.next {
			r.ts.t.Fatalf("resumed at offset %d, got %v", r.next, m)
		}
		r.got = append(r.got, m)
		r.next++
	}
	if next := uint64(a.body["next"].(float64)); next != r.next {
		r.ts.t.Fatalf("next %d, the reader is at %d", next, r.next)
	}
	return a
}

// TestStreams: chunks appended in an attempt are read before its commit,
// a long poll follows the tail, a SIGKILL of the server at seeded points
// loses no chunk a reader saw and repeats none to a reader that resumes
// from its next offset, and the statuses say which attempt committed.
func TestStreams(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	p := startProc(t, "--store", store, "--socket", sock)
	cl := unixClient(t, sock)
	rd := &streamReader{ts: cl, path: "/v1/runs/r/streams/tok"}
	cl.openRun("r")

	s, _ := cl.begin("r", nil)
	// A long poll at the tail, answered by the append.
	polled := make(chan reply, 1)
	go func() {
		r, err := cl.send("GET", "/v1/runs/r/streams/tok?from=0&wait_ms=10000", nil)
		if err != nil {
			t.Error(err)
		}
		polled <- r
	}()
	time.Sleep(20 * time.Millisecond) // not a deadline: the poll is answered either way
	a := cl.must(200, "POST", s+"/streams/tok", map[string]any{"data": "t0"})
	if a.body["offset"] != float64(0) || a.body["next"] != float64(1) {
		t.Fatalf("append: %s", a)
	}
	if r := <-polled; r.status != 200 || len(r.body["chunks"].([]any)) != 1 {
		t.Fatalf("long poll: %s", r)
	}
	cl.must(200, "POST", s+"/streams/tok", map[string]any{"chunks": []any{map[string]any{"data": "t1"}, map[string]any{"data_base64": "/w=="}}, "flush": true})
	rd.read(0)
	if len(rd.got) != 3 || rd.got[2]["data_base64"] != "/w==" || rd.got[0]["status"] != "open" || rd.got[0]["attempt"] != float64(1) {
		t.Fatalf("read before the commit: %v", rd.got)
	}
	// Appends, reads and a SIGKILL at a seeded point, then a takeover.
	killed := false
	for i := 0; i < 30; i++ {
		cl.must(200, "POST", s+"/streams/tok", map[string]any{"data": fmt.Sprint("a", i)})
		if rng.IntN(3) == 0 {
			rd.read(0)
		}
		if !killed && rng.IntN(10) == 0 {
			t.Logf("SIGKILL after append %d", i)
			p.kill()
			cl.cl.CloseIdleConnections()
			p.start()
			killed = true
			break
		}
	}
	if killed {
		s, _ = cl.begin("r", map[string]any{"takeover": true})
	}
	cl.must(200, "POST", s+"/streams/tok", map[string]any{"data": "last", "flush": true})
	cl.commit(s, map[string]any{"op": "set", "key": "k", "value": "v"})
	for {
		before := rd.next
		rd.read(0)
		if rd.next == before {
			break
		}
	}
	if rd.got[len(rd.got)-1]["data"] != "last" {
		t.Fatalf("the last chunk read is %v", rd.got[len(rd.got)-1])
	}
	// Read again from 0: every chunk once, the statuses settled.
	all := &streamReader{ts: cl, path: rd.path}
	for {
		before := all.next
		all.read(0)
		if all.next == before {
			break
		}
	}
	if len(all.got) != len(rd.got) {
		t.Fatalf("read %d chunks from 0, the follower read %d", len(all.got), len(rd.got))
	}
	lastAttempt := all.got[len(all.got)-1]["attempt"]
	for i, c := range all.got {
		want := "committed"
		if c["attempt"] != lastAttempt {
			want = "abandoned"
		}
		if c["status"] != want || c["seq"] != float64(1) {
			t.Fatalf("chunk %d: %v, want status %s (killed %v)", i, c, want, killed)
		}
		if rd.got[i]["data"] != c["data"] && rd.got[i]["data_base64"] != c["data_base64"] {
			t.Fatalf("chunk %d read as %v, then as %v", i, rd.got[i], c)
		}
	}
	if killed != (lastAttempt == float64(2)) {
		t.Fatalf("last attempt %v, killed %v", lastAttempt, killed)
	}
	// The run ends: a follower at the tail learns it.
	cl.must(200, "POST", "/v1/runs/r/end", map[string]any{"status": "completed"})
	if e := rd.read(5000); e.body["ended"] != true {
		t.Fatalf("after the end: %s", e)
	}
	ls := cl.must(200, "GET", "/v1/runs/r/streams", nil)
	if st, _ := ls.body["streams"].([]any); len(st) != 1 || st[0].(map[string]any)["chunks"] != float64(len(all.got)) {
		t.Fatalf("streams: %s", ls)
	}
	// Refusals.
	for _, c := range []struct {
		method, path string
		body         any
		status       int
		field        string
	}{
		{"GET", "/v1/runs/r/streams/a%2Fb", nil, 400, "stream"},
		{"GET", "/v1/runs/r/streams/tok?from=x", nil, 400, "from"},
		{"GET", "/v1/runs/r/streams/tok?wait_ms=99999999", nil, 400, "wait_ms"},
		{"GET", "/v1/runs/r/streams/tok?bogus=1", nil, 400, "bogus"},
	} {
		r := cl.do(c.method, c.path, c.body)
		if r.status != c.status || r.field() != c.field {
			t.Errorf("%s %s: %s, want %d field %q", c.method, c.path, r, c.status, c.field)
		}
	}
	cl.openRun("q")
	q, _ := cl.begin("q", nil)
	for _, c := range []struct {
		body   any
		status int
		field  string
	}{
		{map[string]any{}, 400, "data"},
		{map[string]any{"data": "x", "chunks": []any{map[string]any{"data": "y"}}}, 400, "chunks"},
		{map[string]any{"data": "x", "data_base64": "eA=="}, 400, "data"},
		{map[string]any{"data_base64": string(make([]byte, 0)) + "!!"}, 400, "data_base64"},
	} {
		r := cl.do("POST", q+"/streams/tok", c.body)
		if r.status != c.status || r.field() != c.field {
			t.Errorf("append %v: %s, want %d field %q", c.body, r, c.status, c.field)
		}
	}
}

// TestStreamAppendIndex: an append with its index (the client's count of
// the attempt's chunks to the stream) repeated after a lost answer
// appends nothing twice, answers the same offsets, appends only the
// chunks past the count, and refuses a gap (out_of_order) and another
// chunk at an index appended already (append_mismatch), before appending
// any; a chunk over the limit refuses the whole request.
func TestStreamAppendIndex(t *testing.T) {
	ts := startServer(t, "", func(c *serverConfig) { c.maxBody = 4 << 20 })
	ts.openRun("r")
	s, _ := ts.begin("r", nil)
	chunk := func(d string) map[string]any { return map[string]any{"data": d} }
	two := map[string]any{"index": 0, "chunks": []any{chunk("a"), chunk("b")}}
	first := ts.must(200, "POST", s+"/streams/tok", two)
	again := ts.must(200, "POST", s+"/streams/tok", two) // its answer was lost
	if first.body["offset"] != float64(0) || first.body["next"] != float64(2) ||
		again.body["offset"] != first.body["offset"] || again.body["next"] != first.body["next"] {
		t.Fatalf("append %s, repeated %s", first, again)
	}
	// Overlapping the count: b is the one appended, c is new.
	if a := ts.must(200, "POST", s+"/streams/tok", map[string]any{"index": 1, "chunks": []any{chunk("b"), chunk("c")}}); a.body["offset"] != float64(1) || a.body["next"] != float64(3) {
		t.Fatalf("overlapping append: %s", a)
	}
	wantError(t, ts.do("POST", s+"/streams/tok", map[string]any{"index": 5, "data": "d"}), 409, codeOutOfOrder, "index")
	wantError(t, ts.do("POST", s+"/streams/tok", map[string]any{"index": 2, "chunks": []any{chunk("x"), chunk("d")}}), 409, codeAppendMismatch, "chunks")
	wantError(t, ts.do("POST", s+"/streams/tok", map[string]any{"index": 3, "chunks": []any{chunk("d"), chunk(strings.Repeat("z", engine.MaxChunkSize+1))}}), 413, codeTooLarge, "data")
	// Without an index every request appends; the count goes on.
	ts.must(200, "POST", s+"/streams/tok", map[string]any{"data": "d"})
	if a := ts.must(200, "POST", s+"/streams/tok", map[string]any{"index": 4, "data": "e", "flush": true}); a.body["offset"] != float64(4) {
		t.Fatalf("append after an unindexed one: %s", a)
	}
	// Another stream counts on its own.
	if a := ts.must(200, "POST", s+"/streams/other", map[string]any{"index": 0, "data": "o"}); a.body["offset"] != float64(0) {
		t.Fatalf("another stream: %s", a)
	}
	rd := &streamReader{ts: ts, path: "/v1/runs/r/streams/tok"}
	rd.read(0)
	var got []string
	for _, c := range rd.got {
		got = append(got, c["data"].(string))
	}
	if strings.Join(got, "") != "abcde" {
		t.Fatalf("the stream holds %q, want each chunk once: abcde", got)
	}
}
