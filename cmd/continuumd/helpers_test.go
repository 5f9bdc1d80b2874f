package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/wireframe"
)

// testServer is the server in this process, over a real Unix socket, on a
// store in a temporary directory.
type testServer struct {
	t     *testing.T
	dir   string // the store
	sock  string
	cfg   serverConfig
	srv   *server
	hs    *http.Server
	cl    *http.Client
	token string // sent as the bearer token when set
	// maxConns caps the server's connections (--max-conns) when set
	// before start.
	maxConns int
	// h2c serves HTTP/2 without TLS too (--h2c), and the client speaks it.
	h2c bool
	// frames has the client speak continuum-frames/1 (wireframe.Transport)
	// instead of HTTP.
	frames bool
	closed bool
}

func testConfig(dir string) serverConfig {
	return serverConfig{
		dir: dir, maxBody: 1 << 20, bodyTimeout: 30 * time.Second, lease: 30 * time.Second, minLease: 100 * time.Millisecond, maxLease: time.Hour,
		callWait: 5 * time.Second, retain: time.Minute, reapEvery: 10 * time.Millisecond,
	}
}

// shortTempDir is a temporary directory with a path short enough for a
// Unix socket (t.TempDir's can pass 108 bytes).
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "cd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func startServer(t *testing.T, dir string, edit func(*serverConfig)) *testServer {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(shortTempDir(t), "store")
	}
	cfg := testConfig(dir)
	if edit != nil {
		edit(&cfg)
	}
	ts := &testServer{t: t, dir: dir, sock: dir + ".sock", cfg: cfg}
	ts.start()
	t.Cleanup(func() { ts.stop() })
	return ts
}

func (ts *testServer) start() {
	t := ts.t
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	db, err := engine.Open(ts.dir, &engine.Options{Logger: log, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := listenUnix(ts.sock)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	ts.srv = newServer(db, ts.cfg, log)
	ts.hs = ts.srv.httpServer(log)
	if ts.h2c {
		serveH2C(ts.hs)
	}
	maxConns := ts.maxConns
	if maxConns == 0 {
		maxConns = 1024
	}
	l = ts.srv.listen(ts.hs, l, maxConns)
	reapCtx, stop := context.WithCancel(context.Background())
	go ts.srv.reap(reapCtx)
	go func() {
		ts.hs.Serve(l)
		stop()
	}()
	ts.cl = newSocketClient(ts.sock, ts.h2c)
	if ts.frames {
		ts.cl = newFramesClient(ts.sock)
	}
	ts.closed = false
}

// newSocketClient is a client of the Unix socket sock, speaking HTTP/2
// without TLS with h2c, HTTP/1.1 without.
func newSocketClient(sock string, h2c bool) *http.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	if h2c {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Client{Transport: tr, Timeout: hangGuard}
}

// newFramesClient is a client of the Unix socket sock over
// continuum-frames/1, one connection shared by its requests.
func newFramesClient(sock string) *http.Client {
	return &http.Client{Transport: &wireframe.Transport{Dial: func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}, Timeout: hangGuard}
}

// stop shuts the server down as SIGTERM does (graceful: drain, abandon
// the open attempts without failing their atoms, close the store).
func (ts *testServer) stop() {
	if ts.closed {
		return
	}
	ts.closed = true
	sigs := make(chan os.Signal)
	if err := shutdown(ts.srv, ts.hs, 5*time.Second, sigs, slog.New(slog.DiscardHandler)); err != nil {
		ts.t.Errorf("shutdown: %v", err)
	}
	ts.cl.CloseIdleConnections()
}

func (ts *testServer) restart() {
	ts.stop()
	ts.start()
}

// reply is an answer: its status and its JSON body.
type reply struct {
	status int
	proto  string // HTTP/1.1 or HTTP/2.0
	header http.Header
	body   map[string]any
	raw    []byte
}

func (r reply) Allow() string { return r.header.Get("Allow") }

func (r reply) str(key string) string {
	v, _ := r.body[key].(string)
	return v
}

func (r reply) num(key string) float64 {
	v, _ := r.body[key].(float64)
	return v
}

func (r reply) code() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r reply) field() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["field"].(string)
	return c
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.raw)) }

// do sends a request; body is marshalled unless it is a string or []byte,
// sent as it is. A transport error fails the test.
func (ts *testServer) do(method, path string, body any) reply {
	ts.t.Helper()
	r, err := ts.send(method, path, body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return r
}

// send is do that returns a transport error or an answer that breaks the
// protocol (not JSON, an error without a code) instead of failing.
func (ts *testServer) send(method, path string, body any) (reply, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return reply{}, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, "http://continuumd"+path, rd)
	if err != nil {
		return reply{}, err
	}
	if ts.token != "" {
		req.Header.Set("Authorization", "Bearer "+ts.token)
	}
	resp, err := ts.cl.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	r := reply{status: resp.StatusCode, proto: resp.Proto, header: resp.Header, raw: raw}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		return r, fmt.Errorf("%s %s: answer is not a JSON object (%v): %q", method, path, err, raw)
	}
	if r.status >= 400 && r.code() == "" {
		return r, fmt.Errorf("%s %s: error answer without a code: %s", method, path, r)
	}
	return r, nil
}

// must is do that fails the test unless the status is want.
func (ts *testServer) must(want int, method, path string, body any) reply {
	ts.t.Helper()
	r := ts.do(method, path, body)
	if r.status != want {
		ts.t.Fatalf("%s %s: got %s, want status %d", method, path, r, want)
	}
	return r
}

func (ts *testServer) openRun(id string) {
	ts.t.Helper()
	ts.must(200, "PUT", "/v1/runs/"+id, nil)
}

// begin begins an attempt and returns its path prefix and answer.
func (ts *testServer) begin(run string, req map[string]any) (string, reply) {
	ts.t.Helper()
	if req == nil {
		req = map[string]any{}
	}
	r := ts.must(201, "POST", "/v1/runs/"+run+"/attempts", req)
	return "/v1/runs/" + run + "/attempts/" + r.str("attempt"), r
}

// act makes call n of the attempt at p and reports result when the server
// says to execute; it returns the final answer.
func (ts *testServer) act(p string, n int, call map[string]any, result string) reply {
	ts.t.Helper()
	r := ts.must(200, "POST", fmt.Sprintf("%s/calls/%d", p, n), call)
	if r.str("status") != "execute" {
		return r
	}
	return ts.must(200, "POST", fmt.Sprintf("%s/calls/%d/outcome", p, n), map[string]any{"result": result})
}

func (ts *testServer) commit(p string, ops ...map[string]any) reply {
	ts.t.Helper()
	if ops == nil {
		ops = []map[string]any{}
	}
	return ts.must(200, "POST", p+"/commit", map[string]any{"delta": ops})
}

func wantStatus(t *testing.T, r reply, status string) {
	t.Helper()
	if r.str("status") != status {
		t.Fatalf("got %s, want status %q", r, status)
	}
}

func wantError(t *testing.T, r reply, status int, code, field string) {
	t.Helper()
	if r.status != status || r.code() != code || (field != "-" && r.field() != field) {
		t.Fatalf("got %s, want %d %s field %q", r, status, code, field)
	}
}

// waitFor polls cond until it holds or d passes.
// hangGuard bounds a wait for a state that must come (and a test request):
// far past what it needs on a loaded machine, since only a hang must fail.
const hangGuard = 2 * time.Minute

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
