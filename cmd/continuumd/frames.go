package main

// continuum-frames/1 (internal/wireframe; docs/DESIGN.md): the same
// protocol as HTTP, in binary frames, on the same listeners. A connection
// chooses by its first byte: 0x00 is frames, anything else HTTP, handed to
// the http.Server. Every frame is served through the http.Server's own
// handler (the token, scopes, rate limit, routes, JSON errors), so that
// each route has one implementation.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuumdb/continuum/internal/wireframe"
)

// framesIdle closes a frames connection with no request in flight after
// this long without a byte from the client, as HTTP's IdleTimeout.
const framesIdle = 2 * time.Minute

// framesMaxAnswer bounds an answer's body over frames: an answer that
// grows past it (a blob download) is answered 413 too_large instead, to
// be fetched over HTTP, which streams it.
const framesMaxAnswer = 256 << 20

// framesSmallAnswer is how large an answer may grow without the
// connection's one large-answer token (framesConn.large): the answers of
// 128 requests in flight hold at most 128 of these, and one large answer
// beside them, until each is written to the socket.
const framesSmallAnswer = 64 << 10

// framesServer serves the frames connections of the server's listeners.
type framesServer struct {
	h           http.Handler
	maxBody     int64
	bodyTimeout time.Duration // a frame must arrive whole within it (408 beyond)
	sniff       time.Duration // how long a new connection may take to send its first bytes
	idle        time.Duration
	log         *slog.Logger

	// wg counts the connections being served (each until its handlers
	// returned and it is closed).
	wg sync.WaitGroup
	mu struct {
		sync.Mutex
		closing bool // shutdown began: no new frame is read
		conns   map[*framesConn]struct{}
	}
}

func newFramesServer(s *server, h http.Handler, sniff time.Duration) *framesServer {
	fs := &framesServer{h: h, maxBody: s.cfg.maxBody, bodyTimeout: s.cfg.bodyTimeout, sniff: sniff, idle: framesIdle, log: s.log}
	if s.cfg.framesIdle > 0 {
		fs.idle = s.cfg.framesIdle
	}
	if fs.bodyTimeout <= 0 {
		fs.bodyTimeout = time.Hour
	}
	fs.mu.conns = map[*framesConn]struct{}{}
	return fs
}

// sniffListener hands the http.Server the connections whose first byte
// is not 0x00, and serves the others as frames connections. Connections
// come from the limitListener under it, so frames connections count
// against --max-conns as HTTP ones do.
type sniffListener struct {
	net.Listener
	fs    *framesServer
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	err   error // why Accept stopped; read after done is closed
}

func newSniffListener(l net.Listener, fs *framesServer) *sniffListener {
	sl := &sniffListener{Listener: l, fs: fs, conns: make(chan net.Conn), done: make(chan struct{})}
	go sl.accept()
	return sl
}

func (sl *sniffListener) accept() {
	var backoff time.Duration
	for {
		c, err := sl.Listener.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			sl.stop(err)
			return
		}
		backoff = 0
		go sl.sniffConn(c)
	}
}

func (sl *sniffListener) stop(err error) {
	sl.once.Do(func() {
		sl.err = err
		close(sl.done)
	})
}

// sniffConn reads c's first byte and serves c as frames or hands it to
// the http.Server.
func (sl *sniffListener) sniffConn(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(sl.fs.sniff))
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		c.Close()
		return
	}
	if b[0] == wireframe.Preface[0] {
		sl.fs.serveConn(c)
		return
	}
	c.SetReadDeadline(time.Time{})
	select {
	case sl.conns <- &peekedConn{Conn: c, first: b[0], has: true}:
	case <-sl.done:
		c.Close()
	}
}

func (sl *sniffListener) Accept() (net.Conn, error) {
	select {
	case c := <-sl.conns:
		return c, nil
	case <-sl.done:
		return nil, sl.err
	}
}

func (sl *sniffListener) Close() error {
	err := sl.Listener.Close()
	sl.stop(net.ErrClosed)
	return err
}

// peekedConn is a connection whose first byte was read already.
type peekedConn struct {
	net.Conn
	first byte
	has   bool
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if c.has && len(p) > 0 {
		p[0], c.has = c.first, false
		return 1, nil
	}
	return c.Conn.Read(p)
}

// framesConn is one frames connection.
type framesConn struct {
	fs     *framesServer
	c      net.Conn
	remote string
	w      *wireframe.Writer
	// ctx is every request's context: cancelled when the connection
	// breaks (a long poll then ends, as over a broken HTTP connection).
	ctx    context.Context
	cancel context.CancelFunc
	// slots holds one token per request read and not yet answered on the
	// wire: at most wireframe.MaxInFlight.
	slots chan struct{}
	// handlers counts the requests being served.
	handlers sync.WaitGroup
	// jobs hands a request read to an idle worker (unbuffered: a send
	// succeeds only if one waits).
	jobs chan frameJob
	// freed is signalled when a handler gives back the bytes of its
	// request (mu.held).
	freed chan struct{}
	// large is the token an answer takes to grow past framesSmallAnswer
	// (capacity one), given back once its frame is written to the socket
	// or dropped: a client that does not read its answers holds the
	// connection to one large answer, not 128.
	large chan struct{}
	// largeWaiting counts the answers waiting for it (the tests read it).
	largeWaiting atomic.Int32

	mu struct {
		sync.Mutex
		ids  map[uint32]struct{} // ids of the requests in flight
		idle bool                // the reader waits for a frame's first byte
		held int64               // bytes of the requests read and not yet served (at most budget())
	}
}

// serveConn serves c, whose first byte (0x00) was read, as a frames
// connection: the rest of the preface, the preface back, then frames.
func (fs *framesServer) serveConn(c net.Conn) {
	var p [len(wireframe.Preface) - 1]byte
	if _, err := io.ReadFull(c, p[:]); err != nil || string(p[:]) != wireframe.Preface[1:] {
		c.Close() // not continuum-frames/1
		return
	}
	fc := &framesConn{fs: fs, c: c, remote: c.RemoteAddr().String(), slots: make(chan struct{}, wireframe.MaxInFlight), jobs: make(chan frameJob), freed: make(chan struct{}, 1),
		large: make(chan struct{}, 1)}
	fc.ctx, fc.cancel = context.WithCancel(withTLSConn(context.Background(), c))
	fc.mu.ids = map[uint32]struct{}{}
	fc.w = wireframe.NewWriter(c, fs.idle, fc.release)
	fs.mu.Lock()
	if fs.mu.closing {
		fs.mu.Unlock()
		c.Close()
		return
	}
	fs.mu.conns[fc] = struct{}{}
	fs.wg.Add(1)
	fs.mu.Unlock()
	defer fs.wg.Done()
	if err := fc.w.Raw([]byte(wireframe.Preface)); err != nil {
		fc.close(true)
		return
	}
	fc.close(fc.serve())
}

// release frees the slots of k requests whose answers were written.
func (fc *framesConn) release(k int) {
	for range k {
		<-fc.slots
	}
}

// close ends fc: abort cancels its requests and closes the connection at
// once; otherwise fc waits for the answers of the requests in flight
// first.
func (fc *framesConn) close(abort bool) {
	if abort {
		fc.cancel()
		fc.c.Close()
	}
	fc.handlers.Wait()
	fc.cancel()
	fc.c.Close()
	fc.fs.mu.Lock()
	delete(fc.fs.mu.conns, fc)
	fc.fs.mu.Unlock()
}

// serve reads frames until the connection ends, and reports whether it
// must be closed at once (a broken connection, a protocol error) rather
// than after the answers in flight (shutdown, idle, a request timeout).
func (fc *framesConn) serve() (abort bool) {
	br := bufio.NewReaderSize(fc.c, 32<<10)
	for {
		select {
		case fc.slots <- struct{}{}:
		case <-fc.ctx.Done():
			return true
		}
		if abort, stop := fc.readFrame(br); stop {
			return abort
		}
	}
}

// protocolError logs why fc is closed for breaking the framing.
func (fc *framesConn) protocolError(format string, args ...any) (abort, stop bool) {
	fc.fs.log.Debug("continuumd: closing a frames connection", "remote", fc.remote, "why", fmt.Sprintf(format, args...))
	return true, true
}

// readFrame reads one frame (holding a slot) and starts serving it.
func (fc *framesConn) readFrame(br *bufio.Reader) (abort, stop bool) {
	fs := fc.fs
	for {
		fs.mu.Lock()
		if fs.mu.closing {
			fs.mu.Unlock()
			return false, true
		}
		fc.mu.Lock()
		fc.mu.idle = true
		fc.mu.Unlock()
		fc.c.SetReadDeadline(time.Now().Add(fs.idle))
		fs.mu.Unlock()
		_, err := br.Peek(1)
		fc.mu.Lock()
		fc.mu.idle = false
		fc.mu.Unlock()
		if err == nil {
			break
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return true, true // the client closed or the connection broke
		}
		fs.mu.Lock()
		closing := fs.mu.closing
		fs.mu.Unlock()
		if closing || len(fc.slots) <= 1 {
			return false, true // shutdown, or idle with nothing in flight
		}
	}
	// The frame must arrive whole within bodyTimeout of its first byte,
	// the time spent waiting for the budget (hold) aside.
	deadline := time.Now().Add(fs.bodyTimeout)
	fc.c.SetReadDeadline(deadline)
	var fixed [wireframe.FixedLen]byte
	if _, err := io.ReadFull(br, fixed[:]); err != nil {
		// No id to answer under: a timeout closes after the answers in
		// flight, a broken connection at once.
		var ne net.Error
		return !errors.As(err, &ne) || !ne.Timeout(), true
	}
	n, id, hlen := wireframe.Fixed(fixed[:])
	switch {
	case n < 8:
		return fc.protocolError("a frame of %d bytes, less than its id and head length", n)
	case hlen > n-8:
		return fc.protocolError("frame %d: a head of %d bytes in a frame of %d", id, hlen, n)
	case int64(n) > wireframe.MaxHead+fs.maxBody+8:
		return fc.protocolError("frame %d: %d bytes, more than a head (%d) and a body (--max-body %d) take", id, n, wireframe.MaxHead, fs.maxBody)
	}
	fc.mu.Lock()
	_, dup := fc.mu.ids[id]
	if !dup {
		fc.mu.ids[id] = struct{}{}
	}
	fc.mu.Unlock()
	if dup {
		return fc.protocolError("frame %d: the id of a request in flight", id)
	}
	if hlen > wireframe.MaxHead {
		if _, err := io.CopyN(io.Discard, br, int64(n-8)); err != nil {
			return fc.readFailed(id, err)
		}
		fc.answerError(id, &apiError{Status: http.StatusRequestHeaderFieldsTooLarge, Code: codeHeaderTooLarge,
			Message: fmt.Sprintf("the request's head is %d bytes, larger than %d", hlen, wireframe.MaxHead)})
		return false, false
	}
	held := time.Now()
	if !fc.hold(int64(n)) {
		return true, true
	}
	fc.c.SetReadDeadline(deadline.Add(time.Since(held)))
	head := make([]byte, hlen)
	if _, err := io.ReadFull(br, head); err != nil {
		return fc.readFailed(id, err)
	}
	size := int64(n - 8 - hlen)
	var body []byte
	if size <= 64<<10 {
		body = make([]byte, size)
		if _, err := io.ReadFull(br, body); err != nil {
			return fc.readFailed(id, err)
		}
	} else {
		// A large body grows as it arrives: a frame that announces
		// megabytes and sends none holds none.
		var buf bytes.Buffer
		if got, err := buf.ReadFrom(io.LimitReader(br, size)); err != nil || got != size {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return fc.readFailed(id, err)
		}
		body = buf.Bytes()
	}
	fc.handlers.Add(1)
	job := frameJob{id, int64(n), head, body}
	select {
	case fc.jobs <- job: // an idle worker takes it
	default:
		go fc.worker(job)
	}
	return false, false
}

// readFailed ends fc after a frame that did not arrive whole: 408 if it
// ran past the body timeout (then the connection closes after the answers
// in flight), else the connection broke.
func (fc *framesConn) readFailed(id uint32, err error) (abort, stop bool) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		fc.answerError(id, &apiError{Status: http.StatusRequestTimeout, Code: codeTimeout,
			Message: fmt.Sprintf("the request's frame did not arrive within %v (the server's --body-timeout)", fc.fs.bodyTimeout)})
		return false, true
	}
	return true, true
}

// frameWriter is the http.ResponseWriter of a request that came in a
// frame: the answer is kept whole, then written as one frame.
type frameWriter struct {
	h      http.Header
	status int
	body   bytes.Buffer
	over   bool // the body grew past framesMaxAnswer
	// fc is the connection whose large-answer token the body takes to
	// grow past framesSmallAnswer (nil: an answer of the server's own,
	// small); large says it holds it.
	fc    *framesConn
	large bool
	head  bool // the answer of a HEAD request: no body goes out
}

func (w *frameWriter) Header() http.Header { return w.h }

// WriteHeader keeps the status. An answer that declares a Content-Length
// past framesSmallAnswer takes the large-answer token here, before the
// handler reads what it will write (a blob's chunks), and one past
// framesMaxAnswer is refused at once (413, not 256 MiB read to be
// dropped).
func (w *frameWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	w.status = code
	if n, err := strconv.ParseInt(w.h.Get("Content-Length"), 10, 64); err == nil && !w.head {
		switch {
		case n > framesMaxAnswer:
			w.over = true
		case n > framesSmallAnswer:
			w.takeLarge()
		}
	}
}

// takeLarge takes the connection's large-answer token, waiting for it,
// unless w holds it or belongs to no connection; false if the connection
// ended first.
func (w *frameWriter) takeLarge() bool {
	if w.large || w.fc == nil {
		return true
	}
	if w.fc.ctx.Err() != nil {
		return false // no answer goes out any more: none is built
	}
	w.fc.largeWaiting.Add(1)
	select {
	case w.fc.large <- struct{}{}:
		w.large = true
	case <-w.fc.ctx.Done():
	}
	w.fc.largeWaiting.Add(-1)
	return w.large
}

func (w *frameWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.over || w.body.Len()+len(p) > framesMaxAnswer {
		w.over = true
		return 0, fmt.Errorf("continuumd: the answer is larger than a frame carries (%d bytes)", framesMaxAnswer)
	}
	if w.body.Len()+len(p) > framesSmallAnswer && (!w.takeLarge() || w.fc != nil && w.fc.ctx.Err() != nil) {
		return 0, w.fc.ctx.Err() // the connection ended: no more of it is built
	}
	return w.body.Write(p)
}

// request is the http.Request of a frame's head and body.
func (fc *framesConn) request(head, body []byte) (*http.Request, *apiError) {
	method, target, h, err := wireframe.ParseRequestHead(head)
	if err != nil {
		return nil, badRequest("", "the frame's head: %v", err)
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, badRequest("", "the frame's target %q: %v", target, err)
	}
	r := &http.Request{
		Method: method, URL: u, RequestURI: target,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Host: "continuumd", RemoteAddr: fc.remote,
		ContentLength: int64(len(body)), Body: http.NoBody,
	}
	if len(body) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	return r.WithContext(fc.ctx), nil
}

// frameJob is a request read, to serve.
type frameJob struct {
	id         uint32
	n          int64 // the frame's bytes after its length, held until it is served
	head, body []byte
}

// budget is how many bytes of requests a frames connection may hold read
// and not yet served: one frame of the largest size and a MiB beside it,
// so that one connection holds about what one HTTP connection may (its
// 128 requests in flight are not 128 bodies of --max-body each), while
// small requests still pipeline.
func (fs *framesServer) budget() int64 { return wireframe.MaxHead + fs.maxBody + 8 + 1<<20 }

// hold takes n bytes of fc's budget, waiting (and reading nothing more,
// so that the client is held back by TCP) while the requests in flight
// hold too many; always granted when none are held, so a frame of any
// size the limits allow is read. It is false if fc ended meanwhile.
func (fc *framesConn) hold(n int64) bool {
	for !fc.take(n) {
		select {
		case <-fc.freed:
		case <-fc.ctx.Done():
			return false
		}
	}
	return true
}

// take takes n bytes of fc's budget if they fit (or none are held).
func (fc *framesConn) take(n int64) bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.mu.held != 0 && fc.mu.held+n > fc.fs.budget() {
		return false
	}
	fc.mu.held += n
	return true
}

// free gives back the n bytes of a request served.
func (fc *framesConn) free(n int64) {
	fc.mu.Lock()
	fc.mu.held -= n
	fc.mu.Unlock()
	select {
	case fc.freed <- struct{}{}:
	default:
	}
}

// worker serves job, then the jobs handed to it while it waits idle,
// until the connection ends: its stack, grown by the handlers, serves
// the next request as HTTP's connection goroutine's does, instead of a
// new goroutine growing one each time.
func (fc *framesConn) worker(job frameJob) {
	for {
		fc.dispatch(job.id, job.head, job.body)
		fc.free(job.n)
		fc.handlers.Done()
		select {
		case job = <-fc.jobs:
		case <-fc.ctx.Done():
			return
		}
	}
}

// writerPool recycles frameWriters (their header maps and buffers).
var writerPool = sync.Pool{New: func() any { return &frameWriter{h: http.Header{}} }}

// dispatch serves one request through the server's handler and queues
// its answer.
func (fc *framesConn) dispatch(id uint32, head, body []byte) {
	w := writerPool.Get().(*frameWriter)
	w.fc = fc
	defer func() {
		clear(w.h)
		w.status, w.over, w.fc, w.large, w.head = 0, false, nil, false, false
		w.body.Reset()
		if w.body.Cap() <= framesSmallAnswer {
			writerPool.Put(w)
		}
	}()
	r, aerr := fc.request(head, body)
	w.head = r != nil && r.Method == http.MethodHead
	if aerr != nil {
		writeError(w, aerr)
	} else {
		fc.serveHTTP(w, r)
	}
	if w.over {
		clear(w.h)
		w.status, w.over = 0, false
		w.body.Reset()
		writeError(w, &apiError{Status: http.StatusRequestEntityTooLarge, Code: codeTooLarge,
			Message: fmt.Sprintf("the answer is larger than a frame carries (%d bytes): fetch it over HTTP", framesMaxAnswer)})
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	b := w.body.Bytes()
	if r != nil && r.Method == http.MethodHead {
		b = nil
	}
	var done func()
	if w.large {
		done = fc.releaseLarge
	}
	fc.answer(id, w.status, w.h, b, done)
}

// releaseLarge gives back the large-answer token (frameWriter.Write).
func (fc *framesConn) releaseLarge() { <-fc.large }

// serveHTTP runs the handler; a panic that escapes it (the handlers'
// wrappers recover their own) is a 500, and http.ErrAbortHandler (an
// answer cut halfway, which HTTP signals by closing the connection) too.
func (fc *framesConn) serveHTTP(w *frameWriter, r *http.Request) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if p != http.ErrAbortHandler {
			fc.fs.log.Error("continuumd: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		} else if w.over {
			return // cut because it outgrew a frame: dispatch answers 413
		}
		clear(w.h)
		w.status, w.over = 0, false
		w.body.Reset()
		writeError(w, &apiError{Status: http.StatusInternalServerError, Code: codeInternal,
			Message: fmt.Sprintf("the server failed handling %s %s: %v", r.Method, r.URL.Path, p)})
	}()
	fc.fs.h.ServeHTTP(w, r)
}

func (fc *framesConn) answerError(id uint32, e *apiError) {
	w := &frameWriter{h: http.Header{}}
	writeError(w, e)
	fc.answer(id, w.status, w.h, w.body.Bytes(), nil)
}

// answer queues the answer of request id; done, when not nil, is called
// once it is written or dropped.
func (fc *framesConn) answer(id uint32, status int, h http.Header, body []byte, done func()) {
	var hb [256]byte
	head := wireframe.AppendAnswerHead(hb[:0], status, h)
	fc.mu.Lock()
	delete(fc.mu.ids, id)
	fc.mu.Unlock()
	if err := fc.w.FrameThen(id, head, body, done); err != nil {
		fc.cancel()
		fc.c.Close()
	}
}

// stopReading stops the reading of new frames on every connection: a
// connection waiting for one stops at once, one reading a frame after it.
func (fs *framesServer) stopReading() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.mu.closing = true
	for fc := range fs.mu.conns {
		fc.mu.Lock()
		if fc.mu.idle {
			fc.c.SetReadDeadline(time.Now())
		}
		fc.mu.Unlock()
	}
}

// shutdown stops reading new frames, lets the requests in flight be
// answered, and closes the connections; at ctx's end it closes those
// still busy (their requests get no answer).
func (fs *framesServer) shutdown(ctx context.Context) error {
	fs.stopReading()
	done := make(chan struct{})
	go func() {
		fs.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	fs.mu.Lock()
	for fc := range fs.mu.conns {
		fc.cancel()
		fc.c.Close()
	}
	fs.mu.Unlock()
	<-done
	return ctx.Err()
}

// listen wraps l for serving: the connection cap (--max-conns), then the
// choice between HTTP and frames by the first byte. hs.Handler must be
// final (frames are served by it).
func (s *server) listen(hs *http.Server, l net.Listener, maxConns int) net.Listener {
	if s.frames == nil {
		s.frames = newFramesServer(s, hs.Handler, hs.ReadHeaderTimeout)
		hs.RegisterOnShutdown(s.frames.stopReading)
	}
	return newSniffListener(newLimitListener(l, maxConns, hs.ReadHeaderTimeout), s.frames)
}

// refuseFrames answers the first request of a frames connection over the
// server's cap with e, and closes it (the caller does): the client sees
// the protocol's answer, not a closed connection it would take for a
// server without frames.
func refuseFrames(c net.Conn, br *bufio.Reader, e *apiError) {
	var p [len(wireframe.Preface)]byte
	if _, err := io.ReadFull(br, p[:]); err != nil || string(p[:]) != wireframe.Preface {
		return
	}
	if _, err := c.Write([]byte(wireframe.Preface)); err != nil {
		return
	}
	var fixed [wireframe.FixedLen]byte
	if _, err := io.ReadFull(br, fixed[:]); err != nil {
		return
	}
	_, id, _ := wireframe.Fixed(fixed[:])
	w := &frameWriter{h: http.Header{}}
	writeError(w, e)
	c.Write(wireframe.AppendFrame(nil, id, wireframe.AppendAnswerHead(nil, w.status, w.h), w.body.Bytes()))
}
