package main

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestWaitEventOverTheWire: a run waits after its atom, an event posted
// to it ends the wait, GET /v1/ready lists it, the next attempt reads the
// outcome with the event, and its commit takes the wait; a repeat of the
// sender's event is a duplicate, another event of the same sender is
// event_mismatch.
func TestWaitEventOverTheWire(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	p, _ := ts.begin("r", nil)
	ts.commit(p)

	w := ts.must(200, "POST", "/v1/runs/r/wait", map[string]any{"name": "approval", "timeout_ms": 3600_000, "seq": 1})
	if w.str("outcome") != "open" || w.num("seq") != 1 || w.str("name") != "approval" || w.body["deadline"] == nil {
		t.Fatalf("wait: %s", w)
	}
	// Idempotent after the same atom; another name is wait_exists; a
	// stale seq is seq_mismatch.
	again := ts.must(200, "POST", "/v1/runs/r/wait", map[string]any{"name": "approval"})
	if again.body["declared"] != w.body["declared"] || again.body["deadline"] != w.body["deadline"] {
		t.Fatalf("second wait: %s, first %s", again, w)
	}
	wantError(t, ts.do("POST", "/v1/runs/r/wait", map[string]any{"name": "other"}), 409, codeWaitExists, "name")
	wantError(t, ts.do("POST", "/v1/runs/r/wait", map[string]any{"name": "approval", "seq": 0}), 409, codeSeqMismatch, "seq")

	// Nothing is ready; a long poll of 50 ms answers none.
	if r := ts.must(200, "GET", "/v1/ready?wait_ms=50", nil); len(r.body["ready"].([]any)) != 0 {
		t.Fatalf("ready before the event: %s", r)
	}
	// An attempt of the next atom finds the wait open.
	p2, _ := ts.begin("r", nil)
	open := ts.do("GET", p2+"/wait", nil)
	wantError(t, open, 409, codeWaitNotEnded, "")
	ts.must(200, "POST", p2+"/fail", map[string]any{"reason": "not yet"})

	// A long poll of ready, answered by the event posted meanwhile.
	got := make(chan reply, 1)
	go func() { got <- ts.do("GET", "/v1/ready?wait_ms=4000", nil) }()
	time.Sleep(20 * time.Millisecond)
	ev := map[string]any{"name": "approval", "sender": "alice-1", "payload": `{"approved":true}`}
	sent := ts.must(200, "POST", "/v1/runs/r/events", ev)
	if sent.body["delivered"] != true || sent.body["duplicate"] != false {
		t.Fatalf("event: %s", sent)
	}
	ready := <-got
	list, _ := ready.body["ready"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["run"] != "r" || list[0].(map[string]any)["outcome"] != "delivered" {
		t.Fatalf("ready: %s", ready)
	}
	dup := ts.must(200, "POST", "/v1/runs/r/events", ev)
	if dup.body["duplicate"] != true || dup.body["delivered"] != false {
		t.Fatalf("repeat: %s", dup)
	}
	wantError(t, ts.do("POST", "/v1/runs/r/events", map[string]any{"name": "approval", "sender": "alice-1", "payload": "no"}), 409, codeEventMismatch, "sender")

	st := ts.must(200, "GET", "/v1/runs/r/wait", nil)
	sw := st.body["wait"].(map[string]any)
	if sw["outcome"] != "delivered" || sw["event"].(map[string]any)["payload"] != `{"approved":true}` || sw["ended"] == nil {
		t.Fatalf("the wait: %s", st)
	}
	p3, _ := ts.begin("r", nil)
	out := ts.must(200, "GET", p3+"/wait", nil)
	if out.str("outcome") != "delivered" || out.body["event"].(map[string]any)["sender"] != "alice-1" {
		t.Fatalf("the attempt's wait: %s", out)
	}
	ts.commit(p3)
	if r := ts.must(200, "GET", "/v1/ready", nil); len(r.body["ready"].([]any)) != 0 {
		t.Fatalf("ready after the commit took the wait: %s", r)
	}
	if r := ts.must(200, "GET", "/v1/runs/r/wait", nil); r.body["wait"] != nil || r.num("last_seq") != 2 {
		t.Fatalf("the wait after the commit: %s", r)
	}
	if r := ts.must(200, "POST", "/v1/verify", map[string]any{"deep": true}); r.body["ok"] != true {
		t.Fatalf("verify: %s", r)
	}
}

// TestWaitTimeoutSleepCancel: a deadline passed ends the wait as
// timed_out (found by a long poll of the wait and listed ready); a sleep
// wakes; a cancel ends a wait (and the run, which cancelled it, is not
// listed ready); an event sent before a wait ends it at once; an event
// after the deadline is kept, not delivered.
func TestWaitTimeoutSleepCancel(t *testing.T) {
	ts := startServer(t, "", nil)
	for _, id := range []string{"t", "s", "c", "e"} {
		ts.openRun(id)
	}
	ts.must(200, "POST", "/v1/runs/t/wait", map[string]any{"name": "approval", "timeout_ms": 30})
	r := ts.must(200, "GET", "/v1/runs/t/wait?wait_ms=4000", nil)
	if w := r.body["wait"].(map[string]any); w["outcome"] != "timed_out" {
		t.Fatalf("after the deadline: %s", r)
	}
	late := ts.must(200, "POST", "/v1/runs/t/events", map[string]any{"name": "approval", "sender": "late", "payload": "yes"})
	if late.body["delivered"] != false {
		t.Fatalf("an event after the timeout: %s", late)
	}
	until := time.Now().Add(40 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	sl := ts.must(200, "POST", "/v1/runs/s/sleep", map[string]any{"until": until})
	if sl.str("name") != "" || sl.str("deadline") == "" {
		t.Fatalf("sleep: %s", sl)
	}
	ts.must(200, "POST", "/v1/runs/c/wait", map[string]any{"name": "x"})
	if c := ts.must(200, "POST", "/v1/runs/c/wait/cancel", map[string]any{}); c.str("outcome") != "cancelled" {
		t.Fatalf("cancel: %s", c)
	}
	ts.must(200, "POST", "/v1/runs/e/events", map[string]any{"name": "go", "sender": "s1", "payload_base64": "/w=="})
	if w := ts.must(200, "POST", "/v1/runs/e/wait", map[string]any{"name": "go"}); w.str("outcome") != "delivered" ||
		w.body["event"].(map[string]any)["payload_base64"] != "/w==" {
		t.Fatalf("a wait after its event: %s", w)
	}
	var runs []string
	waitFor(t, hangGuard, "three ready runs", func() bool {
		r := ts.must(200, "GET", "/v1/ready?wait_ms=1000", nil)
		runs = runs[:0]
		for _, x := range r.body["ready"].([]any) {
			runs = append(runs, x.(map[string]any)["run"].(string))
		}
		return len(runs) == 3
	})
	slices.Sort(runs)
	if !slices.Equal(runs, []string{"e", "s", "t"}) {
		t.Fatalf("ready %v", runs)
	}
	if r := ts.must(200, "GET", "/v1/ready?max=2", nil); len(r.body["ready"].([]any)) != 2 || r.body["more"] != true {
		t.Fatalf("ready max 2: %s", r)
	}
}

// TestWaitErrors: each refusal says why, with its code and field.
func TestWaitErrors(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	wantError(t, ts.do("POST", "/v1/runs/r/wait", map[string]any{}), 400, codeBadRequest, "name")
	wantError(t, ts.do("POST", "/v1/runs/r/wait", map[string]any{"name": "a", "deadline": "tomorrow"}), 400, codeInvalidTime, "deadline")
	wantError(t, ts.do("POST", "/v1/runs/r/wait", map[string]any{"name": "a", "deadline": "2030-01-01T00:00:00Z", "timeout_ms": 5}), 400, codeInvalidTime, "timeout_ms")
	wantError(t, ts.do("POST", "/v1/runs/r/wait", map[string]any{"name": "a", "timeout_ms": -1}), 400, codeBadRequest, "timeout_ms")
	wantError(t, ts.do("POST", "/v1/runs/r/wait", map[string]any{"name": string(make([]byte, 300))}), 400, codeBadRequest, "name")
	wantError(t, ts.do("POST", "/v1/runs/r/wait", map[string]any{"name": "a", "extra": 1}), 400, codeBadRequest, "extra")
	wantError(t, ts.do("POST", "/v1/runs/r/sleep", map[string]any{}), 400, codeBadRequest, "until")
	wantError(t, ts.do("POST", "/v1/runs/r/wait/cancel", map[string]any{}), 404, codeWaitNotFound, "")
	wantError(t, ts.do("POST", "/v1/runs/nope/wait", map[string]any{"name": "a"}), 404, codeRunNotFound, "run")
	wantError(t, ts.do("POST", "/v1/runs/nope/events", map[string]any{"name": "a", "sender": "s"}), 404, codeRunNotFound, "run")
	wantError(t, ts.do("POST", "/v1/runs/r/events", map[string]any{"name": "a"}), 400, codeBadRequest, "sender")
	wantError(t, ts.do("POST", "/v1/runs/r/events", map[string]any{"sender": "s"}), 400, codeBadRequest, "name")
	wantError(t, ts.do("POST", "/v1/runs/r/events", map[string]any{"name": "a", "sender": "s", "payload": "x", "payload_base64": "eA=="}), 400, codeBadRequest, "payload")
	wantError(t, ts.do("GET", "/v1/ready?wait_ms=-1", nil), 400, codeBadRequest, "wait_ms")
	wantError(t, ts.do("GET", "/v1/ready?max=0", nil), 400, codeBadRequest, "max")
	wantError(t, ts.do("GET", "/v1/runs/r/wait?wait_ms=x", nil), 400, codeBadRequest, "wait_ms")
	// An open attempt: the run cannot wait until it commits or fails.
	p, _ := ts.begin("r", nil)
	wantError(t, ts.do("POST", "/v1/runs/r/wait", map[string]any{"name": "a"}), 409, codeRunHeld, "")
	wantError(t, ts.do("GET", p+"/wait", nil), 404, codeWaitNotFound, "")
	ts.commit(p)
	ts.must(200, "POST", "/v1/runs/r/end", map[string]any{"status": "completed"})
	wantError(t, ts.do("POST", "/v1/runs/r/events", map[string]any{"name": "a", "sender": "s"}), 409, codeRunEnded, "")
	wantError(t, ts.do("POST", "/v1/runs/r/wait", map[string]any{"name": "a"}), 409, codeRunEnded, "")
}

// TestWaitScopes: an approver's token (event right) sends events to its
// runs and nothing else; a reader cannot send; the ready list shows only
// the token's runs.
func TestWaitScopes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	approver := makeToken(t, file, "approver", "event", "trip-")
	agent := makeToken(t, file, "agent", "read,write", "trip-")
	reader := makeToken(t, file, "reader", "read", "*")
	b, err := readSecretFile("--tokens", file)
	if err != nil {
		t.Fatal(err)
	}
	set, err := parseTokens(b, file)
	if err != nil {
		t.Fatal(err)
	}
	const admin = "admin-token-0123456789abcdef"
	ts := startServer(t, "", func(c *serverConfig) { c.tokens, c.token = set, []byte(admin) })
	ts.token = admin
	ts.openRun("other")
	ts.must(200, "POST", "/v1/runs/other/wait", map[string]any{"name": "approval"})
	ts.must(200, "POST", "/v1/runs/other/events", map[string]any{"name": "approval", "sender": "admin"})

	ts.token = agent
	ts.openRun("trip-1")
	ts.must(200, "POST", "/v1/runs/trip-1/wait", map[string]any{"name": "approval"})
	wantError(t, ts.do("POST", "/v1/runs/other/events", map[string]any{"name": "approval", "sender": "a"}), 403, codeForbidden, "run")

	ts.token = approver
	ev := map[string]any{"name": "approval", "sender": "human-1", "payload": "yes"}
	wantError(t, ts.do("POST", "/v1/runs/other/events", ev), 403, codeForbidden, "run")
	wantError(t, ts.do("GET", "/v1/runs/trip-1/wait", nil), 403, codeForbidden, "run")
	wantError(t, ts.do("POST", "/v1/runs/trip-1/wait", map[string]any{"name": "x"}), 403, codeForbidden, "run")
	wantError(t, ts.do("POST", "/v1/runs/trip-1/attempts", map[string]any{}), 403, codeForbidden, "run")
	if r := ts.must(200, "POST", "/v1/runs/trip-1/events", ev); r.body["delivered"] != true {
		t.Fatalf("the approver's event: %s", r)
	}

	ts.token = reader
	wantError(t, ts.do("POST", "/v1/runs/trip-1/events", map[string]any{"name": "approval", "sender": "r"}), 403, codeForbidden, "run")
	if r := ts.must(200, "GET", "/v1/ready", nil); len(r.body["ready"].([]any)) != 2 {
		t.Fatalf("the reader's ready list: %s", r)
	}
	ts.token = agent
	r := ts.must(200, "GET", "/v1/ready", nil)
	list := r.body["ready"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["run"] != "trip-1" {
		t.Fatalf("the agent's ready list (its runs only): %s", r)
	}
}

// TestOpenAPIWaitSchemas: the schemas of waits have the fields of their
// Go types.
func TestOpenAPIWaitSchemas(t *testing.T) {
	doc := loadOpenAPI(t)
	for name, v := range map[string]any{
		"WaitRequest": waitRequest{}, "SleepRequest": sleepRequest{}, "EventRequest": eventRequest{}, "EventResponse": eventResponse{},
		"Wait": waitJSON{}, "Event": eventJSON{}, "Ready": readyResponse{},
	} {
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("openapi.json has no schema %s", name)
			continue
		}
		if got, want := sortedKeys(s.Properties), jsonFields(reflect.TypeOf(v)); !slices.Equal(got, want) {
			t.Errorf("schema %s has properties %v, the Go type %T has %v", name, got, v, want)
		}
	}
	for _, c := range []string{codeEventMismatch, codeWaitExists, codeWaitNotFound, codeWaitNotEnded, codeInvalidTime} {
		if !slices.Contains(doc.Components.Schemas["ErrorCode"].Enum, c) {
			t.Errorf("ErrorCode has no %s", c)
		}
	}
}

// TestWaitLongPollsEndOnShutdown: a graceful stop does not wait for idle
// long polls (of the ready list and of a run's wait): they answer what
// they have once the server drains, though their wait_ms is an hour.
func TestWaitLongPollsEndOnShutdown(t *testing.T) {
	ts := startServer(t, "", func(c *serverConfig) { c.callWait = time.Hour })
	ts.openRun("r")
	ts.must(200, "POST", "/v1/runs/r/wait", map[string]any{"name": "never"})
	got := make(chan reply, 2)
	go func() { got <- ts.do("GET", "/v1/ready?wait_ms=3600000", nil) }()
	go func() { got <- ts.do("GET", "/v1/runs/r/wait?wait_ms=3600000", nil) }()
	time.Sleep(50 * time.Millisecond) // both are blocked
	ts.stop()
	for i := 0; i < 2; i++ {
		r := <-got
		if r.status != 200 {
			t.Fatalf("a long poll at shutdown: %s", r)
		}
		if list, ok := r.body["ready"].([]any); ok && len(list) != 0 {
			t.Fatalf("ready at shutdown: %s", r)
		}
		if w, ok := r.body["wait"].(map[string]any); ok && w["outcome"] != "open" {
			t.Fatalf("the wait at shutdown: %s", r)
		}
	}
}
