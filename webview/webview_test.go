package webview_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/webview"
	"github.com/continuumdb/continuum/webview/internal/demo"
)

// TestMain doubles as the process that dies in an exec (demo.CrashInDoubt)
// when WEBVIEW_TEST_CRASH names a store.
func TestMain(m *testing.M) {
	if dir := os.Getenv("WEBVIEW_TEST_CRASH"); dir != "" {
		err := demo.CrashInDoubt(context.Background(), dir, "payments", nil)
		fmt.Fprintln(os.Stderr, "crash:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

var (
	demoOnce sync.Once
	demoDir  string
	demoErr  error
)

// demoStore returns a copy of the demo store, with an in-doubt action of
// run "payments" left by a process that died in its exec.
func demoStore(t *testing.T) string {
	t.Helper()
	demoOnce.Do(func() {
		demoDir, demoErr = os.MkdirTemp("", "webview-demo-")
		if demoErr != nil {
			return
		}
		if demoErr = demo.Build(context.Background(), demoDir, nil); demoErr != nil {
			return
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "WEBVIEW_TEST_CRASH="+demoDir)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			demoErr = fmt.Errorf("crash child: %v: %s", err, out)
		}
	})
	if demoErr != nil {
		t.Fatal(demoErr)
	}
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(dir, os.DirFS(demoDir)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// logBuf collects a View's log, to catch a recovered panic.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newView(t *testing.T, opts webview.Options) (*webview.View, *logBuf) {
	t.Helper()
	lb := &logBuf{}
	opts.Log = slog.New(slog.NewTextHandler(lb, nil))
	if opts.Token == nil && !opts.NoAuth {
		opts.Token = []byte("test-token-0123456789")
	}
	v, err := webview.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		v.Close()
		if strings.Contains(lb.String(), "panic") {
			t.Errorf("the view panicked: %s", lb)
		}
	})
	return v, lb
}

// get asks v for target with the bearer token and returns status and body.
func get(t *testing.T, v http.Handler, target string) (int, string, http.Header) {
	t.Helper()
	r := httptest.NewRequest("GET", target, nil)
	r.Header.Set("Authorization", "Bearer test-token-0123456789")
	w := httptest.NewRecorder()
	v.ServeHTTP(w, r)
	return w.Code, w.Body.String(), w.Header()
}

func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&#34;")
		case '\'':
			b.WriteString("&#39;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestPagesAgainstTheStore(t *testing.T) {
	dir := demoStore(t)
	v, _ := newView(t, webview.Options{Dir: dir})
	ctx := context.Background()
	in, err := engine.Inspect(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()

	code, body, h := get(t, v, "/")
	if code != 200 {
		t.Fatalf("runs: %d %s", code, body)
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q", csp)
	}
	for _, r := range in.Runs() {
		if !strings.Contains(body, `data-run="`+esc(r.ID)+`"`) {
			t.Errorf("runs page lacks run %q", r.ID)
		}
		want := fmt.Sprintf(`<td class="num indoubt%s">%d</td>`, map[bool]string{true: " warn"}[len(r.InDoubt) > 0], len(r.InDoubt))
		row := body[strings.Index(body, `data-run="`+esc(r.ID)+`"`):]
		row = row[:strings.Index(row, "</tr>")]
		if !strings.Contains(row, want) || !strings.Contains(row, fmt.Sprintf(`lastseq">%d<`, r.LastSeq)) {
			t.Errorf("run %q: row %s, want in doubt %d, last seq %d", r.ID, row, len(r.InDoubt), r.LastSeq)
		}
	}
	if pay, _ := in.Run("payments"); len(pay.InDoubt) != 1 || pay.Interrupted == 0 {
		t.Fatalf("payments: %+v", pay)
	}
	_, body, _ = get(t, v, "/?status=in-doubt")
	if !strings.Contains(body, `data-run="payments"`) || strings.Contains(body, `data-run="agent-1"`) {
		t.Errorf("in-doubt filter: %s", body)
	}

	// timeline: every atom, every action's tool and status, every op
	r, _ := in.Run("agent-1")
	_, body, _ = get(t, v, "/run?id=agent-1")
	for seq := uint64(1); seq <= r.LastSeq; seq++ {
		a, err := in.Atom(ctx, "agent-1", seq)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(body, fmt.Sprintf(`id="atom-%d"`, seq)) {
			t.Errorf("timeline lacks atom %d", seq)
		}
		for _, act := range a.Actions {
			if !strings.Contains(body, `<span class="tool">`+act.Tool+`</span> <span class="status st-`+act.StatusName()) {
				t.Errorf("timeline lacks action %s %s", act.Tool, act.StatusName())
			}
		}
		for _, op := range a.Delta.Ops() {
			if !strings.Contains(body, `class="op op-`+op.Kind) {
				t.Errorf("timeline lacks op %s", op.Kind)
			}
		}
	}
	for _, s := range []string{"is-error", "call_1", "ci.lint", "TOOL_CALL", "notifier"} {
		if !strings.Contains(strings.ToUpper(body), strings.ToUpper(s)) {
			t.Errorf("timeline lacks %q", s)
		}
	}
	if strings.Contains(body, demo.Secret) {
		t.Error("timeline shows a redacted argument")
	}

	// frame at each seq: every message and memory key of StateAt
	for seq := uint64(0); seq <= r.LastSeq; seq++ {
		f, err := in.StateAt(ctx, "agent-1", seq)
		if err != nil {
			t.Fatal(err)
		}
		_, body, _ = get(t, v, fmt.Sprintf("/frame?id=agent-1&seq=%d", seq))
		if !strings.Contains(body, fmt.Sprintf(`id="frame-seq">%d<`, seq)) {
			t.Errorf("frame %d: wrong seq", seq)
		}
		chat := body[strings.Index(body, `id="chat"`):]
		if n := strings.Count(chat, `<div class="msg `); n != len(f.Messages) {
			t.Errorf("frame %d: %d messages, StateAt has %d", seq, n, len(f.Messages))
		}
		for k := range f.Memory {
			if !strings.Contains(body, `<td class="k">`+k+`</td>`) {
				t.Errorf("frame %d lacks memory key %s", seq, k)
			}
		}
	}
	// diff: what changed, not the ops
	_, body, _ = get(t, v, "/frame?id=agent-1&seq=3&against=1")
	d := body[strings.Index(body, `id="diff"`):strings.Index(body, "Frame at seq")]
	for _, s := range []string{"subgoal build", "memory image", "memory notes", "pending call_3", "messages added after the first 2 (4)"} {
		if !strings.Contains(d, s) {
			t.Errorf("diff lacks %q: %s", s, d)
		}
	}
	if strings.Contains(d, "set_subgoal_status") || strings.Contains(d, "append_message") {
		t.Error("the diff lists ops, not what changed")
	}
	_, body, _ = get(t, v, "/frame?id=agent-1&seq=2&against=2")
	if !strings.Contains(body, `id="diff-same"`) {
		t.Error("a state against itself is not the same")
	}
	_, body, _ = get(t, v, "/frame?id=agent-1-retry&seq=3&against=3&with=agent-1")
	if !strings.Contains(body, "memory plan") {
		t.Error("a diff across a fork lacks the fork's key")
	}

	// ledger: compensated, not undone, in doubt
	_, body, _ = get(t, v, "/ledger?id=deploy-rb")
	for _, s := range []string{"compensated by the rollback at seq 3", "hotel.cancel", "not undone"} {
		if !strings.Contains(body, s) {
			t.Errorf("ledger lacks %q", s)
		}
	}
	_, body, _ = get(t, v, "/ledger?id=payments")
	if !strings.Contains(body, "payments.charge") || !strings.Contains(body, "st-in-doubt") {
		t.Error("ledger lacks the in-doubt charge")
	}
	// lineage and DAG
	_, body, _ = get(t, v, "/lineage")
	if i, j, k := strings.Index(body, `data-run="agent-1"`), strings.Index(body, `data-run="agent-1-retry"`), strings.Index(body, `data-run="agent-1-retry-2"`); i < 0 || j < i || k < j {
		t.Errorf("lineage order %d %d %d", i, j, k)
	}
	_, body, _ = get(t, v, "/dag?id=planner")
	if strings.Count(body, "bnode") != 2 || !strings.Contains(body, "3 ← 1") {
		t.Errorf("DAG: %s", body)
	}
	// verify agrees with offline.Verify
	rep, err := offline.Verify(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ = get(t, v, "/verify")
	if want := map[bool]string{true: "intact", false: "damaged"}[rep.OK]; !strings.Contains(body, `id="verify-ok">`+want) {
		t.Errorf("verify page, want %s", want)
	}
	if code, _, _ := get(t, v, "/run?id=nosuch"); code != 404 {
		t.Errorf("unknown run: %d", code)
	}
}

func TestXSSCorpusIsText(t *testing.T) {
	dir := demoStore(t)
	v, _ := newView(t, webview.Options{Dir: dir})
	id := url.QueryEscape(demo.XSSRun)
	for _, p := range []string{"/", "/?q=" + url.QueryEscape("<script>"), "/run?id=" + id, "/frame?id=" + id, "/frame?id=" + id + "&seq=1&against=0",
		"/ledger?id=" + id, "/dag?id=" + id, "/lineage?id=" + id, "/verify", "/run?id=" + url.QueryEscape("<script>x</script>"),
		"/waits?id=" + demo.WaitsRun, "/stream?id=" + demo.WaitsRun + "&name=tokens", "/waits?id=" + id} {
		_, body, _ := get(t, v, p)
		if n := strings.Count(strings.ToLower(body), "<script"); n != 1 {
			t.Errorf("%s: %d script elements, want the view's own one", p, n)
		}
		for _, bad := range []string{"<img", "<svg onload", "<iframe", "<b onmouseover", "<a href=javascript", "onerror=\"window"} {
			if strings.Contains(strings.ToLower(body), strings.ToLower(bad)) {
				t.Errorf("%s: the corpus made markup: %q", p, bad)
			}
		}
		if strings.Contains(body, "href=\"javascript:") {
			t.Errorf("%s: a javascript: link", p)
		}
	}
	_, body, _ := get(t, v, "/run?id="+id)
	for _, s := range demo.XSS {
		if !strings.Contains(body, esc(s)) {
			t.Errorf("timeline does not show %q as text", s)
		}
	}
}

func TestAuth(t *testing.T) {
	dir := demoStore(t)
	v, _ := newView(t, webview.Options{Dir: dir, Prefix: "/view/"})
	do := func(target string, cookie *http.Cookie, method string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, target, nil)
		if cookie != nil {
			r.AddCookie(cookie)
		}
		w := httptest.NewRecorder()
		v.ServeHTTP(w, r)
		return w
	}
	if w := do("/view/", nil, "GET"); w.Code != 401 {
		t.Fatalf("no session: %d", w.Code)
	}
	login := v.LoginURL("http://127.0.0.1:1")
	u, _ := url.Parse(login)
	w := do(u.RequestURI(), nil, "GET")
	if w.Code != http.StatusSeeOther || strings.Contains(w.Header().Get("Location"), "token") {
		t.Fatalf("login: %d %q", w.Code, w.Header().Get("Location"))
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie %+v", cookies)
	}
	if w := do("/view/", cookies[0], "GET"); w.Code != 200 {
		t.Errorf("with the session: %d", w.Code)
	}
	if w := do(u.RequestURI(), nil, "GET"); w.Code != 401 {
		t.Errorf("the one-time token worked twice: %d", w.Code)
	}
	if w := do("/view/?token=test-token-0123456789", nil, "GET"); w.Code != http.StatusSeeOther {
		t.Errorf("the server's token in the URL: %d", w.Code)
	}
	if w := do("/view/frame?id=a%20b&token=test-token-0123456789&seq=2", nil, "GET"); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/view/frame?id=a+b&seq=2" {
		t.Errorf("the token in a page's URL: %d, to %q", w.Code, w.Header().Get("Location"))
	}
	root, _ := newView(t, webview.Options{Dir: dir})
	w = httptest.NewRecorder()
	root.ServeHTTP(w, httptest.NewRequest("GET", "//evil.example/x?token=test-token-0123456789", nil))
	if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || loc != "/evil.example/x" {
		t.Errorf("login at //evil.example/x: %d, to %q: it must stay on this host", w.Code, loc)
	}
	if w := do("/view/?token=wrong", nil, "GET"); w.Code != 401 {
		t.Errorf("a wrong token: %d", w.Code)
	}
	if w := do("/view/", &http.Cookie{Name: cookies[0].Name, Value: "forged"}, "GET"); w.Code != 401 {
		t.Errorf("a forged session: %d", w.Code)
	}
	if w := do("/view/", cookies[0], "POST"); w.Code != 405 {
		t.Errorf("POST: %d", w.Code)
	}
	if w := do("/view/static/app.js", cookies[0], "GET"); w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/javascript") {
		t.Errorf("app.js: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	if w := do("/view/static/../view.go", cookies[0], "GET"); w.Code != 404 {
		t.Errorf("a path out of static: %d", w.Code)
	}
}

func TestEncryptedStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "enc")
	if err := demo.Build(context.Background(), dir, demo.Keyring()); err != nil {
		t.Fatal(err)
	}
	v, _ := newView(t, webview.Options{Dir: dir})
	code, body, _ := get(t, v, "/")
	if code != 403 || !strings.Contains(body, "--keyring") {
		t.Errorf("without the keyring: %d %s", code, body)
	}
	if code, body, _ := get(t, v, "/verify"); code != 200 || !strings.Contains(body, "verify-ok") {
		t.Errorf("verify without the keyring: %d", code)
	}
	v, _ = newView(t, webview.Options{Dir: dir, Keyring: demo.Keyring()})
	for _, p := range []string{"/frame?id=pii", "/frame?id=pii&seq=1&against=0", "/run?id=pii", "/ledger?id=pii", "/waits?id=" + demo.WaitsRun, "/stream?id=" + demo.WaitsRun + "&name=tokens"} {
		code, body, _ := get(t, v, p)
		if code != 200 {
			t.Fatalf("%s: %d %s", p, code, body)
		}
		if strings.Contains(body, demo.Erased) {
			t.Errorf("%s shows an erased value", p)
		}
	}
	// the sealed events and chunks, opened by the keyring
	if _, body, _ := get(t, v, "/waits?id="+demo.WaitsRun); !strings.Contains(body, `<span class="sender">alice@console-7</span>`) || !strings.Contains(body, "&#34;approved&#34;: true") || strings.Contains(body, "sealed payload") {
		t.Errorf("waits of the encrypted store: the event's payload is not shown")
	}
	if _, body, _ := get(t, v, "/stream?id="+demo.WaitsRun+"&name=tokens"); !strings.Contains(body, `<code class="val">logs-2019</code>`) || strings.Contains(body, "sealed, not shown") {
		t.Errorf("stream of the encrypted store: a chunk is not shown")
	}
	_, body, _ = get(t, v, "/frame?id=pii")
	if !strings.Contains(body, `<td class="k">email</td><td><span class="erased">erased</span>`) || !strings.Contains(body, "Alice") {
		t.Errorf("frame of pii: the erased key is not marked, or the other value is missing")
	}
}

// TestHostileStore reads pages of stores an attacker shaped: huge values,
// thousands of messages, and bytes of the log overwritten at random. Each
// page answers, bounded in size, and nothing panics.
func TestHostileStore(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "big")
	db, err := engine.Open(dir, &engine.Options{Durability: engine.Relaxed})
	if err != nil {
		t.Fatal(err)
	}
	run, err := db.Run(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	huge := bytes.Repeat([]byte("<b>x</b>"), 1<<20) // 8 MiB
	a, _ := run.Begin(ctx)
	d := new(frame.Delta).Set("huge", huge).AppendMessage(frame.Message{Role: frame.RoleUser, Content: string(huge[:4<<20])})
	for i := range 3000 {
		d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprint("m", i)})
		d.Set(fmt.Sprint("k", i), []byte("v"))
	}
	if err := a.Commit(ctx, d); err != nil {
		t.Fatal(err)
	}
	db.Close()
	v, _ := newView(t, webview.Options{Dir: dir})
	for _, p := range []string{"/", "/run?id=big", "/frame?id=big", "/frame?id=big&seq=1&against=0", "/ledger?id=big", "/dag?id=big"} {
		code, body, _ := get(t, v, p)
		if code != 200 {
			t.Errorf("%s: %d", p, code)
		}
		if len(body) > 4<<20 {
			t.Errorf("%s: %d bytes: values are not cut", p, len(body))
		}
	}
	_, body, _ := get(t, v, "/frame?id=big")
	if !strings.Contains(body, "2701 earlier messages not shown") || !strings.Contains(body, "2001 more keys not shown") || !strings.Contains(body, "cut: 8388608 bytes") {
		t.Errorf("the frame's bounds are not said")
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	src := demoStore(t)
	marked := 0
	defer func() { t.Logf("%d runs' first bad records checked on the verify page", marked) }()
	for round := range 6 {
		dir := filepath.Join(t.TempDir(), fmt.Sprint("bad", round))
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*"))
		for _, seg := range segs {
			b, err := os.ReadFile(seg)
			if err != nil || len(b) == 0 {
				continue
			}
			end := bytes.LastIndexFunc(b, func(r rune) bool { return r != 0 }) + 1
			for range 1 + rng.IntN(4) {
				if end > 0 {
					b[rng.IntN(end)] ^= byte(1 + rng.IntN(255))
				}
			}
			os.WriteFile(seg, b, 0o600)
		}
		lb := &logBuf{}
		v, err := webview.New(webview.Options{Dir: dir, NoAuth: true, Log: slog.New(slog.NewTextHandler(lb, nil))})
		if err != nil {
			t.Fatalf("seed %d round %d: New: %v", seed, round, err)
		}
		for _, p := range []string{"/", "/run?id=agent-1", "/frame?id=agent-1", "/frame?id=agent-1&seq=3&against=1", "/ledger?id=deploy-rb",
			"/dag?id=planner", "/lineage", "/verify", "/run?id=" + url.QueryEscape(demo.XSSRun),
			"/waits?id=" + demo.WaitsRun, "/stream?id=" + demo.WaitsRun + "&name=tokens"} {
			r := httptest.NewRequest("GET", p, nil)
			w := httptest.NewRecorder()
			v.ServeHTTP(w, r)
			if w.Code >= 500 && !strings.Contains(w.Body.String(), "Cannot show this page") {
				t.Errorf("seed %d round %d %s: %d %s", seed, round, p, w.Code, w.Body)
			}
			if strings.Count(strings.ToLower(w.Body.String()), "<script") > 1 {
				t.Errorf("seed %d round %d %s: script in a damaged store's page", seed, round, p)
			}
		}
		// verify's page marks the first bad record of each run verify finds
		if rep, err := offline.Verify(ctx, dir, nil); err == nil {
			r := httptest.NewRequest("GET", "/verify", nil)
			w := httptest.NewRecorder()
			v.ServeHTTP(w, r)
			body := w.Body.String()
			for _, rr := range rep.Runs {
				if rr.Failure == nil {
					continue
				}
				marked++
				i := strings.Index(body, `<tr class="bad" data-run="`+esc(rr.RunID)+`">`)
				row := ""
				if i >= 0 {
					row = body[i:]
					row = row[:strings.Index(row, "</tr>")]
				}
				if !strings.Contains(row, `class="badrec" href="/run?id=`) || !strings.Contains(row, fmt.Sprintf(`from=%d">seq %d</a>`, rr.Failure.Seq, rr.Failure.Seq)) {
					t.Errorf("seed %d round %d: verify page does not mark run %q's first bad record at seq %d", seed, round, rr.RunID, rr.Failure.Seq)
				}
			}
		}
		v.Close()
		if strings.Contains(lb.String(), "panic") {
			t.Errorf("seed %d round %d: panic: %s", seed, round, lb)
		}
	}
}

// TestLive: a run that commits beside the view shows its new atoms, the
// event stream announces them, and the view takes no lock (the agent
// opens the store after the view did).
func TestLive(t *testing.T) {
	dir := demoStore(t)
	v, _ := newView(t, webview.Options{Dir: dir, Refresh: 20 * time.Millisecond})
	srv := httptest.NewServer(v)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/events?id=agent-1", nil)
	req.Header.Set("Authorization", "Bearer test-token-0123456789")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events: %s", ct)
	}
	events := make(chan string, 100)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				events <- string(buf[:n])
			}
			if err != nil {
				close(events)
				return
			}
		}
	}()
	if e := <-events; !strings.Contains(e, "event: gen\ndata: 1") {
		t.Fatalf("first event %q", e)
	}
	db, err := engine.Open(dir, nil) // fails if the view held the lock
	if err != nil {
		t.Fatalf("the agent cannot open the store beside the view: %v", err)
	}
	defer db.Close()
	run, err := db.Run(context.Background(), "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := run.Begin(context.Background())
	if err := a.Commit(context.Background(), new(frame.Delta).Set("live", []byte("new value 4"))); err != nil {
		t.Fatal(err)
	}
	for e := range events {
		if strings.Contains(e, "event: gen\ndata: ") && !strings.Contains(e, "data: 1\n") {
			break
		}
	}
	_, body, _ := get(t, v, "/run?id=agent-1")
	if !strings.Contains(body, `id="atom-4"`) || !strings.Contains(body, "new value 4") {
		t.Error("the timeline does not show the new atom")
	}
	if !strings.Contains(body, "badge live") {
		t.Error("the page does not say a live process holds the store")
	}
	cancel()
	io.Copy(io.Discard, resp.Body)
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "[::1]": true, "localhost": true, "::ffff:127.0.0.1": true,
		"0.0.0.0": false, "": false, "::": false, "10.0.0.1": false, "127.example.com": false, "127.0.0.1.nip.io": false,
		"localhost.example.com": false, "example.com": false,
	} {
		if got := webview.IsLoopback(host); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestPagesAreBounded: on a store of many runs the runs page shows 100 a
// page and links the others, the lineage page draws at most 2,000 runs,
// the verify page lists the failing runs and 500 intact ones, and a run's
// header names at most 100 of its forks; each says what it left out.
func TestPagesAreBounded(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "many")
	db, err := engine.Open(dir, &engine.Options{Durability: engine.Relaxed})
	if err != nil {
		t.Fatal(err)
	}
	root, err := db.Run(ctx, "root")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := root.Begin(ctx)
	if err := a.Commit(ctx, new(frame.Delta).SetObjective("many forks")); err != nil {
		t.Fatal(err)
	}
	const forks = 2100
	for i := range forks {
		if _, err := db.Fork(ctx, "root", 1, fmt.Sprintf("f%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	v, _ := newView(t, webview.Options{Dir: dir})
	rows := func(body string) int { return strings.Count(body, `<tr class="st-`) }

	_, body, _ := get(t, v, "/")
	if n := rows(body); n != 100 || !strings.Contains(body, `id="runs-total">2101<`) || !strings.Contains(body, "page 1 of 22") ||
		!strings.Contains(body, `href="/?q=&amp;status=&amp;sort=&amp;page=2" class="next"`) || strings.Contains(body, `class="prev"`) {
		t.Errorf("runs page 1: %d rows, or its total or links are wrong", n)
	}
	_, body, _ = get(t, v, "/?page=22")
	if n := rows(body); n != 1 || !strings.Contains(body, "page 22 of 22") || strings.Contains(body, `class="next"`) {
		t.Errorf("runs page 22: %d rows, want 1", n)
	}
	if _, again, _ := get(t, v, "/?page=99999999999"); rows(again) != 1 || !strings.Contains(again, "page 22 of 22") {
		t.Error("a page past the last is not the last")
	}
	_, body, _ = get(t, v, "/?q=F00")
	if n := rows(body); n != 100 || !strings.Contains(body, `id="runs-matched">100 match`) || !strings.Contains(body, "page 1 of 1") {
		t.Errorf("filter q=F00: %d rows, want f0000 to f0099", n)
	}

	_, body, _ = get(t, v, "/lineage")
	tree := body[strings.Index(body, `id="tree"`):]
	if n := strings.Count(tree, `<li class="" data-run=`); n != 2000 || !strings.Contains(body, fmt.Sprintf("%d more runs not drawn", forks+1-2000)) {
		t.Errorf("lineage: %d runs drawn, want 2000 and the rest counted", n)
	}

	_, body, _ = get(t, v, "/verify")
	if n := strings.Count(body, `<tr class="ok"`); n != 500 || !strings.Contains(body, fmt.Sprintf("%d more intact runs not listed", forks+1-500)) {
		t.Errorf("verify: %d intact runs listed, want 500 and the rest counted", n)
	}

	_, body, _ = get(t, v, "/run?id=root")
	forkLinks := body[strings.Index(body, `class="forks"`):]
	forkLinks = forkLinks[:strings.Index(forkLinks, "</p>")]
	if n := strings.Count(forkLinks, "<a "); n != 100 || !strings.Contains(forkLinks, fmt.Sprintf("and %d more", forks-100)) {
		t.Errorf("the run header names %d forks, want 100 and the rest counted", n)
	}
}
