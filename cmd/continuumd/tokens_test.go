package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// makeToken runs `continuumd token` and returns the token it printed.
func makeToken(t *testing.T, file, name, rights, runs string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := runTokenCommand([]string{"--tokens", file, "--name", name, "--rights", rights, "--runs", runs}, &out, &errb); code != 0 {
		t.Fatalf("continuumd token %s: exit %d: %s", name, code, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// TestScopedTokens: a token reaches only its runs, with only its rights:
// it cannot read, list, write, fork into or erase another run, nor touch
// the store; the --token-file token stays an admin's.
func TestScopedTokens(t *testing.T) {
	for _, frames := range []bool{false, true} {
		t.Run(transportName(frames), func(t *testing.T) { testScopedTokens(t, frames) })
	}
}

func testScopedTokens(t *testing.T, frames bool) {
	file := filepath.Join(t.TempDir(), "tokens")
	agent := makeToken(t, file, "agent7", "read,write", "agent-7-")
	reader := makeToken(t, file, "reader", "read", "*")
	eraser := makeToken(t, file, "eraser", "erase", "agent-7-")
	b, err := readSecretFile("--tokens", file)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(agent)) || bytes.Contains(b, []byte(reader)) {
		t.Fatalf("the tokens file holds a token, not its hash:\n%s", b)
	}
	set, err := parseTokens(b, file)
	if err != nil {
		t.Fatal(err)
	}
	const admin = "admin-token-0123456789abcdef"
	ts := startServer(t, "", func(c *serverConfig) { c.tokens, c.token = set, []byte(admin) })
	if frames {
		ts.useFrames()
	}

	ts.token = admin
	ts.openRun("other")
	p, _ := ts.begin("other", nil)
	ts.commit(p, map[string]any{"op": "set", "key": "secret", "value": "s"})
	ts.must(200, "GET", "/v1/stats", nil)

	ts.token = agent
	ts.openRun("agent-7-a")
	p, _ = ts.begin("agent-7-a", nil)
	ts.act(p, 0, map[string]any{"tool": "t"}, "ok")
	ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "v"})
	ts.must(200, "GET", "/v1/runs/agent-7-a/state", nil)
	ts.must(201, "POST", "/v1/runs/agent-7-a/fork", map[string]any{"at": 1, "id": "agent-7-b"})
	list := ts.must(200, "GET", "/v1/runs", nil)
	runs, _ := list.body["runs"].([]any)
	if len(runs) != 2 {
		t.Fatalf("a scoped token lists %d runs, want its 2: %s", len(runs), list)
	}
	for _, r := range runs {
		if id, _ := r.(map[string]any)["id"].(string); !strings.HasPrefix(id, "agent-7-") {
			t.Fatalf("a scoped token lists run %q: %s", id, list)
		}
	}
	op, _ := func() (string, reply) {
		ts.token = admin
		defer func() { ts.token = agent }()
		return ts.begin("other", nil)
	}()
	for _, tc := range []struct{ method, path, field string }{
		{"GET", "/v1/runs/other", "run"},
		{"GET", "/v1/runs/other/state", "run"},
		{"GET", "/v1/runs/other/atoms/1", "run"},
		{"GET", "/v1/runs/other/interrupted", "run"},
		{"GET", "/v1/runs/nosuch", "run"}, // existence is not told either
		{"PUT", "/v1/runs/other", "run"},
		{"PUT", "/v1/runs/agent-8", "run"},
		{"POST", "/v1/runs/other/attempts", "run"},
		{"POST", "/v1/runs/other/end", "run"},
		{"GET", op, "run"},
		{"POST", op + "/commit", "run"},
		{"POST", "/v1/runs/other/fork", "run"},
		{"POST", "/v1/runs/agent-7-a/erase", "run"},
		{"GET", "/v1/stats", ""},
		{"POST", "/v1/verify", ""},
	} {
		r := ts.do(tc.method, tc.path, nil)
		if tc.method == "POST" && strings.HasSuffix(tc.path, "/commit") {
			r = ts.do(tc.method, tc.path, map[string]any{"delta": []any{}})
		}
		if strings.HasSuffix(tc.path, "/fork") {
			r = ts.do(tc.method, tc.path, map[string]any{"at": 1, "id": "agent-7-c"})
		}
		wantError(t, r, 403, codeForbidden, tc.field)
	}
	// A fork of its own run into a run it does not reach.
	wantError(t, ts.do("POST", "/v1/runs/agent-7-a/fork", map[string]any{"at": 1, "id": "other-2"}), 403, codeForbidden, "id")
	// The admin's attempt of "other" was not disturbed.
	ts.token = admin
	ts.commit(op)

	ts.token = reader
	ts.must(200, "GET", "/v1/runs/other/state", nil)
	wantError(t, ts.do("PUT", "/v1/runs/reader-1", nil), 403, codeForbidden, "run")
	wantError(t, ts.do("POST", "/v1/runs/other/attempts", nil), 403, codeForbidden, "run")
	// Branches and rollback need write; the pending rollback and a diff, read.
	wantError(t, ts.do("POST", "/v1/runs/other/branches", map[string]any{"name": "b"}), 403, codeForbidden, "run")
	wantError(t, ts.do("POST", "/v1/runs/other/rollback", map[string]any{"to": 0}), 403, codeForbidden, "run")
	wantError(t, ts.do("POST", "/v1/runs/other/rollback/outcome", map[string]any{"step": 0, "result": "x"}), 403, codeForbidden, "run")
	wantError(t, ts.do("POST", "/v1/runs/other/rollback/resolve", map[string]any{"key": "k", "result": "x"}), 403, codeForbidden, "run")
	ts.must(200, "GET", "/v1/runs/other/rollback", nil)
	ts.must(200, "GET", "/v1/runs/other/diff?a=0&b=last", nil)

	ts.token = eraser
	wantError(t, ts.do("GET", "/v1/runs/agent-7-a/state", nil), 403, codeForbidden, "run")
	wantError(t, ts.do("POST", "/v1/runs/other/erase", nil), 403, codeForbidden, "run")
	wantError(t, ts.do("POST", "/v1/runs/agent-7-a/erase", nil), 409, codeKeyring, "") // allowed: the store says no
	// A deletion refused for a fork the token does not reach does not
	// name it (runs it does not cover are not shown to it).
	ts.token = agent
	ts.openRun("agent-7-c")
	p, _ = ts.begin("agent-7-c", nil)
	ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "v"})
	ts.token = admin
	ts.must(201, "POST", "/v1/runs/agent-7-c/fork", map[string]any{"at": 1, "id": "zz-hidden"})
	ts.token = agent
	ts.must(200, "POST", "/v1/runs/agent-7-c/end", map[string]any{"status": "completed"})
	ts.token = eraser
	r := ts.do("POST", "/v1/runs/agent-7-c/delete", nil)
	wantError(t, r, 409, codeRunHasForks, "")
	if strings.Contains(fmt.Sprint(r.body), "zz-hidden") {
		t.Fatalf("a scoped token's refused deletion names a run it does not reach: %s", r)
	}
	ts.must(200, "GET", "/v1/health", nil)
}

// TestAuthRateLimit: after authBurst failures from one address every
// request from it is 429 auth_rate_limited, the right token's too, until
// the bucket refills.
func TestAuthRateLimit(t *testing.T) {
	for _, frames := range []bool{false, true} {
		t.Run(transportName(frames), func(t *testing.T) { testAuthRateLimit(t, frames) })
	}
	testAuthBuckets(t)
}

func testAuthRateLimit(t *testing.T, frames bool) {
	const good = "good-token-0123456789abcdef"
	ts := startServer(t, "", func(c *serverConfig) { c.token = []byte(good) })
	if frames {
		ts.useFrames()
	}
	ts.token = "wrong-token-0123456789abcdef"
	for i := range authBurst {
		if r := ts.do("GET", "/v1/health", nil); r.status != 401 {
			t.Fatalf("failure %d: %s", i, r)
		}
	}
	r := ts.do("GET", "/v1/health", nil)
	wantError(t, r, 429, codeAuthRateLimited, "")
	if r.header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %s", r)
	}
	ts.token = good
	wantError(t, ts.do("GET", "/v1/health", nil), 429, codeAuthRateLimited, "")
	waitFor(t, 30*time.Second, "the failures' bucket to refill", func() bool {
		return ts.do("GET", "/v1/health", nil).status == 200
	})
	ts.token = ""
	if r := ts.do("GET", "/v1/health", nil); r.status != 401 || r.header.Get("Www-Authenticate") == "" {
		t.Fatalf("no token: %s %v", r, r.header)
	}
}

// testAuthBuckets: the bucket itself, on a clock of its own.
func testAuthBuckets(t *testing.T) {
	var f authFailures
	now := time.Unix(1000, 0)
	for range authBurst {
		if _, b := f.blocked("a", now); b {
			t.Fatal("blocked before authBurst failures")
		}
		f.fail("a", now)
	}
	if _, b := f.blocked("a", now); !b {
		t.Fatal("not blocked after authBurst failures")
	}
	if _, b := f.blocked("b", now); b {
		t.Fatal("another address is blocked")
	}
	if _, b := f.blocked("a", now.Add(authRefill)); b {
		t.Fatal("still blocked after a refill")
	}
	if _, b := f.blocked("a", now.Add(authBurst*authRefill)); b || len(f.buckets) != 0 {
		t.Fatalf("a full bucket is kept: %d", len(f.buckets))
	}
	// Failures from ever more addresses hold at most authBuckets buckets,
	// and the newest address's failure is counted.
	for i := range authBuckets + 100 {
		f.fail(fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&0xff, i&0xff), now)
	}
	if len(f.buckets) != authBuckets {
		t.Fatalf("%d buckets after failures from %d addresses, want %d", len(f.buckets), authBuckets+100, authBuckets)
	}
	if b := f.buckets[fmt.Sprintf("10.%d.%d.%d", (authBuckets+99)>>16, (authBuckets+99)>>8&0xff, (authBuckets+99)&0xff)]; b == nil || b.tokens != authBurst-1 {
		t.Fatalf("the newest address's bucket: %+v", b)
	}
}

// TestTokensFile: the tokens file's mistakes are refused with the line
// and the reason; continuumd token refuses what the server would.
func TestTokensFile(t *testing.T) {
	h := "sha256:" + strings.Repeat("ab", 32)
	h2 := "sha256:" + strings.Repeat("cd", 32)
	for _, tc := range []struct{ name, file, want string }{
		{"empty", "# nothing\n\n", "holds no token"},
		{"three fields", "a " + h + " read\n", "3 fields"},
		{"bad name", "a/b " + h + " read *\n", "token name"},
		{"no sha256 prefix", "a " + strings.Repeat("ab", 32) + " read *\n", "sha256:"},
		{"short hash", "a sha256:abcd read *\n", "64 hex digits"},
		{"unknown right", "a " + h + " read,delete *\n", "unknown right"},
		{"star in a prefix", "a " + h + " read agent-*\n", "without '*'"},
		{"admin on a prefix", "a " + h + " admin agent-\n", "must be \"*\""},
		{"a name twice", "a " + h + " read *\na " + h2 + " read *\n", "given twice"},
		{"a hash twice", "a " + h + " read *\nb " + h + " read *\n", "the hash of token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTokens([]byte(tc.file), "F")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	file := filepath.Join(t.TempDir(), "tokens")
	makeToken(t, file, "a", "read", "x-")
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the tokens file: %v %v", st.Mode(), err)
	}
	for _, args := range [][]string{
		{"--tokens", file, "--name", "a", "--rights", "read"},                 // a name twice
		{"--tokens", file, "--name", "b", "--rights", "admin", "--runs", "x"}, // admin on a prefix
		{"--tokens", file, "--name", "c", "--rights", "fly"},
		{"--tokens", file, "--name", "d"},
	} {
		var out, errb bytes.Buffer
		if code := runTokenCommand(args, &out, &errb); code == 0 || out.Len() != 0 {
			t.Fatalf("continuumd token %q: exit %d, printed %q", args, code, out.String())
		}
	}
	b, _ := os.ReadFile(file)
	if n := strings.Count(string(b), "\n"); n != 1 {
		t.Fatalf("refused tokens were written: %q", b)
	}
	// A tokens file others can read is refused, as the server refuses it.
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := runTokenCommand([]string{"--tokens", file, "--name", "e", "--rights", "read"}, &out, &errb); code == 0 || out.Len() != 0 ||
		!strings.Contains(errb.String(), "readable by others") {
		t.Fatalf("continuumd token on a file of mode 0644: exit %d, printed %q, %q", code, out.String(), errb.String())
	}
	if b2, _ := os.ReadFile(file); !bytes.Equal(b, b2) {
		t.Fatalf("a token was added to a file of mode 0644: %q", b2)
	}
}
