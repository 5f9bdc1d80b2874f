package main

import (
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/webview"
)

// viewPrefix is where continuumd serves the web view, beside /v1/.
const viewPrefix = "/view/"

// withView returns api with the read-only web view of the server's store
// (package webview) mounted under /view/, on the same listeners and with
// the same token and the same limit on failed authentication (its 401s
// count against the client's address as the API's do): a browser
// presents it once in the URL (?token=TOKEN) or opens the one-time URL
// logged at start, then keeps a session cookie; a client may also send it
// as the API's bearer token. Without a token
// (a Unix socket only) the view needs none, as the API; with scoped
// tokens (--tokens) and no admin token it is off, since it shows every
// run and a scoped token names some. It logs the
// view's URL on each TCP listener. If the view cannot be made, the API is
// served alone and the log says why.
func withView(s *server, api http.Handler, listeners []net.Listener, ring seal.Keyring, tls bool) http.Handler {
	if s.cfg.token == nil && s.cfg.tokens != nil {
		// The view shows every run of the store: only the admin token of
		// --token-file opens it. With scoped tokens alone it stays off
		// rather than open to anyone who reaches the listener.
		s.log.Info("continuumd: the web view is off: it needs the admin token of --token-file, and only scoped tokens are set")
		return api
	}
	v, err := webview.New(webview.Options{Dir: s.cfg.dir, FS: s.cfg.fs, Keyring: ring, ChainKey: s.cfg.chainKey,
		Prefix: viewPrefix, Token: s.cfg.token, NoAuth: s.cfg.token == nil, Log: s.log})
	if err != nil {
		s.log.Error("continuumd: the web view is off", "err", err)
		return api
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	for _, l := range listeners {
		if l.Addr().Network() == "tcp" {
			s.log.Info("continuumd: web view (the token in the URL works once)", "url", v.LoginURL(scheme+"://"+l.Addr().String()))
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !strings.HasPrefix(r.URL.Path, viewPrefix) && r.URL.Path+"/" != viewPrefix:
			api.ServeHTTP(w, r)
		case s.cfg.token == nil:
			v.ServeHTTP(w, r)
		default:
			// The view checks its token itself; its refusals count
			// against the client's address as the API's do, so that the
			// token is guessed no faster here.
			addr, now := clientAddr(r), time.Now()
			if aerr := s.authFails.check(addr, now); aerr != nil {
				writeAuthError(w, aerr)
				return
			}
			sw := &statusWriter{ResponseWriter: w}
			v.ServeHTTP(sw, r)
			if sw.status == http.StatusUnauthorized {
				s.authFails.fail(addr, now)
			}
		}
	})
}

// statusWriter notes the status a handler answers.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Flush passes on to the connection (the view's event stream flushes).
func (w *statusWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
