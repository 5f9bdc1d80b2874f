package wireframe

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// ErrNoFrames is the error of a connection whose server closed it, or
// answered something else than the preface, before the preface: the
// server does not speak continuum-frames/1 (an older continuumd). A client
// may then fall back to HTTP.
var ErrNoFrames = errors.New("wireframe: the server does not speak continuum-frames/1")

// ErrClosed is the error of a request in flight on a connection that
// broke: it has no answer (as a broken HTTP connection's).
var ErrClosed = errors.New("wireframe: connection closed")

// MaxAnswer bounds the answer frames a Transport reads.
const MaxAnswer = 1 << 30

// Transport is an http.RoundTripper over continuum-frames/1: requests
// share Conns connections (1 by default), each request going to the
// next one in turn, pipelined (sent without waiting for the answers of
// the others). A connection that breaks fails its requests in flight
// with ErrClosed and is dialed again for the next request.
type Transport struct {
	// Dial opens a connection to the server (a Unix socket, TCP, TLS).
	Dial func(ctx context.Context) (net.Conn, error)
	// Conns is the number of connections (0: 1).
	Conns int

	mu    sync.Mutex
	conns []*clientConn
	next  int
}

// CloseIdleConnections closes the connections (requests in flight on
// them fail): http.Client calls it.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	conns := t.conns
	t.conns = nil
	t.mu.Unlock()
	for _, c := range conns {
		if c != nil {
			c.fail(ErrClosed)
		}
	}
}

func (t *Transport) conn(ctx context.Context) (*clientConn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := max(t.Conns, 1)
	if len(t.conns) != n {
		t.conns = make([]*clientConn, n)
	}
	i := t.next % n
	t.next++
	if c := t.conns[i]; c != nil && c.alive() {
		return c, nil
	}
	nc, err := t.Dial(ctx)
	if err != nil {
		return nil, err
	}
	c := &clientConn{c: nc, w: NewWriter(nc, 0, nil)}
	c.mu.pending = map[uint32]chan answer{}
	if err := c.w.Raw([]byte(Preface)); err != nil {
		nc.Close()
		return nil, fmt.Errorf("%w: writing the preface: %v", ErrNoFrames, err)
	}
	go c.read()
	t.conns[i] = c
	return c, nil
}

type answer struct {
	resp *http.Response
	err  error
}

// clientConn is one connection of a Transport.
type clientConn struct {
	c net.Conn
	w *Writer
	// prefaced: the server's preface was read (a write that fails before
	// it leaves the verdict to the reader: ErrNoFrames from a server
	// that closed or answered something else).
	prefaced atomic.Bool

	mu struct {
		sync.Mutex
		next    uint32                 // the last id used
		pending map[uint32]chan answer // requests in flight; a nil channel: the request was given up, its id waits for the answer
		err     error                  // the connection broke
	}
}

func (c *clientConn) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.err == nil
}

// fail breaks c: every request in flight gets err.
func (c *clientConn) fail(err error) {
	c.mu.Lock()
	if c.mu.err == nil {
		c.mu.err = err
	}
	pending := c.mu.pending
	c.mu.pending = map[uint32]chan answer{}
	c.mu.Unlock()
	c.c.Close()
	for _, ch := range pending {
		if ch != nil {
			ch <- answer{err: err}
		}
	}
}

// read reads c's preface, then its answers, until c breaks.
func (c *clientConn) read() {
	br := bufio.NewReaderSize(c.c, 64<<10)
	var p [len(Preface)]byte
	if _, err := io.ReadFull(br, p[:]); err != nil || string(p[:]) != Preface {
		c.fail(ErrNoFrames)
		return
	}
	c.prefaced.Store(true)
	var fixed [FixedLen]byte
	for {
		if _, err := io.ReadFull(br, fixed[:]); err != nil {
			c.fail(fmt.Errorf("%w: %v", ErrClosed, err))
			return
		}
		n, id, hlen := Fixed(fixed[:])
		if n < 8 || hlen > n-8 || n > MaxAnswer {
			c.fail(fmt.Errorf("wireframe: the server sent a frame of %d bytes with a head of %d: not continuum-frames/1", n, hlen))
			return
		}
		b := make([]byte, n-8)
		if _, err := io.ReadFull(br, b); err != nil {
			c.fail(fmt.Errorf("%w: %v", ErrClosed, err))
			return
		}
		status, h, err := ParseAnswerHead(b[:hlen])
		if err != nil {
			c.fail(fmt.Errorf("wireframe: the answer of request %d: %v", id, err))
			return
		}
		body := b[hlen:]
		c.mu.Lock()
		ch, ok := c.mu.pending[id]
		delete(c.mu.pending, id)
		c.mu.Unlock()
		if !ok {
			c.fail(fmt.Errorf("wireframe: the server answered request %d, which is not in flight", id))
			return
		}
		if ch != nil {
			ch <- answer{resp: &http.Response{
				Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
				Proto: "continuum-frames/1", ProtoMajor: 1, Header: h,
				Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
			}}
		}
	}
}

// RoundTrip sends req on one of t's connections and waits for its answer.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	ctx := req.Context()
	c, err := t.conn(ctx)
	if err != nil {
		return nil, err
	}
	head := AppendRequestHead(make([]byte, 0, 128), req.Method, req.URL.RequestURI(), req.Header)
	ch := make(chan answer, 1)
	c.mu.Lock()
	if err := c.mu.err; err != nil {
		c.mu.Unlock()
		return nil, err
	}
	id := c.mu.next + 1
	for {
		if _, taken := c.mu.pending[id]; !taken && id != 0 {
			break
		}
		id++
	}
	c.mu.next = id
	c.mu.pending[id] = ch
	c.mu.Unlock()
	if err := c.w.Frame(id, head, body); err != nil && c.prefaced.Load() {
		c.fail(fmt.Errorf("%w: %v", ErrClosed, err))
	}
	select {
	case a := <-ch:
		if a.resp != nil {
			a.resp.Request = req
		}
		return a.resp, a.err
	case <-ctx.Done():
		c.mu.Lock()
		if _, ok := c.mu.pending[id]; ok {
			c.mu.pending[id] = nil // the id stays taken until its answer comes
		}
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}
