package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/seal"
)

// writeKeyring writes a keyring file of one key, current, with mode perm,
// and returns its name.
func writeKeyring(t *testing.T, dir string, perm os.FileMode) string {
	t.Helper()
	name := filepath.Join(dir, "store.keyring")
	b := seal.AppendKeyringFile(nil, map[string][]byte{"k1": bytes.Repeat([]byte{7}, seal.KeySize)}, "k1")
	if err := os.WriteFile(name, b, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return name
}

// memory returns the run's memory at seq ("" for its last) as the state
// answers it.
func memory(t *testing.T, ts *testServer, run, seq string) map[string]any {
	t.Helper()
	path := "/v1/runs/" + run + "/state"
	if seq != "" {
		path += "?seq=" + seq
	}
	m, _ := ts.must(200, "GET", path, nil).body["memory"].(map[string]any)
	return m
}

// TestEraseOverTheWire: a server with --keyring and --erasable serves an
// encrypted store; erasing a memory key through the API leaves the run's
// state without it at every seq (other keys kept, a new value readable),
// erasing the run leaves it gone (410, also after a restart), and each
// refusal of the engine has its code.
func TestEraseOverTheWire(t *testing.T) {
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	ring := writeKeyring(t, dir, 0o600)
	p := startProc(t, "--store", store, "--socket", sock, "--keyring", ring,
		"--erasable", "email", "--erasable", "contact/phone", "--unsafe-no-sync")
	cl := unixClient(t, sock)

	cl.openRun("r")
	a, _ := cl.begin("r", nil)
	cl.commit(a,
		map[string]any{"op": "set", "key": "email", "value": "ada@example.com"},
		map[string]any{"op": "set", "key": "contact/phone", "value": "+44 20 7946 0000"},
		map[string]any{"op": "set", "key": "name", "value": "Ada"})
	a, _ = cl.begin("r", nil)
	cl.commit(a, map[string]any{"op": "set", "key": "email", "value": "ada@example.org"})
	if m := memory(t, cl, "r", ""); m["email"] != "ada@example.org" || m["contact/phone"] != "+44 20 7946 0000" || m["name"] != "Ada" {
		t.Fatalf("state before erasure: %v", m)
	}

	// One memory key: both its values (seq 1 and 2) are gone.
	e := cl.must(200, "POST", "/v1/runs/r/memory/email/erase", map[string]any{"reason": "GDPR request 17"})
	if e.str("run") != "r" || e.str("key") != "email" || e.num("seq") != 2 || e.str("reason") != "GDPR request 17" ||
		len(e.str("head")) != 64 || e.str("at") == "" {
		t.Fatalf("erase key: %s", e)
	}
	if nos, _ := e.body["key_nos"].([]any); len(nos) == 0 {
		t.Fatalf("erase key names no data key: %s", e)
	}
	for _, seq := range []string{"", "1", "2"} {
		m := memory(t, cl, "r", seq)
		if _, ok := m["email"]; ok || m["name"] != "Ada" || m["contact/phone"] != "+44 20 7946 0000" {
			t.Fatalf("state at seq %q after erasing email: %v", seq, m)
		}
	}
	// A key with a slash, percent-encoded in the path.
	e = cl.must(200, "POST", "/v1/runs/r/memory/contact%2Fphone/erase", nil)
	if e.str("key") != "contact/phone" || e.str("reason") != "erased by request" {
		t.Fatalf("erase of contact/phone: %s", e)
	}
	if _, ok := memory(t, cl, "r", "")["contact/phone"]; ok {
		t.Fatal("contact/phone is still in the state after its erasure")
	}
	wantError(t, cl.do("POST", "/v1/runs/r/memory/email/erase", nil), 409, codeNothingToErase, "-")
	wantError(t, cl.do("POST", "/v1/runs/r/memory/name/erase", nil), 409, codeNotErasable, "-")
	wantError(t, cl.do("POST", "/v1/runs/r/memory/never-written/erase", nil), 409, codeNotErasable, "-")
	wantError(t, cl.do("POST", "/v1/runs/nope/memory/email/erase", nil), 404, codeRunNotFound, "run")
	wantError(t, cl.do("POST", "/v1/runs/r/memory/email/erase", map[string]any{"reason": strings.Repeat("x", 5000)}), 400, codeBadRequest, "reason")
	wantError(t, cl.do("POST", "/v1/runs/r/memory/email/erase", map[string]any{"why": "x"}), 400, codeBadRequest, "why")
	wantError(t, cl.do("POST", "/v1/runs/r/memory/"+strings.Repeat("k", 5000)+"/erase", nil), 400, codeBadRequest, "key")

	// A value written after the erasure takes a new data key, and reads.
	a, _ = cl.begin("r", nil)
	cl.commit(a, map[string]any{"op": "set", "key": "email", "value": "ada@example.net"})
	if m := memory(t, cl, "r", ""); m["email"] != "ada@example.net" {
		t.Fatalf("a value written after the erasure: %v", m)
	}
	if _, ok := memory(t, cl, "r", "2")["email"]; ok {
		t.Fatal("the erased value at seq 2 came back after a new one was written")
	}

	// The run: refused while active, and while a fork is not erased.
	wantError(t, cl.do("POST", "/v1/runs/r/erase", map[string]any{"reason": "GDPR request 18"}), 409, codeRunNotEnded, "-")
	wantError(t, cl.do("POST", "/v1/runs/nope/erase", nil), 404, codeRunNotFound, "run")
	cl.must(201, "POST", "/v1/runs/r/fork", map[string]any{"at": 1, "id": "f"})
	cl.must(200, "POST", "/v1/runs/r/end", map[string]any{"status": "completed"})
	wantError(t, cl.do("POST", "/v1/runs/r/erase", nil), 409, codeRunHasForks, "-")
	wantError(t, cl.do("POST", "/v1/runs/r/erase", map[string]any{"reason": strings.Repeat("x", 5000)}), 400, codeBadRequest, "reason")
	cl.must(200, "POST", "/v1/runs/f/end", map[string]any{"status": "cancelled"})
	if d := cl.must(200, "POST", "/v1/runs/f/erase", nil); d.str("id") != "f" || d.body["erasure"] == nil {
		t.Fatalf("erase of the fork: %s", d)
	}
	d := cl.must(200, "POST", "/v1/runs/r/erase", map[string]any{"reason": "GDPR request 18"})
	er, _ := d.body["erasure"].(map[string]any)
	if d.str("id") != "r" || d.num("seq") != 5 || d.str("reason") != "GDPR request 18" || len(d.str("final")) != 64 ||
		er == nil || er["seq"] != float64(5) || er["reason"] != "GDPR request 18" || er["head"] != d.str("head") {
		t.Fatalf("erase of the run (three atoms, its end at seq 4): %s", d)
	}
	again := cl.must(200, "POST", "/v1/runs/r/erase", nil)
	if again.str("head") != d.str("head") || again.str("reason") != "GDPR request 18" {
		t.Fatalf("a repeated erase answers the erasure: %s, then %s", d, again)
	}
	gone := func() {
		t.Helper()
		for _, rq := range [][2]string{{"GET", "/v1/runs/r"}, {"GET", "/v1/runs/r/state"}, {"GET", "/v1/runs/r/atoms/1"},
			{"PUT", "/v1/runs/r"}, {"POST", "/v1/runs/r/attempts"}, {"POST", "/v1/runs/r/memory/email/erase"},
			{"POST", "/v1/runs/r/fork"}} {
			body := any(nil)
			if rq[0] == "POST" {
				body = map[string]any{}
			}
			if rq[1] == "/v1/runs/r/fork" {
				body = map[string]any{"at": 1, "id": "g"}
			}
			wantError(t, cl.do(rq[0], rq[1], body), 410, codeRunDeleted, "-")
		}
		for _, run := range cl.must(200, "GET", "/v1/runs", nil).body["runs"].([]any) {
			if id := run.(map[string]any)["id"]; id == "r" || id == "f" {
				t.Fatalf("the runs list erased run %v", id)
			}
		}
	}
	gone()
	p.kill()
	cl.cl.CloseIdleConnections()
	p.start()
	gone()
	if d := cl.must(200, "POST", "/v1/runs/r/erase", nil); d.str("head") != again.str("head") {
		t.Fatalf("erase after a restart: %s, want the erasure %s", d, again)
	}
}

// TestErasePlaintextStore: a server without --keyring answers both
// erasures with the keyring error, and erases nothing.
func TestErasePlaintextStore(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	a, _ := ts.begin("r", nil)
	ts.commit(a, map[string]any{"op": "set", "key": "email", "value": "ada@example.com"})
	wantError(t, ts.do("POST", "/v1/runs/r/memory/email/erase", nil), 409, codeKeyring, "-")
	ts.must(200, "POST", "/v1/runs/r/end", map[string]any{"status": "completed"})
	wantError(t, ts.do("POST", "/v1/runs/r/erase", map[string]any{"reason": "r"}), 409, codeKeyring, "-")
	if m := memory(t, ts, "r", ""); m["email"] != "ada@example.com" {
		t.Fatalf("state after refused erasures: %v", m)
	}
	ts.must(200, "GET", "/v1/runs/r", nil)
}

// TestEraseConfig: --erasable needs --keyring; the keyring file must be
// private and well formed; an encrypted store does not open without it.
func TestEraseConfig(t *testing.T) {
	dir := shortTempDir(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--store", "s", "--erasable", "email"}, "--erasable needs --keyring"},
		{[]string{"--store", "s", "--keyring", "k", "--erasable", ""}, "a memory key of 1 to"},
	} {
		_, err := parseConfig(tc.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
	c, err := parseConfig([]string{"--store", "s", "--keyring", "k", "--erasable", "a", "--erasable", "b"}, &bytes.Buffer{})
	if err != nil || c.keyring != "k" || strings.Join(c.erasable, ",") != "a,b" {
		t.Fatalf("parseConfig: %+v, %v", c, err)
	}

	var stderr bytes.Buffer
	open := writeKeyring(t, t.TempDir(), 0o644)
	if code := run([]string{"--store", filepath.Join(dir, "s"), "--keyring", open}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "chmod 600") {
		t.Errorf("a keyring readable by others: exit %d, %s", code, stderr.String())
	}
	stderr.Reset()
	bad := filepath.Join(dir, "bad.keyring")
	os.WriteFile(bad, []byte("not a keyring\n"), 0o600)
	if code := run([]string{"--store", filepath.Join(dir, "s"), "--keyring", bad}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "--keyring "+bad) {
		t.Errorf("a malformed keyring: exit %d, %s", code, stderr.String())
	}

	// An encrypted store, made by a server with the keyring, refuses one
	// without it.
	store, sock := filepath.Join(dir, "e"), filepath.Join(dir, "e.sock")
	p := startProc(t, "--store", store, "--socket", sock, "--keyring", writeKeyring(t, dir, 0o600))
	p.cmd.Process.Signal(os.Interrupt)
	<-p.exited
	stderr.Reset()
	if code := run([]string{"--store", store, "--socket", sock}, &stderr); code != 1 || !strings.Contains(strings.ToLower(stderr.String()), "keyring") {
		t.Errorf("an encrypted store without --keyring: exit %d, %s", code, stderr.String())
	}
}
