package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/continuumdb/continuum/ledger"
)

// stateAt is the run's state at seq as the server answers it, without the
// field naming the run (a fork's state is its source's, under its own id).
func (ts *testServer) stateAt(run string, seq int) string {
	ts.t.Helper()
	r := ts.must(200, "GET", fmt.Sprintf("/v1/runs/%s/state?seq=%d", run, seq), nil)
	if r.str("run") != run || r.num("seq") != float64(seq) {
		ts.t.Fatalf("state of %s at %d: %s", run, seq, r)
	}
	delete(r.body, "run")
	b, err := json.Marshal(r.body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return string(b)
}

// commitSeq commits one atom of run that sets k to v and appends a message.
func (ts *testServer) commitSeq(run, v string) {
	ts.t.Helper()
	p, _ := ts.begin(run, nil)
	ts.commit(p, map[string]any{"op": "set", "key": "k", "value": v},
		map[string]any{"op": "append_message", "role": "assistant", "content": "at " + v})
}

func wantFork(t *testing.T, r reply, id, parent string, at int) {
	t.Helper()
	if r.str("id") != id || r.str("parent") != parent || r.num("forked_at") != float64(at) || r.str("status") != "active" {
		t.Fatalf("got %s, want run %q forked from %q at %d", r, id, parent, at)
	}
}

// TestForkOverTheWire: a fork's state at its fork point is its source's
// there, its seqs below answer from the source's history, its own atoms
// begin after it and leave the source alone; a fork of a fork; a fork
// repeated after a lost answer; all of it after a restart too.
func TestForkOverTheWire(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("src")
	p, _ := ts.begin("src", nil)
	ts.commit(p, map[string]any{"op": "set_objective", "text": "deploy"}, map[string]any{"op": "set", "key": "k", "value": "1"})
	ts.commitSeq("src", "2")
	ts.commitSeq("src", "3")

	f := ts.must(201, "POST", "/v1/runs/src/fork", map[string]any{"at": 2, "id": "f"})
	wantFork(t, f, "f", "src", 2)
	if f.num("last_seq") != 2 || f.body["lease"] != nil {
		t.Fatalf("a new fork: %s", f)
	}
	for seq := 0; seq <= 2; seq++ {
		if got, want := ts.stateAt("f", seq), ts.stateAt("src", seq); got != want {
			t.Fatalf("the fork's state at %d:\n%s\nthe source's:\n%s", seq, got, want)
		}
	}
	if st := ts.must(200, "GET", "/v1/runs/f/state", nil); st.num("seq") != 2 || st.body["memory"].(map[string]any)["k"] != "2" {
		t.Fatalf("the fork's last state: %s", st)
	}
	wantError(t, ts.do("GET", "/v1/runs/f/state?seq=3", nil), 404, codeAtomNotFound, "seq")

	// The fork's first atom is at+1; the source's history does not move.
	p, b := ts.begin("f", nil)
	if b.num("seq") != 3 {
		t.Fatalf("the fork's first atom: %s", b)
	}
	ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "f3"})
	if st := ts.must(200, "GET", "/v1/runs/src/state", nil); st.num("seq") != 3 || st.body["memory"].(map[string]any)["k"] != "3" {
		t.Fatalf("the source after the fork's commit: %s", st)
	}
	if st := ts.must(200, "GET", "/v1/runs/f/state", nil); st.num("seq") != 3 || st.body["memory"].(map[string]any)["k"] != "f3" ||
		st.str("objective") != "deploy" {
		t.Fatalf("the fork after its commit: %s", st)
	}

	// A repeat (its answer lost) answers the fork it made, as it is now.
	again := ts.must(200, "POST", "/v1/runs/src/fork", map[string]any{"at": 2, "id": "f"})
	wantFork(t, again, "f", "src", 2)
	if again.num("last_seq") != 3 || again.str("created") != f.str("created") {
		t.Fatalf("a repeated fork: %s, first %s", again, f)
	}

	// A fork of a fork, at one of its own atoms, and below its fork point:
	// that one starts from the ancestor whose history holds the seq.
	ff := ts.must(201, "POST", "/v1/runs/f/fork", map[string]any{"at": 3, "id": "ff"})
	wantFork(t, ff, "ff", "f", 3)
	fb := ts.must(201, "POST", "/v1/runs/f/fork", map[string]any{"at": 1, "id": "f-below"})
	wantFork(t, fb, "f-below", "src", 1)
	ts.must(200, "POST", "/v1/runs/f/fork", map[string]any{"at": 1, "id": "f-below"})
	f0 := ts.must(201, "POST", "/v1/runs/src/fork", map[string]any{"at": 0, "id": "f0"})
	wantFork(t, f0, "f0", "src", 0)
	check := func() {
		t.Helper()
		for _, c := range []struct {
			run  string
			seq  int
			from string
		}{{"ff", 3, "f"}, {"ff", 2, "src"}, {"ff", 1, "src"}, {"f-below", 1, "src"}, {"f-below", 0, "src"}, {"f0", 0, "src"}, {"f", 3, "f"}} {
			if got, want := ts.stateAt(c.run, c.seq), ts.stateAt(c.from, c.seq); got != want {
				t.Fatalf("%s at %d:\n%s\n%s at %d:\n%s", c.run, c.seq, got, c.from, c.seq, want)
			}
		}
	}
	check()
	ts.commitSeq("ff", "ff4")
	if st := ts.stateAt("ff", 4); st == ts.stateAt("ff", 3) {
		t.Fatalf("the fork of a fork's own atom changed nothing: %s", st)
	}

	runs := map[string]map[string]any{}
	for _, r := range ts.must(200, "GET", "/v1/runs", nil).body["runs"].([]any) {
		runs[r.(map[string]any)["id"].(string)] = r.(map[string]any)
	}
	if len(runs) != 5 || runs["ff"]["parent"] != "f" || runs["ff"]["forked_at"] != 3.0 || runs["src"]["parent"] != "" {
		t.Fatalf("runs: %v", runs)
	}

	// The server restarts as the library does: the lineage is in the log.
	ts.restart()
	wantFork(t, ts.must(200, "GET", "/v1/runs/f", nil), "f", "src", 2)
	wantFork(t, ts.must(200, "GET", "/v1/runs/ff", nil), "ff", "f", 3)
	check()
	ts.must(200, "POST", "/v1/runs/f/fork", map[string]any{"at": 3, "id": "ff"})
	if rep := ts.must(200, "POST", "/v1/verify", map[string]any{"deep": true}); rep.body["ok"] != true {
		t.Fatalf("verify: %s", rep)
	}
}

// TestForkErrors: every refusal of a fork is a status and a code naming
// the field, and creates nothing.
func TestForkErrors(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("src")
	ts.commitSeq("src", "1")
	ts.commitSeq("src", "2")
	ts.openRun("plain")
	ts.must(201, "POST", "/v1/runs/src/fork", map[string]any{"at": 1, "id": "f"})

	wantError(t, ts.do("POST", "/v1/runs/nope/fork", map[string]any{"at": 0, "id": "x"}), 404, codeRunNotFound, "run")
	beyond := ts.do("POST", "/v1/runs/src/fork", map[string]any{"at": 3, "id": "x"})
	wantError(t, beyond, 404, codeAtomNotFound, "at")
	if d, _ := beyond.body["error"].(map[string]any)["details"].(map[string]any); d["last_seq"] != 2.0 {
		t.Fatalf("at beyond the last seq names it: %s", beyond)
	}
	// An atom in flight is not committed: at stays within last_seq.
	p, _ := ts.begin("src", nil)
	wantError(t, ts.do("POST", "/v1/runs/src/fork", map[string]any{"at": 3, "id": "x"}), 404, codeAtomNotFound, "at")
	ts.must(201, "POST", "/v1/runs/src/fork", map[string]any{"at": 2, "id": "while-held"})
	ts.must(200, "POST", p+"/fail", map[string]any{"reason": "not now"})

	for _, c := range []struct {
		body   map[string]any
		status int
		code   string
		field  string
	}{
		{map[string]any{"at": 0, "id": "plain"}, 409, codeRunExists, "id"}, // a run that is not a fork
		{map[string]any{"at": 0, "id": "src"}, 409, codeRunExists, "id"},   // the source itself
		{map[string]any{"at": 2, "id": "f"}, 409, codeRunExists, "id"},     // a fork at another seq
		{map[string]any{"id": "x"}, 400, codeBadRequest, "at"},
		{map[string]any{"at": -1, "id": "x"}, 400, codeBadRequest, "at"},
		{map[string]any{"at": "1", "id": "x"}, 400, codeBadRequest, "at"},
		{map[string]any{"at": 0}, 400, codeInvalidRunID, "id"},
		{map[string]any{"at": 0, "id": string(make([]byte, 300))}, 400, codeInvalidRunID, "id"},
		{map[string]any{"at": 0, "id": "x", "from": "src"}, 400, codeBadRequest, "from"},
	} {
		wantError(t, ts.do("POST", "/v1/runs/src/fork", c.body), c.status, c.code, c.field)
	}
	wantError(t, ts.do("PUT", "/v1/runs/src/fork", nil), 405, codeMethodNotAllowed, "-")
	exists := ts.do("POST", "/v1/runs/src/fork", map[string]any{"at": 2, "id": "f"})
	if d, _ := exists.body["error"].(map[string]any)["details"].(map[string]any); d["parent"] != "src" || d["forked_at"] != 1.0 {
		t.Fatalf("run_exists says what the run is: %s", exists)
	}
	// Another fork of the other run named "f" is not a repeat either.
	ts.commitSeq("plain", "1")
	wantError(t, ts.do("POST", "/v1/runs/plain/fork", map[string]any{"at": 1, "id": "f"}), 409, codeRunExists, "id")

	runs := ts.must(200, "GET", "/v1/runs", nil).body["runs"].([]any)
	if len(runs) != 4 { // src, plain, f, while-held
		t.Fatalf("a refused fork created a run: %v", runs)
	}
}

// TestForkRepeatsCertifiedActions (I10 over the wire): a fork's call that
// repeats its source's action at the same position answers done with the
// source's certified result and key, executing nothing, whether the
// source's atom there is committed or still in flight; a call that
// differs is executed under a key of the fork's own.
func TestForkRepeatsCertifiedActions(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("src")
	charge := map[string]any{"tool": "billing.charge", "args": map[string]any{"cents": 500, "customer": "c1"}}
	mail := map[string]any{"tool": "mail.send", "args": map[string]any{"to": "ops"}}
	p, _ := ts.begin("src", nil)
	wantStatus(t, ts.act(p, 0, charge, `{"charge":"ch_1"}`), "done")
	wantStatus(t, ts.act(p, 1, mail, "sent to ops"), "done")
	ts.commit(p, map[string]any{"op": "set", "key": "charge", "value": `{"charge":"ch_1"}`})

	ts.must(201, "POST", "/v1/runs/src/fork", map[string]any{"at": 0, "id": "f"})
	p, _ = ts.begin("f", nil)
	// The same charge, args in another order: the source's action.
	r := ts.must(200, "POST", p+"/calls/0", map[string]any{"tool": "billing.charge", "args": map[string]any{"customer": "c1", "cents": 500}})
	if r.str("status") != "done" || r.body["replayed"] != true || r.str("result") != `{"charge":"ch_1"}` ||
		r.str("key") != ledger.DefaultKey("src", 1, 0) {
		t.Fatalf("the fork's repeat of the source's charge: %s", r)
	}
	// A mail to someone else: another action, under the fork's own key.
	r = ts.must(200, "POST", p+"/calls/1", map[string]any{"tool": "mail.send", "args": map[string]any{"to": "dev"}})
	if r.str("status") != "execute" || r.str("key") != ledger.DefaultKey("f", 1, 1) {
		t.Fatalf("a differing call in the fork: %s", r)
	}
	wantStatus(t, ts.must(200, "POST", p+"/calls/1/outcome", map[string]any{"result": "sent to dev"}), "done")
	ts.commit(p)
	acts := ts.must(200, "GET", "/v1/runs/f/atoms/1", nil).body["actions"].([]any)
	if len(acts) != 2 || acts[0].(map[string]any)["key"] != ledger.DefaultKey("src", 1, 0) || acts[1].(map[string]any)["key"] != ledger.DefaultKey("f", 1, 1) {
		t.Fatalf("the fork's atom records the keys it answered: %v", acts)
	}

	// The source's atom 2 is in flight, its first action certified: a fork
	// at 1 repeating it gets it too.
	p, _ = ts.begin("src", nil)
	wantStatus(t, ts.act(p, 0, mail, "sent to ops again"), "done")
	ts.must(201, "POST", "/v1/runs/src/fork", map[string]any{"at": 1, "id": "g"})
	pg, _ := ts.begin("g", nil)
	r = ts.must(200, "POST", pg+"/calls/0", mail)
	if r.str("status") != "done" || r.str("result") != "sent to ops again" || r.str("key") != ledger.DefaultKey("src", 2, 0) {
		t.Fatalf("the fork's repeat of the source's action in flight: %s", r)
	}
	ts.commit(pg)
	ts.commit(p)
	if got := ts.srv.db.Stats().Deduped; got < 2 {
		t.Fatalf("the engine deduplicated %d actions, want at least the fork's 2", got)
	}
}

// TestForkOfAnInterruptedAtom (I10 across a crash): the server is killed
// while the source's atom has two actions executing; the restarted server
// reports them interrupted. A fork that repeats them gets them under the
// source's keys: the one not idempotent in doubt (resolved there, and the
// source then finds it done), the idempotent one executed again under
// its key, never under a new one.
func TestForkOfAnInterruptedAtom(t *testing.T) {
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	p := startProc(t, "--store", store, "--socket", sock)
	cl := unixClient(t, sock)
	cl.openRun("src")
	cl.commitSeq("src", "1")
	a, _ := cl.begin("src", nil)
	pay := map[string]any{"tool": "pay", "args": map[string]any{"cents": 7}}
	bucket := map[string]any{"tool": "bucket.create", "args": map[string]any{"name": "b"}, "idempotent": true}
	payExec := cl.must(200, "POST", a+"/calls/0", pay)
	bucketExec := cl.must(200, "POST", a+"/calls/1", bucket)
	wantStatus(t, payExec, "execute")
	wantStatus(t, bucketExec, "execute")
	p.kill()
	cl.cl.CloseIdleConnections()
	p.start()

	wantFork(t, cl.must(201, "POST", "/v1/runs/src/fork", map[string]any{"at": 1, "id": "f"}), "f", "src", 1)
	fa, _ := cl.begin("f", nil)
	r := cl.must(200, "POST", fa+"/calls/0", pay)
	if r.str("status") != "in_doubt" || r.str("key") != payExec.str("key") {
		t.Fatalf("the fork's repeat of the source's in-doubt action: %s, the source executed %s", r, payExec)
	}
	r = cl.must(200, "POST", fa+"/calls/1", bucket)
	if r.str("status") != "execute" || r.str("key") != bucketExec.str("key") {
		t.Fatalf("the fork's repeat of the source's idempotent in-doubt action: %s, the source executed %s", r, bucketExec)
	}
	wantStatus(t, cl.must(200, "POST", fa+"/calls/1/outcome", map[string]any{"result": "made"}), "done")
	r = cl.must(200, "POST", fa+"/calls/0/resolve", map[string]any{"result": "paid"})
	if r.str("status") != "done" || r.str("result") != "paid" || r.str("key") != payExec.str("key") {
		t.Fatalf("resolving it in the fork: %s", r)
	}
	cl.commit(fa)

	// The source settled nothing itself, yet finds both done: one effect
	// across the lineage.
	a, b := cl.begin("src", nil)
	if intr, _ := b.body["interrupted"].(map[string]any); intr == nil || intr["seq"] != 2.0 {
		t.Fatalf("the source's interrupted atom: %s", b)
	}
	for i, c := range []map[string]any{pay, bucket} {
		r := cl.must(200, "POST", fmt.Sprintf("%s/calls/%d", a, i), c)
		if r.str("status") != "done" || r.body["replayed"] != true {
			t.Fatalf("the source's call %d after the fork settled it: %s", i, r)
		}
	}
	cl.commit(a)
}
