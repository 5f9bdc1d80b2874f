package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/continuumdb/continuum/internal/wireframe"
)

// TestFramesBudget: a frames connection holds at most its budget of
// request bytes read and not yet served (not 128 bodies of --max-body):
// a frame that would pass it waits until a handler gives bytes back, one
// frame of the largest size is always taken when none are held, and a
// wait ends with the connection.
func TestFramesBudget(t *testing.T) {
	fs := &framesServer{maxBody: 1 << 20}
	fc := &framesConn{fs: fs, freed: make(chan struct{}, 1)}
	fc.ctx, fc.cancel = context.WithCancel(context.Background())
	defer fc.cancel()
	largest := int64(wireframe.MaxHead) + fs.maxBody + 8
	if !fc.take(largest) {
		t.Fatal("the largest frame refused with nothing held")
	}
	small := (fs.budget() - largest) / 4
	for i := range 4 {
		if !fc.take(small) {
			t.Fatalf("small frame %d refused within the budget", i)
		}
	}
	if fc.take(largest) || fc.take(small) {
		t.Fatalf("taken past the budget: %d bytes held, budget %d", fc.mu.held, fs.budget())
	}
	for range 4 {
		fc.free(small)
	}
	if fc.take(largest) {
		t.Fatal("a second largest frame taken beside one held")
	}
	fc.free(largest)
	if !fc.take(largest) {
		t.Fatal("refused once nothing was held")
	}
	// hold waits for bytes given back, and for the connection's end.
	if !fc.take(4 * small) {
		t.Fatal("the budget's rest refused")
	}
	granted := make(chan bool)
	go func() { granted <- fc.hold(small) }()
	fc.free(4 * small)
	if !<-granted {
		t.Fatal("hold refused after bytes were given back")
	}
	go func() { granted <- fc.hold(largest) }()
	fc.cancel()
	if <-granted {
		t.Fatal("hold granted on a connection that ended")
	}
}

// TestFramesLargeAnswers: answers past framesSmallAnswer take the
// connection's one large-answer token until their frame is written (at
// WriteHeader when they declare their length, else at the Write that
// passes it), so a client that sends many requests for large answers and
// reads none holds the server to one large answer (not 128 of up to 256
// MiB each); every answer still arrives whole once it reads, and the token
// is given back. An answer that declares more than a frame carries is
// 413 at once.
func TestFramesLargeAnswers(t *testing.T) {
	const n, size = 6, 1 << 20
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/over" {
			w.Header().Set("Content-Length", strconv.Itoa(framesMaxAnswer+1))
			w.WriteHeader(http.StatusOK)
			if _, err := w.Write([]byte("x")); err != nil {
				panic(http.ErrAbortHandler) // as the blob download does
			}
			t.Error("an answer past a frame's size was written to")
			return
		}
		c := r.URL.Path[1]
		if c%2 == 0 {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			w.WriteHeader(http.StatusOK)
		}
		b := bytes.Repeat([]byte{c}, size)
		for len(b) > 0 { // in pieces, as a handler streaming a blob writes
			k := min(len(b), 32<<10)
			if _, err := w.Write(b[:k]); err != nil {
				return
			}
			b = b[k:]
		}
	})
	server, client := net.Pipe() // synchronous: nothing is written until read
	defer client.Close()
	fs := &framesServer{h: h, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	fc := &framesConn{fs: fs, c: server, large: make(chan struct{}, 1)}
	fc.ctx, fc.cancel = context.WithCancel(context.Background())
	defer fc.cancel()
	fc.w = wireframe.NewWriter(server, 0, nil)
	var served sync.WaitGroup
	for i := range n + 1 {
		head := fmt.Sprintf("GET /%c\n", 'a'+i)
		if i == n {
			head = "GET /over\n"
		}
		served.Add(1)
		go func() {
			defer served.Done()
			fc.dispatch(uint32(i), []byte(head), nil)
		}()
	}
	waitFor(t, hangGuard, "all but one large answer waiting for the token", func() bool {
		return fc.largeWaiting.Load() == n-1 && len(fc.large) == 1
	})
	// Read every answer: each whole, and the token free at the end.
	seen := map[uint32]bool{}
	br := bufio.NewReader(client)
	for range n + 1 {
		var fixed [wireframe.FixedLen]byte
		if _, err := io.ReadFull(br, fixed[:]); err != nil {
			t.Fatal(err)
		}
		m, id, hlen := wireframe.Fixed(fixed[:])
		rest := make([]byte, m-8)
		if _, err := io.ReadFull(br, rest); err != nil {
			t.Fatal(err)
		}
		body := rest[hlen:]
		status, _, err := wireframe.ParseAnswerHead(rest[:hlen])
		if err != nil || id > n || seen[id] {
			t.Fatalf("answer %d (seen %v): %v", id, seen, err)
		}
		seen[id] = true
		if id == n {
			if status != http.StatusRequestEntityTooLarge || !bytes.Contains(body, []byte(codeTooLarge)) {
				t.Fatalf("the answer past a frame's size: %d %s", status, body)
			}
			continue
		}
		if status != http.StatusOK || !bytes.Equal(body, bytes.Repeat([]byte{byte('a' + id)}, size)) {
			t.Fatalf("answer %d: %d, %d bytes, not the %d of its request", id, status, len(body), size)
		}
	}
	served.Wait()
	waitFor(t, hangGuard, "the token given back", func() bool { return len(fc.large) == 0 })
	if k := fc.largeWaiting.Load(); k != 0 {
		t.Fatalf("%d answers still waiting for the token", k)
	}
}
