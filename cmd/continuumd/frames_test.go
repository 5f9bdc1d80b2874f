package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuumdb/continuum/internal/wireframe"
)

// startFramesServer is startServer with a client that speaks
// continuum-frames/1.
func startFramesServer(t *testing.T, edit func(*serverConfig)) *testServer {
	t.Helper()
	ts := startServer(t, "", edit)
	ts.useFrames()
	return ts
}

// useFrames has ts's client speak continuum-frames/1 from here on.
func (ts *testServer) useFrames() {
	ts.cl.CloseIdleConnections()
	ts.frames = true
	ts.cl = newFramesClient(ts.sock)
}

func transportName(frames bool) string {
	if frames {
		return "frames"
	}
	return "http"
}

func TestFramesAtom(t *testing.T) {
	ts := startFramesServer(t, nil)
	ts.openRun("r1")
	p, _ := ts.begin("r1", nil)
	ts.act(p, 0, map[string]any{"tool": "t", "args": map[string]any{"a": 1}}, "ok")
	r := ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "v"})
	if r.proto != "continuum-frames/1" {
		t.Fatalf("answer over %q", r.proto)
	}
	r = ts.do("GET", "/v1/runs/nope", nil)
	wantError(t, r, 404, codeRunNotFound, "run")
}

// rawFrames is a client of continuum-frames/1 that writes and reads
// frames by hand, to test the server's framing.
type rawFrames struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

// dialFrames opens a frames connection to sock and exchanges prefaces.
func dialFrames(t *testing.T, sock string) *rawFrames {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f := &rawFrames{t: t, c: c, br: bufio.NewReader(c)}
	f.write([]byte(wireframe.Preface))
	var p [len(wireframe.Preface)]byte
	c.SetReadDeadline(time.Now().Add(hangGuard))
	if _, err := io.ReadFull(f.br, p[:]); err != nil || string(p[:]) != wireframe.Preface {
		t.Fatalf("the server's preface: %q %v", p, err)
	}
	return f
}

func (f *rawFrames) write(b []byte) {
	f.t.Helper()
	if _, err := f.c.Write(b); err != nil {
		f.t.Fatal(err)
	}
}

// request writes a request frame; body is JSON-encoded unless nil or a
// string.
func (f *rawFrames) request(id uint32, method, target string, h http.Header, body any) {
	f.t.Helper()
	var b []byte
	switch x := body.(type) {
	case nil:
	case string:
		b = []byte(x)
	default:
		j, err := json.Marshal(x)
		if err != nil {
			f.t.Fatal(err)
		}
		b = j
	}
	f.write(wireframe.AppendFrame(nil, id, wireframe.AppendRequestHead(nil, method, target, h), b))
}

// frameAnswer is an answer read by rawFrames.
type frameAnswer struct {
	id     uint32
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func (a frameAnswer) code() string { return reply{body: a.body}.code() }

func (a frameAnswer) String() string {
	return fmt.Sprintf("id %d: %d %s", a.id, a.status, bytes.TrimSpace(a.raw))
}

// read reads an answer frame; err is the connection's end (io.EOF when
// the server closed it).
func (f *rawFrames) read() (frameAnswer, error) {
	f.c.SetReadDeadline(time.Now().Add(hangGuard))
	var fixed [wireframe.FixedLen]byte
	if _, err := io.ReadFull(f.br, fixed[:]); err != nil {
		return frameAnswer{}, err
	}
	n, id, hlen := wireframe.Fixed(fixed[:])
	if n < 8 || hlen > n-8 {
		f.t.Fatalf("an answer frame of %d bytes with a head of %d", n, hlen)
	}
	b := make([]byte, n-8)
	if _, err := io.ReadFull(f.br, b); err != nil {
		return frameAnswer{}, err
	}
	status, h, err := wireframe.ParseAnswerHead(b[:hlen])
	if err != nil {
		f.t.Fatalf("answer %d: %v", id, err)
	}
	a := frameAnswer{id: id, status: status, header: h, raw: b[hlen:]}
	if err := json.Unmarshal(a.raw, &a.body); err != nil {
		f.t.Fatalf("answer %d is not a JSON object: %q", id, a.raw)
	}
	if status >= 400 && a.code() == "" {
		f.t.Fatalf("an error without a code: %s", a)
	}
	return a, nil
}

func (f *rawFrames) mustRead() frameAnswer {
	f.t.Helper()
	a, err := f.read()
	if err != nil {
		f.t.Fatalf("reading an answer: %v", err)
	}
	return a
}

// closed reads until the server closes the connection, failing on any
// answer.
func (f *rawFrames) closed() {
	f.t.Helper()
	a, err := f.read()
	if err == nil {
		f.t.Fatalf("answered %s, want the connection closed", a)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		f.t.Fatalf("want the connection closed, got %v", err)
	}
}

// TestFramesPipelining: requests sent without waiting are answered under
// their ids, out of order: a long poll holds its id while the requests
// after it are answered, and is answered when what it waits for comes
// (sent on the same connection).
func TestFramesPipelining(t *testing.T) {
	ts := startFramesServer(t, nil)
	ts.openRun("w")
	ts.must(200, "POST", "/v1/runs/w/wait", map[string]any{"name": "go", "timeout_ms": 3600_000})
	f := dialFrames(t, ts.sock)
	f.request(1, "GET", "/v1/ready?wait_ms=100000", nil, nil)
	f.request(2, "GET", "/v1/runs/w/wait?wait_ms=100000", nil, nil)
	const n = 40
	for i := uint32(3); i < n; i++ {
		f.request(i, "PUT", fmt.Sprintf("/v1/runs/r%d", i), nil, nil)
	}
	seen := map[uint32]bool{}
	for range n - 3 {
		a := f.mustRead()
		if a.id < 3 || a.id >= n || seen[a.id] || a.status != 200 || a.body["id"] != fmt.Sprintf("r%d", a.id) {
			t.Fatalf("answer %s: want one of the PUTs, each once", a)
		}
		seen[a.id] = true
	}
	f.request(n, "POST", "/v1/runs/w/events", nil, map[string]any{"name": "go", "sender": "s", "payload": "now"})
	got := map[uint32]frameAnswer{}
	for range 3 {
		a := f.mustRead()
		got[a.id] = a
	}
	if got[n].status != 200 || got[1].status != 200 || got[2].status != 200 {
		t.Fatalf("the event and the long polls it ends: %v", got)
	}
	if ready, _ := got[1].body["ready"].([]any); len(ready) != 1 {
		t.Fatalf("the ready long poll: %s", got[1])
	}
	// An id may be used again once answered.
	f.request(1, "GET", "/v1/health", nil, nil)
	if a := f.mustRead(); a.id != 1 || a.status != 200 {
		t.Fatalf("id 1 again: %s", a)
	}
}

// TestFramesLimits: the head, body and frame limits, the body timeout,
// 128 requests in flight per connection, and the connection cap.
func TestFramesLimits(t *testing.T) {
	ts := startFramesServer(t, func(c *serverConfig) { c.bodyTimeout = 300 * time.Millisecond })
	maxBody := ts.cfg.maxBody
	ts.openRun("r")

	t.Run("head", func(t *testing.T) {
		f := dialFrames(t, ts.sock)
		f.request(7, "GET", "/v1/health", http.Header{"X-Big": {strings.Repeat("x", wireframe.MaxHead)}}, nil)
		wantFrameError(t, f.mustRead(), 7, 431, codeHeaderTooLarge)
		f.request(8, "GET", "/v1/health", nil, nil) // the connection goes on
		if a := f.mustRead(); a.id != 8 || a.status != 200 {
			t.Fatalf("after a 431: %s", a)
		}
	})
	t.Run("body", func(t *testing.T) {
		f := dialFrames(t, ts.sock)
		f.request(1, "POST", "/v1/runs/r/attempts", nil, `{"request_id":"`+strings.Repeat("x", int(maxBody))+`"}`)
		wantFrameError(t, f.mustRead(), 1, 413, codeTooLarge)
		f.request(2, "GET", "/v1/health", nil, nil)
		if a := f.mustRead(); a.id != 2 || a.status != 200 {
			t.Fatalf("after a 413: %s", a)
		}
	})
	t.Run("frame", func(t *testing.T) {
		f := dialFrames(t, ts.sock)
		var b []byte
		b = binary.BigEndian.AppendUint32(b, uint32(wireframe.MaxHead+maxBody+9))
		b = binary.BigEndian.AppendUint32(b, 1)
		b = binary.BigEndian.AppendUint32(b, 10)
		f.write(b)
		f.closed()
	})
	t.Run("hlen", func(t *testing.T) {
		f := dialFrames(t, ts.sock)
		f.write([]byte{0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 3, 'G', 'E'})
		f.closed()
	})
	t.Run("short", func(t *testing.T) {
		f := dialFrames(t, ts.sock)
		f.write([]byte{0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 0})
		f.closed()
	})
	t.Run("head without a request line", func(t *testing.T) {
		f := dialFrames(t, ts.sock)
		for i, head := range []string{"GET\n", "GET /v1/health", "/v1/health GET\n", "GET /v1/health\nX-A\n", "GET /v1/h ealth\n", "GET /v1/health\nX: \x01\n", "\n", "G\xffT /v1/health\n"} {
			f.write(wireframe.AppendFrame(nil, uint32(i+1), []byte(head), nil))
			wantFrameError(t, f.mustRead(), uint32(i+1), 400, codeBadRequest)
		}
		f.write(wireframe.AppendFrame(nil, 99, nil, nil))
		wantFrameError(t, f.mustRead(), 99, 400, codeBadRequest)
	})
	t.Run("duplicate id", func(t *testing.T) {
		f := dialFrames(t, ts.sock)
		f.request(5, "GET", "/v1/ready?wait_ms=100000", nil, nil)
		f.request(5, "GET", "/v1/health", nil, nil)
		f.closed()
	})
	t.Run("body timeout", func(t *testing.T) {
		f := dialFrames(t, ts.sock)
		f.request(1, "GET", "/v1/ready?wait_ms=200", nil, nil) // in flight: answered before the close
		frame := wireframe.AppendFrame(nil, 3, wireframe.AppendRequestHead(nil, "PUT", "/v1/runs/slow", nil), nil)
		f.write(frame[:len(frame)-4]) // the rest never comes
		got := map[uint32]frameAnswer{}
		for range 2 {
			a := f.mustRead()
			got[a.id] = a
		}
		wantFrameError(t, got[3], 3, 408, codeTimeout)
		if got[1].status != 200 {
			t.Fatalf("the long poll in flight: %s", got[1])
		}
		f.closed()
	})
	t.Run("in flight", func(t *testing.T) {
		f := dialFrames(t, ts.sock)
		for i := range uint32(wireframe.MaxInFlight) {
			f.request(i+1, "GET", "/v1/ready?wait_ms=100000", nil, nil)
		}
		f.request(1000, "GET", "/v1/health", nil, nil)
		fc := onlyFramesConn(t, ts, f)
		waitFor(t, hangGuard, "128 requests in flight", func() bool { return len(fc.slots) == wireframe.MaxInFlight })
		// The reader holds no slot for request 1000: it waits for one
		// and has not read it.
		fc.mu.Lock()
		_, read := fc.mu.ids[1000]
		fc.mu.Unlock()
		if read {
			t.Fatal("request 1000 was read with 128 in flight")
		}
		// Another connection is served meanwhile; its run becomes ready,
		// which answers the 128 long polls, then request 1000.
		ts.openRun("bp")
		ts.must(200, "POST", "/v1/runs/bp/sleep", map[string]any{"duration_ms": 1})
		seen := map[uint32]bool{}
		for len(seen) < wireframe.MaxInFlight+1 {
			a := f.mustRead()
			if seen[a.id] || a.status != 200 {
				t.Fatalf("answer %s (seen %d)", a, len(seen))
			}
			seen[a.id] = true
		}
	})
}

// onlyFramesConn is the server's side of f, found by its remote address
// (on a Unix socket every client has the same: the one connection of
// the server that has read f's first request).
func onlyFramesConn(t *testing.T, ts *testServer, f *rawFrames) *framesConn {
	t.Helper()
	var found *framesConn
	waitFor(t, hangGuard, "the server's side of the connection", func() bool {
		ts.srv.frames.mu.Lock()
		defer ts.srv.frames.mu.Unlock()
		for fc := range ts.srv.frames.mu.conns {
			fc.mu.Lock()
			_, ok := fc.mu.ids[1]
			fc.mu.Unlock()
			if ok {
				found = fc
				return true
			}
		}
		return false
	})
	return found
}

func wantFrameError(t *testing.T, a frameAnswer, id uint32, status int, code string) {
	t.Helper()
	if a.id != id || a.status != status || a.code() != code {
		t.Fatalf("got %s, want id %d: %d %s", a, id, status, code)
	}
}

// TestFramesMaxConns: a frames connection is one of --max-conns; the one
// past the cap gets the preface and 503 too_many_connections for its
// first request, and HTTP's does too; a closed connection frees its slot.
func TestFramesMaxConns(t *testing.T) {
	ts := &testServer{t: t, dir: filepath.Join(shortTempDir(t), "store"), maxConns: 2}
	ts.sock, ts.cfg = ts.dir+".sock", testConfig(ts.dir)
	ts.start()
	t.Cleanup(ts.stop)
	f1 := dialFrames(t, ts.sock)
	dialFrames(t, ts.sock)
	f3 := dialFrames(t, ts.sock)
	f3.request(9, "GET", "/v1/health", nil, nil)
	wantFrameError(t, f3.mustRead(), 9, 503, codeTooManyConns)
	f3.closed()
	if r, err := ts.send("GET", "/v1/health", nil); err == nil && r.status != 503 {
		t.Fatalf("HTTP past the cap: %s", r)
	}
	f1.c.Close()
	waitFor(t, hangGuard, "a slot freed by the closed connection", func() bool {
		c, err := net.Dial("unix", ts.sock)
		if err != nil {
			return false
		}
		defer c.Close()
		f := &rawFrames{t: t, c: c, br: bufio.NewReader(c)}
		f.write([]byte(wireframe.Preface))
		f.request(1, "GET", "/v1/health", nil, nil)
		var p [len(wireframe.Preface)]byte
		if _, err := io.ReadFull(f.br, p[:]); err != nil {
			return false
		}
		a, err := f.read()
		return err == nil && a.status == 200
	})
}

// TestFramesIdle: a connection with nothing in flight is closed after the
// idle time; one with a long poll in flight is not.
func TestFramesIdle(t *testing.T) {
	ts := startFramesServer(t, func(c *serverConfig) { c.framesIdle = 100 * time.Millisecond })
	f := dialFrames(t, ts.sock)
	busy := dialFrames(t, ts.sock)
	busy.request(1, "GET", "/v1/ready?wait_ms=600", nil, nil)
	f.closed()
	if a := busy.mustRead(); a.id != 1 || a.status != 200 {
		t.Fatalf("the long poll: %s", a)
	}
	busy.closed()
}

// TestFramesPreface: a connection that starts with 0x00 but another
// preface is closed without an answer; HTTP on the same socket is served.
func TestFramesPreface(t *testing.T) {
	ts := startServer(t, "", nil)
	c, err := net.Dial("unix", ts.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("\x00continuum-frames/9\n"))
	c.SetReadDeadline(time.Now().Add(hangGuard))
	if n, err := c.Read(make([]byte, 64)); err != io.EOF {
		t.Fatalf("read %d bytes, %v: want the connection closed", n, err)
	}
	ts.must(200, "GET", "/v1/health", nil)
}

// TestServerKilledMidFrame: the server SIGKILLed with requests pipelined
// on a frames connection, some answered, and a frame half written: after
// the restart every acknowledged atom is in the store, the half frame
// took no effect, and a new connection is served. Each atom is one
// request (a begin carrying its commit).
func TestServerKilledMidFrame(t *testing.T) {
	kills, runs := 6, 8
	if testing.Short() {
		kills = 3
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	p := startProc(t, "--store", store, "--socket", sock)
	setup := framesUnixClient(t, sock)
	for i := range runs {
		setup.openRun(fmt.Sprint("k", i))
	}
	setup.openRun("half")
	acked := map[string]int{}
	id := uint32(0)
	for k := range kills {
		f := dialFrames(t, sock)
		sent := map[uint32]string{}
		for i := range runs {
			id++
			run := fmt.Sprint("k", i)
			sent[id] = run
			f.request(id, "POST", "/v1/runs/"+run+"/attempts", nil, map[string]any{"takeover": true,
				"commit": map[string]any{"delta": []any{map[string]any{"op": "set", "key": "kill", "value": fmt.Sprint(k)}}}})
		}
		id++
		half := wireframe.AppendFrame(nil, id, wireframe.AppendRequestHead(nil, "POST", "/v1/runs/half/attempts", nil),
			[]byte(`{"takeover":true,"commit":{"delta":[{"op":"set","key":"torn","value":"yes"}]}}`))
		f.write(half[:rng.IntN(len(half)-1)+1])
		for range rng.IntN(runs + 1) {
			a := f.mustRead()
			run := sent[a.id]
			c, _ := a.body["commit"].(map[string]any)
			if a.status != 201 || c == nil {
				t.Fatalf("kill %d: answer %s", k, a)
			}
			acked[run] = int(c["seq"].(float64))
		}
		p.kill()
		p.start()
		for run, seq := range acked {
			info := setup.must(200, "GET", "/v1/runs/"+run, nil)
			if int(info.num("last_seq")) < seq {
				t.Fatalf("kill %d: run %s acknowledged seq %d, the store has %v", k, run, seq, info.num("last_seq"))
			}
		}
		st := setup.must(200, "GET", "/v1/runs/half/state", nil)
		if strings.Contains(string(st.raw), "torn") {
			t.Fatalf("kill %d: the half-written frame took effect: %s", k, st)
		}
	}
	if rep := setup.must(200, "POST", "/v1/verify", map[string]any{"deep": true}); rep.body["ok"] != true {
		t.Fatalf("verify after the kills: %s", rep)
	}
	t.Logf("%d kills, %d runs with acknowledged atoms", kills, len(acked))
}

// TestFramesShutdown: a graceful shutdown closes an idle frames
// connection, answers the long poll in flight on another (the server
// drains), then closes it; the store closes after.
func TestFramesShutdown(t *testing.T) {
	ts := startFramesServer(t, nil)
	idle := dialFrames(t, ts.sock)
	busy := dialFrames(t, ts.sock)
	busy.request(1, "GET", "/v1/ready?wait_ms=100000", nil, nil)
	onlyFramesConn(t, ts, busy)
	done := make(chan struct{})
	go func() {
		ts.stop()
		close(done)
	}()
	if a := busy.mustRead(); a.id != 1 || a.status != 200 {
		t.Fatalf("the long poll at shutdown: %s", a)
	}
	busy.closed()
	idle.closed()
	<-done
}
