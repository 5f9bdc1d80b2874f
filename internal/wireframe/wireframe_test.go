package wireframe

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
)

// TestHeads: heads round-trip, and malformed ones are refused with
// ErrHead.
func TestHeads(t *testing.T) {
	h := http.Header{"Authorization": {"Bearer t"}, "Content-Type": {"text/plain"}, "X-Multi": {"a", "b"},
		"Content-Length": {"9"}, "Connection": {"close"}, "X-Bad": {"a\r\nInjected: yes"}}
	head := AppendRequestHead(nil, "POST", "/v1/runs/r%2F1/attempts?x=1", h)
	m, target, got, err := ParseRequestHead(head)
	if err != nil || m != "POST" || target != "/v1/runs/r%2F1/attempts?x=1" {
		t.Fatalf("%q: %s %s %v", head, m, target, err)
	}
	if got.Get("Authorization") != "Bearer t" || len(got["X-Multi"]) != 2 || got.Get("Content-Length") != "" || got.Get("Connection") != "" ||
		got.Get("Injected") != "" || got.Get("X-Bad") != "a  Injected: yes" {
		t.Fatalf("header %v from %q", got, head)
	}
	status, ah, err := ParseAnswerHead(AppendAnswerHead(nil, 431, http.Header{"Retry-After": {"2"}}))
	if err != nil || status != 431 || ah.Get("Retry-After") != "2" {
		t.Fatalf("answer: %d %v %v", status, ah, err)
	}
	if _, h, _ := ParseAnswerHead([]byte("200\ncontent-type: application/json\n")); h.Get("Content-Type") != "application/json" {
		t.Fatalf("names are case-insensitive: %v", h)
	}
	for _, bad := range []string{"", "GET /\nX: y", "GET\n", " /\n", "GET x\n", "GET /a b\n", "GET /\nNo colon\n", "GET /\n: v\n",
		"GET /\nX: \x00\n", "G(T /\n", "GET /\xff\n", "GET /\nX Y: z\n"} {
		if _, _, _, err := ParseRequestHead([]byte(bad)); err == nil {
			t.Errorf("request head %q parsed", bad)
		}
	}
	for _, bad := range []string{"", "200", "20\n", "2000\n", "abc\n", "099\n", "200\nX\n"} {
		if _, _, err := ParseAnswerHead([]byte(bad)); err == nil {
			t.Errorf("answer head %q parsed", bad)
		}
	}
}

// FuzzHeads: no head panics the parsers, and a parsed head encoded again
// parses to the same.
func FuzzHeads(f *testing.F) {
	f.Add([]byte("GET /v1/health\nAuthorization: Bearer x\n"))
	f.Add([]byte("200\nContent-Type: application/json\n"))
	f.Add([]byte("POST /v1/runs/a%20b?wait_ms=1 \n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, target, h, err := ParseRequestHead(b); err == nil {
			m2, t2, h2, err := ParseRequestHead(AppendRequestHead(nil, m, target, h))
			if err != nil || m2 != m || t2 != target || len(h2) != len(h) {
				t.Fatalf("%q: again %q %q %v %v", b, m2, t2, h2, err)
			}
		}
		if s, h, err := ParseAnswerHead(b); err == nil {
			s2, h2, err := ParseAnswerHead(AppendAnswerHead(nil, s, h))
			if err != nil || s2 != s || len(h2) != len(h) {
				t.Fatalf("%q: again %d %v %v", b, s2, h2, err)
			}
		}
	})
}

// TestWriterBursts: frames queued from many goroutines at once arrive
// whole, each once, and written counts every one of them.
func TestWriterBursts(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	var mu sync.Mutex
	written := 0
	w := NewWriter(a, 0, func(k int) {
		mu.Lock()
		written += k
		mu.Unlock()
	})
	const n = 200
	got := make(chan map[uint32]string, 1)
	go func() {
		br := bufio.NewReader(b)
		seen := map[uint32]string{}
		for len(seen) < n {
			var fixed [FixedLen]byte
			if _, err := io.ReadFull(br, fixed[:]); err != nil {
				break
			}
			l, id, hlen := Fixed(fixed[:])
			buf := make([]byte, l-8)
			io.ReadFull(br, buf)
			seen[id] = string(buf[hlen:])
		}
		got <- seen
	}()
	var wg sync.WaitGroup
	for i := range uint32(n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Frame(i, []byte("200\n"), bytes.Repeat([]byte{byte(i)}, int(i))); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	seen := <-got
	for i := range uint32(n) {
		if seen[i] != string(bytes.Repeat([]byte{byte(i)}, int(i))) {
			t.Fatalf("frame %d: %q", i, seen[i])
		}
	}
	mu.Lock()
	if written != n {
		t.Fatalf("written counted %d frames, want %d", written, n)
	}
	mu.Unlock()
	// After a failed write every frame fails, and is counted all the same.
	b.Close()
	if err := w.Frame(1, []byte("200\n"), nil); err == nil {
		t.Fatal("a frame to a closed pipe succeeded")
	}
	err := w.Frame(2, []byte("200\n"), nil)
	mu.Lock()
	defer mu.Unlock()
	if err == nil || written != n+2 {
		t.Fatalf("after a failed write: %v, written %d", err, written)
	}
}

// TestTransportNoFrames: a server that closes before the preface fails
// the request with ErrNoFrames; one that answers an id not in flight
// breaks the connection.
func TestTransportNoFrames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(c net.Conn)
	}{
		{"closes", func(c net.Conn) { c.Close() }},
		{"speaks HTTP", func(c net.Conn) { io.WriteString(c, "HTTP/1.1 400 Bad Request\r\n\r\n"); c.Close() }},
		{"answers another id", func(c net.Conn) {
			io.ReadFull(c, make([]byte, len(Preface)))
			c.Write(append([]byte(Preface), AppendFrame(nil, 77, []byte("200\n"), nil)...))
			io.Copy(io.Discard, c)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					go tc.serve(c)
				}
			}()
			tr := &Transport{Dial: func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", l.Addr().String())
			}}
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequest("GET", "http://x/v1/health", nil)
			_, err = tr.RoundTrip(req)
			if err == nil {
				t.Fatal("answered")
			}
			if tc.name != "answers another id" && !errors.Is(err, ErrNoFrames) {
				t.Fatalf("got %v, want ErrNoFrames", err)
			}
		})
	}
}
