package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/continuumdb/continuum/internal/wireframe"
)

// The tests in this file run the server as a process of its own: this test
// binary, started again with its arguments in serveArgsEnv, so that it can
// be killed with SIGKILL or stopped with SIGTERM like the real one.
const serveArgsEnv = "CONTINUUMD_TEST_SERVE_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(serveArgsEnv); args != "" {
		os.Exit(run(strings.Split(args, "\x1f"), os.Stderr))
	}
	os.Exit(m.Run())
}

// lockedBuffer is the server process's stderr, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proc is a server process.
type proc struct {
	t      *testing.T
	args   []string
	cmd    *exec.Cmd
	stderr *lockedBuffer
	exited chan struct{}
	err    error
}

func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, args: args}
	p.start()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) start() {
	p.t.Helper()
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), serveArgsEnv+"="+strings.Join(p.args, "\x1f"))
	p.stderr = &lockedBuffer{}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.exited = make(chan struct{})
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	waitFor(p.t, hangGuard, "the server to log that it serves", func() bool {
		select {
		case <-p.exited:
			p.t.Fatalf("the server exited: %v\n%s", p.err, p.stderr)
		default:
		}
		return strings.Contains(p.stderr.String(), "continuumd: serving")
	})
}

func (p *proc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// unixClient is a testServer shell that talks to a process's socket.
func unixClient(t *testing.T, sock string) *testServer {
	ts := &testServer{t: t, sock: sock, closed: true}
	ts.cl = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}, Timeout: hangGuard}
	return ts
}

// framesUnixClient is unixClient over continuum-frames/1.
func framesUnixClient(t *testing.T, sock string) *testServer {
	return &testServer{t: t, sock: sock, closed: true, frames: true, cl: newFramesClient(sock)}
}

// TestServerKilledRestartsLikeTheLibrary: SIGKILL of the server between an
// action's execute and its outcome, and after an outcome was
// acknowledged: the restarted server reports the atom interrupted with
// both actions, the acknowledged one answers done without executing, the
// other in_doubt.
func TestServerKilledRestartsLikeTheLibrary(t *testing.T) {
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	p := startProc(t, "--store", store, "--socket", sock)
	cl := unixClient(t, sock)
	cl.openRun("r")
	a, _ := cl.begin("r", nil)
	wantStatus(t, cl.act(a, 0, map[string]any{"tool": "a"}, "ra"), "done")
	exec := cl.must(200, "POST", a+"/calls/1", map[string]any{"tool": "b"})
	wantStatus(t, exec, "execute")
	p.kill()
	cl.cl.CloseIdleConnections()
	p.start()

	a2, b := cl.begin("r", nil)
	intr, _ := b.body["interrupted"].(map[string]any)
	if intr == nil || intr["reason"] != "restart" {
		t.Fatalf("begin after SIGKILL: %s", b)
	}
	states := map[string]string{}
	for _, x := range intr["actions"].([]any) {
		m := x.(map[string]any)
		states[m["tool"].(string)] = m["status"].(string)
	}
	if states["a"] != "done" || states["b"] != "in_doubt" {
		t.Fatalf("interrupted actions %v, want a done and b in_doubt: %s", states, b)
	}
	r := cl.must(200, "POST", a2+"/calls/0", map[string]any{"tool": "a"})
	if r.str("status") != "done" || r.str("result") != "ra" || r.body["replayed"] != true {
		t.Fatalf("acknowledged before the kill: %s", r)
	}
	r = cl.must(200, "POST", a2+"/calls/1", map[string]any{"tool": "b"})
	if r.str("status") != "in_doubt" || r.str("key") != exec.str("key") {
		t.Fatalf("executing at the kill: %s", r)
	}
	cl.must(200, "POST", a2+"/calls/1/resolve", map[string]any{"result": "rb"})
	cl.commit(a2)
}

// downstream is a fake outside world for the kill tests: it counts the
// effects per idempotency key and remembers their results. When
// killAfter is set, the next effect calls it (between the effect and the
// client's report of it) before it returns.
type downstream struct {
	mu        sync.Mutex
	effects   map[string]int
	results   map[string]string
	killAfter func()
}

func (d *downstream) exec(key string) string {
	d.mu.Lock()
	d.effects[key]++
	r := "done:" + key
	d.results[key] = r
	kill := d.killAfter
	d.killAfter = nil
	d.mu.Unlock()
	if kill != nil {
		kill()
	}
	return r
}

func (d *downstream) lookup(key string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.results[key]
	return r, ok
}

// TestServerKilledUnderLoad: clients run atoms of one action each
// (executed against a fake downstream) while the server is SIGKILLed
// and restarted at random moments. After it all: every acknowledged atom
// is in the store, no key took effect twice, every in-doubt action was
// reconciled, and the store verifies.
func TestServerKilledUnderLoad(t *testing.T) {
	for _, frames := range []bool{false, true} {
		t.Run(transportName(frames), func(t *testing.T) { testServerKilledUnderLoad(t, frames) })
	}
}

func testServerKilledUnderLoad(t *testing.T, frames bool) {
	kills, clients, target := 10, 4, 20
	if testing.Short() {
		kills, clients, target = 4, 3, 5
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := mrand.New(mrand.NewPCG(uint64(seed), 1))
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	p := startProc(t, "--store", store, "--socket", sock)
	ds := &downstream{effects: map[string]int{}, results: map[string]string{}}
	var mu sync.Mutex
	acked := map[string]int{}
	inDoubt := 0

	// step runs one atom of run to its commit, or returns false at the
	// first transport error (the server died: the caller begins again).
	step := func(cl *testServer, run string) (int, bool) {
		r, ok := tryDo(cl, "POST", "/v1/runs/"+run+"/attempts", map[string]any{"takeover": true})
		if !ok || r.status != 201 {
			return 0, false
		}
		pa := "/v1/runs/" + run + "/attempts/" + r.str("attempt")
		seq := int(r.num("seq"))
		call := map[string]any{"tool": "charge", "args": map[string]any{"run": run, "seq": seq}}
		r, ok = tryDo(cl, "POST", pa+"/calls/0", call)
		if !ok || r.status != 200 {
			return 0, false
		}
		switch r.str("status") {
		case "execute":
			res := ds.exec(r.str("key"))
			if r, ok = tryDo(cl, "POST", pa+"/calls/0/outcome", map[string]any{"result": res}); !ok || r.status != 200 {
				return 0, false
			}
		case "in_doubt":
			mu.Lock()
			inDoubt++
			mu.Unlock()
			res, found := ds.lookup(r.str("key"))
			body := map[string]any{"result": res}
			if !found {
				body = map[string]any{"failed": "no trace", "retry": true}
			}
			r, ok = tryDo(cl, "POST", pa+"/calls/0/resolve", body)
			if !ok || r.status != 200 {
				return 0, false
			}
			if r.str("status") == "execute" {
				res := ds.exec(r.str("key"))
				if r, ok = tryDo(cl, "POST", pa+"/calls/0/outcome", map[string]any{"result": res}); !ok || r.status != 200 {
					return 0, false
				}
			}
		case "done":
		default:
			t.Errorf("call: %s", r)
			return 0, false
		}
		if r.str("status") != "done" {
			t.Errorf("run %s seq %d: %s", run, seq, r)
			return 0, false
		}
		c, ok := tryDo(cl, "POST", pa+"/commit", map[string]any{"delta": []any{map[string]any{"op": "set", "key": "seq", "value": fmt.Sprint(seq)}}})
		if !ok || c.status != 200 {
			return 0, false
		}
		return seq, true
	}

	setup := unixClient(t, sock)
	for i := 0; i < clients; i++ {
		setup.openRun(fmt.Sprint("load-", i))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		run := fmt.Sprint("load-", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := unixClient(t, sock)
			if frames {
				cl = framesUnixClient(t, sock)
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				seq, ok := step(cl, run)
				if !ok {
					cl.cl.CloseIdleConnections()
					time.Sleep(5 * time.Millisecond)
					continue
				}
				mu.Lock()
				// seq may pass acked+1: a commit that landed but whose
				// answer the kill cut off is not acknowledged.
				if seq <= acked[run] {
					t.Errorf("run %s committed seq %d after acknowledged seq %d", run, seq, acked[run])
				}
				acked[run] = seq
				mu.Unlock()
			}
		}()
	}
	for k := 0; k < kills; k++ {
		if k%2 == 0 {
			// SIGKILL at a random moment.
			time.Sleep(time.Duration(10+rng.IntN(100)) * time.Millisecond)
			p.kill()
		} else {
			// SIGKILL right after an effect, before its outcome reaches
			// the server: the action must come back in doubt.
			killed := make(chan struct{})
			ds.mu.Lock()
			ds.killAfter = func() { p.kill(); close(killed) }
			ds.mu.Unlock()
			select {
			case <-killed:
			case <-time.After(hangGuard):
				t.Fatal("no effect happened to kill after")
			}
		}
		mu.Lock()
		snapshot := map[string]int{}
		for r, s := range acked {
			snapshot[r] = s
		}
		mu.Unlock()
		p.start()
		for run, seq := range snapshot {
			info := setup.must(200, "GET", "/v1/runs/"+run, nil)
			if int(info.num("last_seq")) < seq {
				t.Fatalf("kill %d: run %s acknowledged seq %d, the store has %v", k, run, seq, info.num("last_seq"))
			}
		}
	}
	waitFor(t, hangGuard, "every run to reach its target", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := 0; i < clients; i++ {
			if acked[fmt.Sprint("load-", i)] < target {
				return false
			}
		}
		return true
	})
	close(stop)
	wg.Wait()
	for key, n := range ds.effects {
		if n != 1 {
			t.Errorf("key %s took effect %d times", key, n)
		}
	}
	total := 0
	for run, seq := range acked {
		last := int(setup.must(200, "GET", "/v1/runs/"+run, nil).num("last_seq"))
		if last < seq {
			t.Errorf("run %s: seq %d acknowledged, the store has %d", run, seq, last)
		}
		total += last
	}
	// Every committed atom made one action, under a key of its own, which
	// took effect once; the atom each client was in when it stopped may
	// have had its effect too.
	if len(ds.effects) < total || len(ds.effects) > total+clients {
		t.Errorf("%d keys took effect for %d committed atoms (one each, and at most one per run in flight)", len(ds.effects), total)
	}
	rep := setup.must(200, "POST", "/v1/verify", map[string]any{"deep": true})
	if rep.body["ok"] != true {
		t.Fatalf("verify after the kills: %s", rep)
	}
	if inDoubt == 0 {
		t.Errorf("no action came back in doubt, though the server was killed after effects")
	}
	t.Logf("%d kills, %d atoms, %d in-doubt actions reconciled", kills, total, inDoubt)
}

// TestSIGTERMDrains: SIGTERM while clients commit: the server exits 0,
// removes its socket, and every commit it acknowledged is in the store.
func TestSIGTERMDrains(t *testing.T) {
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	p := startProc(t, "--store", store, "--socket", sock)
	cl := unixClient(t, sock)
	cl.openRun("r")
	var mu sync.Mutex
	last := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			r, ok := tryDo(cl, "POST", "/v1/runs/r/attempts", map[string]any{})
			if !ok || r.status != 201 {
				return
			}
			c, ok := tryDo(cl, "POST", "/v1/runs/r/attempts/"+r.str("attempt")+"/commit", map[string]any{"delta": []any{}})
			if !ok || c.status != 200 {
				return
			}
			mu.Lock()
			last = int(c.num("seq"))
			mu.Unlock()
		}
	}()
	waitFor(t, hangGuard, "commits", func() bool { mu.Lock(); defer mu.Unlock(); return last >= 5 })
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.exited
	<-done
	if p.err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", p.err, p.stderr)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("the socket is still there after a graceful stop: %v", err)
	}
	p.start()
	info := cl.must(200, "GET", "/v1/runs/r", nil)
	if int(info.num("last_seq")) < last {
		t.Fatalf("acknowledged seq %d, the store has %v", last, info.num("last_seq"))
	}
}

// TestTCPWithTokenAndTLS: --listen serves TCP only with the token, over
// TLS when given a certificate; the socket stays 0600.
func TestTCPWithTokenAndTLS(t *testing.T) {
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("tok-0123456789abcdef\n"), 0o600)
	certFile, keyFile, pool := selfSigned(t, dir)
	p := startProc(t, "--store", store, "--socket", sock, "--listen", "127.0.0.1:0", "--token-file", tokenFile,
		"--tls-cert", certFile, "--tls-key", keyFile)
	st, err := os.Stat(sock)
	if err != nil || st.Mode().Perm() != 0o600 || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %v mode %v", err, st.Mode())
	}
	m := regexp.MustCompile(`tcp:(127\.0\.0\.1:[0-9]+)`).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no TCP address in the log:\n%s", p.stderr)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: hangGuard}
	get := func(token string) int {
		req, _ := http.NewRequest("GET", "https://"+m[1]+"/v1/health", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := get(""); s != 401 {
		t.Fatalf("TCP without a token: %d", s)
	}
	if s := get("tok-0123456789abcdeX"); s != 401 {
		t.Fatalf("TCP with a wrong token: %d", s)
	}
	if s := get("tok-0123456789abcdef"); s != 200 {
		t.Fatalf("TCP with the token: %d", s)
	}
	// The web view's session cookie, set over TLS, is Secure: a browser
	// never sends it over plain HTTP to the same host.
	nc := &http.Client{Transport: hc.Transport, Timeout: hangGuard,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := nc.Get("https://" + m[1] + "/view/?token=tok-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cs := resp.Cookies(); len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly {
		t.Fatalf("the view's login over TLS: status %d, cookies %v; want one Secure, HttpOnly cookie", resp.StatusCode, resp.Header["Set-Cookie"])
	}
	// Frames over TLS, with the token and without.
	hc = &http.Client{Transport: &wireframe.Transport{Dial: func(ctx context.Context) (net.Conn, error) {
		d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}
		return d.DialContext(ctx, "tcp", m[1])
	}}, Timeout: hangGuard}
	if s := get("tok-0123456789abcdef"); s != 200 {
		t.Fatalf("frames over TLS with the token: %d", s)
	}
	if s := get(""); s != 401 {
		t.Fatalf("frames over TLS without a token: %d", s)
	}
	// The socket takes the token too, when the server has one.
	cl := unixClient(t, sock)
	wantError(t, cl.do("GET", "/v1/health", nil), 401, codeUnauthorized, "")
	// Plain HTTP to the TLS port is not served.
	resp, err = http.Get("http://" + m[1] + "/v1/health")
	if err == nil {
		if resp.StatusCode < 400 {
			t.Fatalf("plain HTTP answered %d", resp.StatusCode)
		}
		resp.Body.Close()
	}
}

func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "continuumd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestConfig: the command line refuses what would serve insecurely or
// cannot work, saying why.
func TestConfig(t *testing.T) {
	dir := shortTempDir(t)
	open := filepath.Join(dir, "open-token")
	os.WriteFile(open, []byte("tok-0123456789abcdef"), 0o644)
	short := filepath.Join(dir, "short-token")
	os.WriteFile(short, []byte("abc"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--store is required"},
		{[]string{"--store", "s", "x"}, "unexpected arguments"},
		{[]string{"--store", "s", "--listen", "127.0.0.1:7070"}, "--listen needs --token-file"},
		{[]string{"--store", "s", "--listen", "0.0.0.0:7070", "--token-file", "f"}, "not a loopback address"},
		{[]string{"--store", "s", "--no-socket"}, "--no-socket needs --listen"},
		{[]string{"--store", "s", "--tls-cert", "c"}, "go together"},
		{[]string{"--store", "s", "--lease", "1ms"}, "--lease"},
		{[]string{"--store", "s", "--max-body", "10"}, "--max-body"},
		{[]string{"--store", "s", "--durability", "sloppy"}, "strict or relaxed"},
	} {
		_, err := parseConfig(tc.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"--store", filepath.Join(dir, "s"), "--listen", "127.0.0.1:0", "--token-file", open}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "chmod 600") {
		t.Errorf("a token file readable by others: exit %d, %s", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"--store", filepath.Join(dir, "s"), "--listen", "127.0.0.1:0", "--token-file", short}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "at least 16") {
		t.Errorf("a short token: exit %d, %s", code, stderr.String())
	}
	stderr.Reset()
	notSock := filepath.Join(dir, "plain")
	os.WriteFile(notSock, nil, 0o600)
	if code := run([]string{"--store", filepath.Join(dir, "s"), "--socket", notSock}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "not a socket") {
		t.Errorf("a socket path that is a file: exit %d, %s", code, stderr.String())
	}
}

// TestSocketOfABusyServer: a socket whose server does not accept (its
// queue of connections full: a connect fails with EAGAIN, not
// ECONNREFUSED) is a live server's: listenUnix refuses it and leaves the
// file, where only a socket nobody listens on is replaced.
func TestSocketOfABusyServer(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "busy.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	open := true
	defer func() {
		if open {
			syscall.Close(fd)
		}
	}()
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil { // a queue of one, never accepted
		t.Fatal(err)
	}
	// Fill the queue: connects succeed until it is full, then fail with
	// EAGAIN.
	var full error
	for i := 0; i < 64 && full == nil; i++ {
		c, err := net.DialTimeout("unix", sock, time.Second)
		if err != nil {
			full = err
			break
		}
		defer c.Close()
	}
	if !errors.Is(full, syscall.EAGAIN) {
		t.Skipf("the queue did not fill with EAGAIN here: %v", full)
	}
	if l, err := listenUnix(sock); err == nil || !strings.Contains(err.Error(), "cannot be told") {
		if l != nil {
			l.Close()
		}
		t.Fatalf("listenUnix over a busy server's socket: %v", err)
	}
	if st, err := os.Lstat(sock); err != nil || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the busy server's socket is gone: %v", err)
	}
	// Once nobody listens, the socket is stale and replaced.
	syscall.Close(fd)
	open = false
	l, err := listenUnix(sock)
	if err != nil {
		t.Fatalf("listenUnix over a stale socket: %v", err)
	}
	l.Close()
}
