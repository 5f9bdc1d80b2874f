package main

// The HTTP layer under the handlers: the http.Server's limits, a listener
// that caps connections, and a connection that turns the few answers
// net/http writes itself (before any handler runs) into the protocol's
// JSON errors.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/continuumdb/continuum/internal/wireframe"
)

// maxHeaderBytes is the largest request header the server reads (431
// header_too_large beyond).
const maxHeaderBytes = 64 << 10

// httpServer is the http.Server that serves s: headers within
// ReadHeaderTimeout, bodies within cfg.bodyTimeout (set per request by
// wrap, so that a long call waiting for its outcome is not cut), idle
// connections closed after two minutes.
func (s *server) httpServer(log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           s.handler(),
		ConnContext:       withTLSConn,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// serveH2C has hs serve HTTP/2 without TLS (prior knowledge) beside
// HTTP/1.1 (--h2c).
func serveH2C(hs *http.Server) {
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
}

// limitListener caps the connections served at once at max: one more is
// answered 503 too_many_connections (after its request's header is read,
// so that the client sees the answer rather than a reset) and closed. At
// most max/8+8 such refusals run at once; past that a connection is
// closed at once.
type limitListener struct {
	net.Listener
	slots   chan struct{} // one per connection served
	refuse  chan struct{} // one per refusal in progress
	timeout time.Duration // how long a refusal waits for the request's header
}

func newLimitListener(l net.Listener, max int, headerTimeout time.Duration) net.Listener {
	return &limitListener{Listener: l, slots: make(chan struct{}, max), refuse: make(chan struct{}, max/8+8), timeout: headerTimeout}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &jsonErrorConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
		}
		select {
		case l.refuse <- struct{}{}:
			go func() {
				defer func() { <-l.refuse }()
				l.refuseConn(c)
			}()
		default:
			c.Close()
		}
	}
}

// refuseConn answers the request on c 503 too_many_connections.
func (l *limitListener) refuseConn(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(l.timeout))
	br := bufio.NewReaderSize(io.LimitReader(c, maxHeaderBytes), 4096)
	e := &apiError{Status: http.StatusServiceUnavailable, Code: codeTooManyConns,
		Message: fmt.Sprintf("the server serves %d connections at once already (its --max-conns): retry later, or reuse a connection", cap(l.slots))}
	if first, err := br.Peek(1); err == nil && first[0] == wireframe.Preface[0] {
		refuseFrames(c, br, e)
		return
	}
	if _, err := http.ReadRequest(br); err != nil {
		return
	}
	writeRawError(c, e)
}

// writeRawError writes e as a whole HTTP/1.1 answer on a connection that
// is then closed.
func writeRawError(w io.Writer, e *apiError) {
	body, _ := json.Marshal(map[string]any{"error": e})
	body = append(body, '\n')
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		e.Status, http.StatusText(e.Status), len(body), body)
}

// netHTTPErrorHeaders ends the status line of every answer net/http writes
// by itself when it cannot read a request (server.go's errorHeaders); the
// handlers' answers are application/json.
var netHTTPErrorHeaders = []byte("\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n")

// jsonErrorConn is a served connection: net/http's own error answers
// (431 for a header over MaxHeaderBytes, 400 for a malformed request, 501
// for an unknown transfer encoding), each written in one Write, are
// replaced by the same status with a JSON error body.
type jsonErrorConn struct {
	net.Conn
	release func()
	once    sync.Once
}

func (c *jsonErrorConn) Write(p []byte) (int, error) {
	if len(p) < 12 || !bytes.HasPrefix(p, []byte("HTTP/1.1 ")) || p[9] < '4' {
		return c.Conn.Write(p)
	}
	status, err := strconv.Atoi(string(p[9:12]))
	i := bytes.Index(p, netHTTPErrorHeaders)
	if err != nil || i < 0 {
		return c.Conn.Write(p)
	}
	e := &apiError{Status: status, Code: codeBadRequest, Message: "the request is not one HTTP/1.1 can read: " + string(p[i+len(netHTTPErrorHeaders):])}
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		e.Message = fmt.Sprintf("the request's header is larger than %d bytes", maxHeaderBytes)
		e.Code = codeHeaderTooLarge
	case http.StatusNotImplemented:
		e.Message = "the request's transfer encoding is not one the server takes (chunked or none)"
	}
	var buf bytes.Buffer
	writeRawError(&buf, e)
	if _, err := c.Conn.Write(buf.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *jsonErrorConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// readBody reads r's body within the server's body timeout and size
// limit.
func (s *server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	if s.cfg.bodyTimeout > 0 {
		// An error here means the connection cannot take a deadline (a
		// test's pipe): the body is read without one.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.bodyTimeout))
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.maxBody))
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Code: codeTooLarge,
			Message: fmt.Sprintf("the request body is larger than %d bytes (the server's --max-body)", mbe.Limit)}
	case errors.As(err, &ne) && ne.Timeout():
		w.Header().Set("Connection", "close")
		return nil, &apiError{Status: http.StatusRequestTimeout, Code: codeTimeout,
			Message: fmt.Sprintf("the request body did not arrive within %v (the server's --body-timeout)", s.cfg.bodyTimeout)}
	case err != nil:
		return nil, badRequest("", "reading the request body: %v", err)
	}
	return b, nil
}

// tlsConnKey is the context key of a connection's *tls.Conn (set by
// withTLSConn, and by the frames server for its connections).
type tlsConnKey struct{}

// withTLSConn is the http.Server's ConnContext: the *tls.Conn under c's
// wrappers (the connection cap's, the sniffer's), which hide it from
// net/http, so that withTLS can give the request its TLS state.
func withTLSConn(ctx context.Context, c net.Conn) context.Context {
	if tc := underTLS(c); tc != nil {
		return context.WithValue(ctx, tlsConnKey{}, tc)
	}
	return ctx
}

// underTLS returns the *tls.Conn under c's wrappers, or nil.
func underTLS(c net.Conn) *tls.Conn {
	for {
		switch x := c.(type) {
		case *tls.Conn:
			return x
		case *peekedConn:
			c = x.Conn
		case *jsonErrorConn:
			c = x.Conn
		default:
			return nil
		}
	}
}

// withTLS sets r.TLS, which net/http leaves nil behind the listener's
// wrappers, from the connection's *tls.Conn: what reads it (the web
// view's cookie is Secure over TLS) sees a TLS request as one.
func withTLS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			if tc, ok := r.Context().Value(tlsConnKey{}).(*tls.Conn); ok {
				st := tc.ConnectionState()
				r.TLS = &st
			}
		}
		next.ServeHTTP(w, r)
	})
}
