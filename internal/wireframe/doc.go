// Package wireframe is continuum-frames/1, continuumd's binary framing of
// its HTTP/JSON protocol (docs/DESIGN.md, "continuum-frames/1"): the
// frame format, a batching frame writer the server and clients share, and
// Transport, a Go client that carries http.Requests over it.
//
// A frame carries one request or one answer of the HTTP protocol as it
// is: method, target, headers and body, or status, headers and body. A
// connection opens with a 20-byte preface each way; requests carry ids
// chosen by the client, and answers come back with them, in any order, so
// that one connection carries many requests at once (pipelining) without
// HTTP's per-request parsing and one write per answer.
//
// Usage, a client of a server's Unix socket:
//
//	tr := &wireframe.Transport{Dial: func(ctx context.Context) (net.Conn, error) {
//		var d net.Dialer
//		return d.DialContext(ctx, "unix", sock)
//	}}
//	cl := &http.Client{Transport: tr}
//	resp, err := cl.Get("http://continuumd/v1/health")
//
// # Guarantees
//
// A request's answer is the one the server's handler wrote over HTTP:
// same status, headers (less Content-Length, Connection, Transfer-Encoding,
// Host) and body. A request in flight on a connection that breaks has no
// answer (ErrClosed), as on a broken HTTP connection: the protocol's
// request ids and idempotency make a retry safe.
//
// # Caveats
//
// Transport reads each request's body whole before sending it, and each
// answer whole before returning it: it is for the protocol's JSON
// requests, not blob transfers (which go over HTTP). It does not fall back
// to HTTP: a server that does not speak frames fails the request with
// ErrNoFrames.
package wireframe
