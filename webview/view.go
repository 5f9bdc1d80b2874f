package webview

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/seal"
)

// Options configure a View. The zero value of every field but Dir is a
// default.
type Options struct {
	// Dir is the store's directory.
	Dir string
	// FS is the store's filesystem: nil is the operating system's.
	FS vfs.FS
	// Keyring opens an encrypted store's payloads. Without it the view of
	// an encrypted store says that it needs one, and shows nothing else but
	// verify (which checks the sealed bytes without opening them).
	Keyring seal.Keyring
	// ChainKey is the keyed-mode chain secret, for verify.
	ChainKey []byte
	// Prefix is the path the view is served under, starting and ending with
	// "/": "/" (continuumctl view) or "/view/" (continuumd). Default "/".
	Prefix string
	// Token, when set, is a secret a client may present on every request
	// (Authorization: Bearer TOKEN) or once in the URL (?token=TOKEN), which
	// then sets the session cookie. continuumd passes its API token.
	Token []byte
	// NoAuth serves every request without a session: only for a server
	// that authenticates nobody either (continuumd on a Unix socket
	// without a token). A View with neither Token nor NoAuth is reached
	// through its one-time login URL (LoginURL) only.
	NoAuth bool
	// Refresh is how often, at most, the view looks at the store for new
	// records (a re-read happens only when the log changed, and never more
	// often than four times the last read took). Default 1 s.
	Refresh time.Duration
	// RequestTimeout bounds the work of one page: it is checked between
	// the atoms the page reads (doc.go, Caveats). Default 20 s.
	RequestTimeout time.Duration
	// Log receives the view's errors; nil discards them.
	Log *slog.Logger
}

// View is an http.Handler serving the read-only web view of one store.
// Close releases the store's files.
type View struct {
	opts    Options
	fs      vfs.FS
	cookie  string // the session cookie's name, per View: two views on one host keep theirs apart
	started time.Time

	// mu guards the fields below it.
	mu struct {
		sync.Mutex
		cur       *snap
		checked   time.Time // when the store's signature was last compared
		lastCost  time.Duration
		sessions  map[string]bool
		loginCode string // "" once used
		verify    *verifyResult
		frames    frameCache
	}
	// refreshMu makes one goroutine at a time re-read the store.
	refreshMu sync.Mutex
}

// snap is one read of the store: an Inspector (or the error that stopped
// it), shared by the requests that took it (refs) and closed by the last of
// them once a newer snap replaced it.
type snap struct {
	in   *offline.Inspector
	err  error
	sig  string // the log's signature when it was read
	gen  uint64 // increases with every read that found a change
	read time.Time
	// refs and retired are guarded by View.mu.
	refs    int
	retired bool
}

// New returns a View of the store in opts.Dir. It reads the store once,
// so that a directory that holds no store fails here (ErrNotAStore); a
// store it cannot read (an encrypted one without its keyring, a damaged
// log) does not: its pages say why, and verify says where.
func New(opts Options) (*View, error) {
	if opts.Dir == "" {
		return nil, errors.New("webview: no store directory")
	}
	if opts.Prefix == "" {
		opts.Prefix = "/"
	}
	if !strings.HasPrefix(opts.Prefix, "/") || !strings.HasSuffix(opts.Prefix, "/") || pageName(opts.Prefix) != opts.Prefix[1:] {
		return nil, fmt.Errorf("webview: prefix %q must start and end with /, with one / first and no backslash or control byte", opts.Prefix)
	}
	if opts.Refresh <= 0 {
		opts.Refresh = time.Second
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 20 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	v := &View{opts: opts, fs: opts.FS, started: time.Now()}
	if v.fs == nil {
		v.fs = vfs.Default
	}
	v.cookie = "continuum_view_" + randomHex(6)
	v.mu.sessions = map[string]bool{}
	v.mu.loginCode = randomHex(24)
	s := v.read(context.Background(), v.signature(), 1)
	if errors.Is(s.err, offline.ErrNotAStore) {
		return nil, s.err
	}
	// Any other error (an encrypted store without its keyring, a damaged
	// log) is the answer of every page but verify, which says where the
	// store is damaged.
	v.mu.cur = s
	v.mu.checked = time.Now()
	return v, nil
}

// Close releases the store's files once no request uses them.
func (v *View) Close() error {
	v.mu.Lock()
	s := v.mu.cur
	v.mu.cur = nil
	v.mu.Unlock()
	if s != nil {
		v.retire(s)
	}
	return nil
}

// LoginURL is the URL that opens the view once: base is the server's
// scheme and host ("http://127.0.0.1:8123"), one a browser can open: not
// a wildcard address such as 0.0.0.0 or [::], which a listener on every
// interface reports (name the machine instead). It carries a one-time
// code that the first request exchanges for a session cookie; later
// requests with it are refused. With NoAuth it carries none.
func (v *View) LoginURL(base string) string {
	u := strings.TrimSuffix(base, "/") + v.opts.Prefix
	if v.opts.NoAuth {
		return u
	}
	v.mu.Lock()
	code := v.mu.loginCode
	v.mu.Unlock()
	if code == "" {
		return u
	}
	return u + "?token=" + url.QueryEscape(code)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("webview: no randomness: " + err.Error()) // crypto/rand does not fail on supported systems
	}
	return hex.EncodeToString(b)
}

// signature describes the log and CHECKPOINT as the filesystem lists them
// (names, sizes, modification times): it changes when the engine writes.
func (v *View) signature() string {
	var b strings.Builder
	walDir := v.fs.PathJoin(v.opts.Dir, layout.WALDir)
	names, _ := v.fs.List(walDir)
	sort.Strings(names)
	for _, n := range names {
		if st, err := v.fs.Stat(v.fs.PathJoin(walDir, n)); err == nil {
			fmt.Fprintf(&b, "%s:%d:%d;", n, st.Size(), st.ModTime().UnixNano())
		}
	}
	for _, n := range []string{layout.CheckpointName, layout.StoreName} {
		if st, err := v.fs.Stat(v.fs.PathJoin(v.opts.Dir, n)); err == nil {
			fmt.Fprintf(&b, "%s:%d:%d;", n, st.Size(), st.ModTime().UnixNano())
		}
	}
	return b.String()
}

func (v *View) read(ctx context.Context, sig string, gen uint64) *snap {
	in, err := offline.Inspect(ctx, v.opts.Dir, &offline.InspectOptions{FS: v.opts.FS, Keyring: v.opts.Keyring})
	return &snap{in: in, err: err, sig: sig, gen: gen, read: time.Now()}
}

// acquire returns the current read of the store, re-reading it first if
// the log changed and the last look is older than Refresh. The caller
// releases it.
func (v *View) acquire(ctx context.Context) (*snap, error) {
	v.mu.Lock()
	wait := max(v.opts.Refresh, 4*v.mu.lastCost)
	stale := v.mu.cur != nil && time.Since(v.mu.checked) >= wait
	v.mu.Unlock()
	if stale && v.refreshMu.TryLock() {
		v.refresh(ctx)
		v.refreshMu.Unlock()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.mu.cur
	if s == nil {
		return nil, errors.New("webview: closed")
	}
	s.refs++
	return s, nil
}

func (v *View) refresh(ctx context.Context) {
	sig := v.signature()
	v.mu.Lock()
	cur := v.mu.cur
	v.mu.checked = time.Now()
	v.mu.Unlock()
	if cur == nil || sig == cur.sig {
		return
	}
	start := time.Now()
	s := v.read(ctx, sig, cur.gen+1)
	cost := time.Since(start)
	if s.err != nil && ctx.Err() != nil {
		return // the request went away: keep what we have
	}
	v.mu.Lock()
	v.mu.lastCost = cost
	old := v.mu.cur
	if old == nil { // closed meanwhile
		v.mu.Unlock()
		if s.in != nil {
			s.in.Close()
		}
		return
	}
	v.mu.cur = s
	v.mu.checked = time.Now()
	v.mu.Unlock()
	v.retire(old)
}

func (v *View) release(s *snap) {
	v.mu.Lock()
	s.refs--
	done := s.retired && s.refs == 0
	v.mu.Unlock()
	if done && s.in != nil {
		s.in.Close()
	}
}

func (v *View) retire(s *snap) {
	v.mu.Lock()
	s.retired = true
	done := s.refs == 0
	v.mu.Unlock()
	if done && s.in != nil {
		s.in.Close()
	}
}

// csp is the Content-Security-Policy of every answer: only the view's own
// script and style, no inline script or style, no frames, no other origin.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// ServeHTTP implements http.Handler.
func (v *View) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			v.opts.Log.Error("webview: panic", "path", r.URL.Path, "panic", p)
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	}()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "the view is read-only: GET only", http.StatusMethodNotAllowed)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, v.opts.Prefix)
	if !ok {
		if r.URL.Path+"/" == v.opts.Prefix {
			http.Redirect(w, r, v.opts.Prefix, http.StatusSeeOther)
			return
		}
		http.NotFound(w, r)
		return
	}
	if !v.authorized(w, r) {
		return
	}
	if strings.HasPrefix(rest, "static/") {
		v.serveStatic(w, r, strings.TrimPrefix(rest, "static/"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), v.opts.RequestTimeout)
	defer cancel()
	if rest == "events" {
		v.serveEvents(w, r)
		return
	}
	s, err := v.acquire(ctx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer v.release(s)
	p := &page{v: v, s: s, r: r, ctx: ctx, Prefix: v.opts.Prefix, Dir: v.opts.Dir, Gen: s.gen}
	var status int
	switch rest {
	case "":
		status = p.runsPage()
	case "run":
		status = p.timelinePage()
	case "frame":
		status = p.framePage()
	case "ledger":
		status = p.ledgerPage()
	case "waits":
		status = p.waitsPage()
	case "stream":
		status = p.streamPage()
	case "dag":
		status = p.dagPage()
	case "lineage":
		status = p.lineagePage()
	case "verify":
		status = p.verifyPage()
	default:
		status = p.fail(http.StatusNotFound, "no page %q", rest)
	}
	p.render(w, status)
}

// authorized checks the request's session, or its token, and answers it
// when it is not: false then.
func (v *View) authorized(w http.ResponseWriter, r *http.Request) bool {
	if v.opts.NoAuth {
		return true
	}
	if c, err := r.Cookie(v.cookie); err == nil {
		v.mu.Lock()
		ok := v.mu.sessions[c.Value]
		v.mu.Unlock()
		if ok {
			return true
		}
	}
	if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && v.opts.Token != nil &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), v.opts.Token) == 1 {
		return true
	}
	q := r.URL.Query()
	if tok := q.Get("token"); tok != "" {
		v.mu.Lock()
		ok := v.mu.loginCode != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(v.mu.loginCode)) == 1
		if ok {
			v.mu.loginCode = "" // one time
		} else if v.opts.Token != nil {
			ok = subtle.ConstantTimeCompare([]byte(tok), v.opts.Token) == 1
		}
		var sid string
		if ok {
			sid = randomHex(32)
			v.mu.sessions[sid] = true
		}
		v.mu.Unlock()
		if ok {
			http.SetCookie(w, &http.Cookie{Name: v.cookie, Value: sid, Path: v.opts.Prefix, HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			q.Del("token")
			// The token leaves the address bar and history.
			loc := v.opts.Prefix + pageName(strings.TrimPrefix(r.URL.Path, v.opts.Prefix))
			if len(q) > 0 {
				loc += "?" + q.Encode()
			}
			http.Redirect(w, r, loc, http.StatusSeeOther)
			return false
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintf(w, "this view needs a session: open the URL the server printed when it started "+
		"(it carries a one-time token), or send Authorization: Bearer TOKEN\n")
	return false
}

// pageName is what a login's redirect keeps of the path after the
// prefix: a path on this server, never one a browser reads as another
// host. Browsers take "//host" and "/\host" alike for a host, and drop
// tabs and newlines from a URL ("/\t/host" is "//host"), so the leading
// slashes and backslashes go, and a path with a backslash or a control
// byte anywhere becomes "" (the prefix's page: the view's own pages have
// neither).
func pageName(rest string) string {
	rest = strings.TrimLeft(rest, `/\`)
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return ""
		}
	}
	return rest
}

func (v *View) serveStatic(w http.ResponseWriter, r *http.Request, name string) {
	name = path.Clean(name)
	b, err := fs.ReadFile(staticFS, "static/"+name)
	if err != nil || strings.Contains(name, "..") {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case ".svg":
		w.Header().Set("Content-Type", "image/svg+xml")
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	w.Header().Set("Cache-Control", "private, max-age=300")
	w.Write(b)
}

// serveEvents streams server-sent events: an event "gen" with the store's
// read generation whenever a re-read found the log changed, and a comment
// every 15 s to keep the connection open. The page reloads its main part
// in place when it sees a generation newer than its own.
func (v *View) serveEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	ctx := r.Context()
	var last uint64
	tick := time.NewTicker(v.opts.Refresh)
	defer tick.Stop()
	keep := time.Now()
	for i := 0; ; i++ {
		s, err := v.acquire(ctx)
		if err != nil {
			return
		}
		gen := s.gen
		v.release(s)
		if gen != last {
			last = gen
			if _, err := fmt.Fprintf(w, "event: gen\ndata: %d\n\n", gen); err != nil {
				return
			}
			fl.Flush()
		} else if time.Since(keep) > 15*time.Second {
			keep = time.Now()
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// IsLoopback reports whether host (an address without its port, or a name)
// is a loopback one: an IP address in 127.0.0.0/8 or ::1, or "localhost".
// A name is not resolved: "127.example.com" is not loopback, whatever it
// resolves to (continuumd's --listen rule).
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return ip != nil && ip.IsLoopback()
}
