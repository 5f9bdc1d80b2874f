package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/continuumdb/continuum/ledger"
)

// TestAtomOverTheWire walks one atom through the protocol: begin, an
// action the client executes, its certified result, commit, and the state,
// the atom and the run as the engine holds them.
func TestAtomOverTheWire(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("deploy-42")
	p, b := ts.begin("deploy-42", nil)
	if b.num("seq") != 1 || b.body["interrupted"] != nil {
		t.Fatalf("begin: %s", b)
	}
	call := map[string]any{"tool": "billing.charge", "args": map[string]any{"cents": 500, "customer": "c1"}}
	r := ts.must(200, "POST", p+"/calls/0", call)
	wantStatus(t, r, "execute")
	if key := r.str("key"); key != ledger.DefaultKey("deploy-42", 1, 0) {
		t.Fatalf("execute key %q, want the engine's default key %q", key, ledger.DefaultKey("deploy-42", 1, 0))
	}
	r = ts.must(200, "POST", p+"/calls/0/outcome", map[string]any{"result": `{"charge":"ch_1"}`})
	wantStatus(t, r, "done")
	if r.str("result") != `{"charge":"ch_1"}` || r.body["replayed"] != nil {
		t.Fatalf("outcome: %s", r)
	}
	c := ts.commit(p,
		map[string]any{"op": "set_objective", "text": "deploy"},
		map[string]any{"op": "add_subgoal", "id": "s1", "text": "charge"},
		map[string]any{"op": "set_subgoal_status", "id": "s1", "status": "done"},
		map[string]any{"op": "set", "key": "charge", "value": `{"charge":"ch_1"}`},
		map[string]any{"op": "set", "key": "bin", "value_base64": "AP8="},
		map[string]any{"op": "append_message", "role": "assistant", "content": "charged", "tool": "billing.charge", "call_id": "c1"},
		map[string]any{"op": "add_pending", "call_id": "p1", "tool": "mail.send", "args": map[string]any{"to": "ops"}, "key": "k1"},
		map[string]any{"op": "append_scratch", "value": "note"},
	)
	if c.num("seq") != 1 || len(c.str("head")) != 64 {
		t.Fatalf("commit: %s", c)
	}
	st := ts.must(200, "GET", "/v1/runs/deploy-42/state", nil)
	mem := st.body["memory"].(map[string]any)
	if st.str("objective") != "deploy" || mem["charge"] != `{"charge":"ch_1"}` || st.str("scratchpad") != "note" {
		t.Fatalf("state: %s", st)
	}
	if m64 := st.body["memory_base64"].(map[string]any); m64["bin"] != "AP8=" {
		t.Fatalf("a memory value that is not UTF-8 comes back in memory_base64: %s", st)
	}
	info := ts.must(200, "GET", "/v1/runs/deploy-42", nil)
	if info.num("last_seq") != 1 || info.str("head") != c.str("head") || info.body["lease"] != nil {
		t.Fatalf("run: %s", info)
	}
	atom := ts.must(200, "GET", "/v1/runs/deploy-42/atoms/1", nil)
	acts := atom.body["actions"].([]any)
	if len(acts) != 1 || acts[0].(map[string]any)["result"] != `{"charge":"ch_1"}` || acts[0].(map[string]any)["status"] != "done" {
		t.Fatalf("atom: %s", atom)
	}
	if n := len(atom.body["delta"].([]any)); n != 8 {
		t.Fatalf("atom has %d ops, want 8: %s", n, atom)
	}
	s0 := ts.must(200, "GET", "/v1/runs/deploy-42/state?seq=0", nil)
	if s0.str("objective") != "" || s0.num("seq") != 0 {
		t.Fatalf("state at 0: %s", s0)
	}
	wantError(t, ts.do("GET", "/v1/runs/deploy-42/state?seq=2", nil), 404, codeAtomNotFound, "seq")
	wantError(t, ts.do("GET", "/v1/runs/deploy-42/atoms/2", nil), 404, codeAtomNotFound, "seq")

	// The run's next atom makes the same action with an explicit key: a
	// certified action is never executed again, by any attempt.
	p2, _ := ts.begin("deploy-42", nil)
	call["key"] = "charge-c1"
	r = ts.act(p2, 0, call, `{"charge":"ch_2"}`)
	wantStatus(t, r, "done")
	p3 := p2
	ts.must(200, "POST", p3+"/fail", map[string]any{"reason": "try again"})
	p4, b4 := ts.begin("deploy-42", nil)
	if b4.num("seq") != 2 {
		t.Fatalf("a failed atom's seq is begun again: %s", b4)
	}
	r = ts.must(200, "POST", p4+"/calls/0", call)
	wantStatus(t, r, "done")
	if r.str("result") != `{"charge":"ch_2"}` || r.body["replayed"] != true {
		t.Fatalf("the certified action must answer done, replayed, with its result: %s", r)
	}
	ts.commit(p4)
}

// TestEndRun: a run ends with a status and a result (engine Run.End),
// durably; then it takes no more atoms, and an end repeated after a lost
// answer has the effect of one.
func TestEndRun(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	p, _ := ts.begin("r", nil)
	wantError(t, ts.do("POST", "/v1/runs/r/end", map[string]any{"status": "completed"}), 409, codeRunHeld, "-")
	ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "v"})
	wantError(t, ts.do("POST", "/v1/runs/r/end", map[string]any{"status": "done"}), 400, codeBadRequest, "status")
	wantError(t, ts.do("POST", "/v1/runs/nope/end", map[string]any{"status": "completed"}), 404, codeRunNotFound, "run")
	end := map[string]any{"status": "completed", "result": `{"deployed":true}`}
	r := ts.must(200, "POST", "/v1/runs/r/end", end)
	if r.str("status") != "completed" || r.str("result") != `{"deployed":true}` || r.body["ended"] == nil || r.num("last_seq") != 1 {
		t.Fatalf("end: %s", r)
	}
	again := ts.must(200, "POST", "/v1/runs/r/end", end)
	if again.str("head") != r.str("head") {
		t.Fatalf("a repeated end: %s then %s", r, again)
	}
	wantError(t, ts.do("POST", "/v1/runs/r/end", map[string]any{"status": "failed"}), 409, codeRunEnded, "-")
	wantError(t, ts.do("POST", "/v1/runs/r/attempts", map[string]any{}), 409, codeRunEnded, "-")
	ts.restart()
	info := ts.must(200, "GET", "/v1/runs/r", nil)
	if info.str("status") != "completed" || info.str("result") != `{"deployed":true}` || info.str("parent") != "" {
		t.Fatalf("after a restart: %s", info)
	}
	wantError(t, ts.do("POST", "/v1/runs/r/attempts", map[string]any{}), 409, codeRunEnded, "-")
	if active := ts.must(200, "PUT", "/v1/runs/other", nil); active.str("status") != "active" || active.body["ended"] != nil {
		t.Fatalf("an active run: %s", active)
	}
}

// TestLLMShapedMessages: messages with tool calls, content blocks and
// error results (frame.Message as OpenAI's and Anthropic's APIs shape
// them) go into the frame and come back in the state and the atom.
func TestLLMShapedMessages(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	p, _ := ts.begin("r", nil)
	assistant := map[string]any{"op": "append_message", "role": "assistant", "content": "",
		"tool_calls": []any{map[string]any{"id": "call_1", "name": "search", "arguments": map[string]any{"q": "flights", "n": 2}}}}
	result := map[string]any{"op": "append_message", "role": "tool", "content": "no such airport", "tool": "search", "call_id": "call_1", "is_error": true}
	user := map[string]any{"op": "append_message", "role": "user", "parts": []any{
		map[string]any{"kind": "text", "text": "and this:"},
		map[string]any{"kind": "tool_result", "call_id": "call_1", "json": []any{map[string]any{"type": "text", "text": "x"}}},
	}}
	wantError(t, ts.do("POST", p+"/commit", map[string]any{"delta": []any{map[string]any{"op": "append_message", "role": "user",
		"parts": []any{map[string]any{"kind": "picture"}}}}}), 400, codeBadRequest, "delta[0].parts[0].kind")
	wantError(t, ts.do("POST", p+"/commit", map[string]any{"delta": []any{map[string]any{"op": "append_message", "role": "assistant",
		"tool_calls": []any{map[string]any{"id": "", "name": "search"}}}}}), 422, codeInvalidDelta, "delta")
	ts.commit(p, assistant, result, user)
	st := ts.must(200, "GET", "/v1/runs/r/state", nil)
	msgs := st.body["messages"].([]any)
	call := msgs[0].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
	if call["id"] != "call_1" || call["name"] != "search" || call["arguments"].(map[string]any)["q"] != "flights" {
		t.Fatalf("tool calls in the state: %s", st)
	}
	if msgs[1].(map[string]any)["is_error"] != true {
		t.Fatalf("an error result in the state: %s", st)
	}
	parts := msgs[2].(map[string]any)["parts"].([]any)
	if len(parts) != 2 || parts[1].(map[string]any)["kind"] != "tool_result" || parts[1].(map[string]any)["call_id"] != "call_1" {
		t.Fatalf("parts in the state: %s", st)
	}
	atom := ts.must(200, "GET", "/v1/runs/r/atoms/1", nil)
	ops := atom.body["delta"].([]any)
	got, _ := json.Marshal(ops[0].(map[string]any)["tool_calls"])
	want, _ := json.Marshal(assistant["tool_calls"])
	if string(got) != string(want) {
		t.Fatalf("the atom's tool calls %s, sent %s", got, want)
	}
}

// TestRunIDsInThePath: a run id with a slash or spaces travels
// percent-encoded, and comes back as itself.
func TestRunIDsInThePath(t *testing.T) {
	ts := startServer(t, "", nil)
	for _, id := range []string{"a/b", "with space", "ünï", "x%y"} {
		esc := url.PathEscape(id)
		r := ts.must(200, "PUT", "/v1/runs/"+esc, nil)
		if r.str("id") != id {
			t.Fatalf("PUT %q: %s", id, r)
		}
		p, _ := ts.begin(esc, nil)
		ts.commit(p, map[string]any{"op": "set", "key": "k", "value": id})
		st := ts.must(200, "GET", "/v1/runs/"+esc+"/state", nil)
		if st.str("run") != id || st.body["memory"].(map[string]any)["k"] != id {
			t.Fatalf("state of %q: %s", id, st)
		}
	}
	wantError(t, ts.do("PUT", "/v1/runs/"+strings.Repeat("x", 300), nil), 400, codeInvalidRunID, "run")
	runs := ts.must(200, "GET", "/v1/runs", nil)
	if n := len(runs.body["runs"].([]any)); n != 4 {
		t.Fatalf("runs: %s", runs)
	}
}

// TestLeaseExpiryLeavesInDoubt: a client that vanishes after execute does
// not hold its run forever, and its action is never executed again
// silently: the lease runs out, the action is in doubt, the next attempt
// of the seq sees it with its state and settles it.
func TestLeaseExpiryLeavesInDoubt(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	p, _ := ts.begin("r", map[string]any{"lease_ms": 200})
	done := ts.act(p, 0, map[string]any{"tool": "a"}, "ra")
	wantStatus(t, done, "done")
	exec := ts.must(200, "POST", p+"/calls/1", map[string]any{"tool": "mail.send", "args": map[string]any{"to": "x"}})
	wantStatus(t, exec, "execute")
	// The client is gone. Until the lease runs out the run is held.
	held := ts.do("POST", "/v1/runs/r/attempts", map[string]any{})
	wantError(t, held, 409, codeRunHeld, "-")
	var lease map[string]any
	waitFor(t, hangGuard, "the lease to expire", func() bool {
		info := ts.must(200, "GET", "/v1/runs/r", nil)
		lease, _ = info.body["lease"].(map[string]any)
		return lease == nil
	})
	// The late outcome is refused: the action is in doubt now.
	wantError(t, ts.do("POST", p+"/calls/1/outcome", map[string]any{"result": "sent"}), 409, codeLeaseLost, "-")
	intr := ts.must(200, "GET", "/v1/runs/r/interrupted", nil).body["interrupted"].(map[string]any)
	if intr["reason"] != "lease_expired" || intr["seq"] != 1.0 {
		t.Fatalf("interrupted: %v", intr)
	}
	p2, b := ts.begin("r", nil)
	bi := b.body["interrupted"].(map[string]any)
	acts := bi["actions"].([]any)
	if len(acts) != 2 || acts[0].(map[string]any)["status"] != "done" || acts[1].(map[string]any)["status"] != "in_doubt" ||
		acts[1].(map[string]any)["key"] != exec.str("key") {
		t.Fatalf("begin after the lease expired must report both actions with their states: %s", b)
	}
	r := ts.must(200, "POST", p2+"/calls/0", map[string]any{"tool": "a"})
	if r.str("status") != "done" || r.str("result") != "ra" || r.body["replayed"] != true {
		t.Fatalf("call 0 again: %s", r)
	}
	r = ts.must(200, "POST", p2+"/calls/1", map[string]any{"tool": "mail.send", "args": map[string]any{"to": "x"}})
	wantStatus(t, r, "in_doubt")
	if r.str("key") != exec.str("key") {
		t.Fatalf("in doubt under another key: %s, executed under %s", r, exec)
	}
	r = ts.must(200, "POST", p2+"/calls/1/resolve", map[string]any{"result": "sent"})
	if r.str("status") != "done" || r.body["resolved"] != true || r.str("result") != "sent" {
		t.Fatalf("resolve: %s", r)
	}
	ts.commit(p2)
	if got := ts.srv.counters.expired.Load(); got != 1 {
		t.Fatalf("%d leases expired, want 1", got)
	}
}

// TestTakeover: a client that restarts takes its run over at once instead
// of waiting for its old lease; the old attempt's requests answer
// lease_lost from then on.
func TestTakeover(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	p, _ := ts.begin("r", nil)
	exec := ts.must(200, "POST", p+"/calls/0", map[string]any{"tool": "pay", "idempotent": true, "key": "pay-1"})
	wantStatus(t, exec, "execute")
	p2, b := ts.begin("r", map[string]any{"takeover": true})
	intr := b.body["interrupted"].(map[string]any)
	if intr["reason"] != "takeover" || len(intr["actions"].([]any)) != 1 {
		t.Fatalf("takeover: %s", b)
	}
	wantError(t, ts.do("POST", p+"/calls/0/outcome", map[string]any{"result": "x"}), 409, codeLeaseLost, "-")
	wantError(t, ts.do("POST", p+"/commit", map[string]any{"delta": []any{}}), 409, codeLeaseLost, "-")
	// The old client may still be executing it: even an idempotent action
	// is in doubt, not executed again, until the new client resolves it;
	// a resolution with retry executes it again, under its key.
	r := ts.must(200, "POST", p2+"/calls/0", map[string]any{"tool": "pay", "idempotent": true, "key": "pay-1"})
	if r.str("status") != "in_doubt" || r.str("key") != "pay-1" {
		t.Fatalf("an idempotent action the old client was executing: %s, want in_doubt", r)
	}
	r = ts.must(200, "POST", p2+"/calls/0/resolve", map[string]any{"failed": "no trace downstream", "retry": true})
	if r.str("status") != "execute" || r.str("key") != "pay-1" {
		t.Fatalf("resolved with retry: %s, want execute under pay-1", r)
	}
	ts.must(200, "POST", p2+"/calls/0/outcome", map[string]any{"result": "paid"})
	ts.commit(p2)
	att := ts.must(200, "GET", p, nil)
	if att.str("state") != "abandoned" || att.str("reason") != "takeover" {
		t.Fatalf("old attempt: %s", att)
	}
}

// TestRepeatedRequests: every request repeated after a lost answer has the
// effect of one.
func TestRepeatedRequests(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	ts.openRun("r") // PUT is idempotent
	p, b := ts.begin("r", map[string]any{"request_id": "req-1"})
	_, again := ts.begin("r", map[string]any{"request_id": "req-1"})
	if again.str("attempt") != b.str("attempt") {
		t.Fatalf("a repeated begin made another attempt: %s then %s", b, again)
	}
	wantError(t, ts.do("POST", "/v1/runs/r/attempts", map[string]any{"request_id": "req-2"}), 409, codeRunHeld, "-")

	call := map[string]any{"tool": "t", "args": map[string]any{"b": 1, "a": 2}}
	first := ts.must(200, "POST", p+"/calls/0", call)
	wantStatus(t, first, "execute")
	// The same call again (its answer lost), with the args written in
	// another order: the same call, still executing.
	again2 := ts.must(200, "POST", p+"/calls/0", map[string]any{"tool": "t", "args": map[string]any{"a": 2, "b": 1}})
	if again2.str("status") != "execute" || again2.str("key") != first.str("key") {
		t.Fatalf("repeated call: %s, first %s", again2, first)
	}
	wantError(t, ts.do("POST", p+"/calls/0", map[string]any{"tool": "t", "args": map[string]any{"a": 3}}), 409, codeCallMismatch, "args")
	wantError(t, ts.do("POST", p+"/calls/2", map[string]any{"tool": "t"}), 409, codeOutOfOrder, "call")
	o1 := ts.must(200, "POST", p+"/calls/0/outcome", map[string]any{"result": "one"})
	o2 := ts.must(200, "POST", p+"/calls/0/outcome", map[string]any{"result": "two"})
	if o1.str("result") != "one" || o2.str("result") != "one" {
		t.Fatalf("the first outcome wins: %s, then %s", o1, o2)
	}
	c1 := ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "v"})
	c2 := ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "v"})
	if c1.str("head") != c2.str("head") || c2.num("seq") != 1 {
		t.Fatalf("a repeated commit: %s then %s", c1, c2)
	}
	if last := ts.must(200, "GET", "/v1/runs/r", nil).num("last_seq"); last != 1 {
		t.Fatalf("last seq %v after one commit sent twice", last)
	}
	// Call 1 of a committed attempt: attempt_done.
	wantError(t, ts.do("POST", p+"/calls/1", map[string]any{"tool": "t"}), 409, codeAttemptDone, "-")
	// A repeated fail.
	p2, _ := ts.begin("r", nil)
	f1 := ts.must(200, "POST", p2+"/fail", map[string]any{"reason": "r"})
	f2 := ts.must(200, "POST", p2+"/fail", map[string]any{"reason": "r"})
	if f1.String() != f2.String() {
		t.Fatalf("a repeated fail: %s then %s", f1, f2)
	}
}

// TestDefaultKeysFollowCallNumbers: calls sent concurrently by a client
// still get the default keys of their numbers, as the engine would give
// an agent making them in that order.
func TestDefaultKeysFollowCallNumbers(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	p, _ := ts.begin("r", nil)
	const n = 16
	// Register the calls in order, then report their outcomes concurrently.
	keys := make([]string, n)
	for i := 0; i < n; i++ {
		call := map[string]any{"tool": "t", "args": i}
		if i%4 == 3 {
			call["key"] = fmt.Sprintf("explicit-%d", i)
		}
		r := ts.must(200, "POST", fmt.Sprintf("%s/calls/%d", p, i), call)
		wantStatus(t, r, "execute")
		keys[i] = r.str("key")
	}
	idx := 0
	for i := 0; i < n; i++ {
		want := fmt.Sprintf("explicit-%d", i)
		if i%4 != 3 {
			want = ledger.DefaultKey("r", 1, idx)
			idx++
		}
		if keys[i] != want {
			t.Fatalf("call %d has key %q, want %q", i, keys[i], want)
		}
	}
	wantError(t, ts.do("POST", p+"/commit", map[string]any{"delta": []any{}}), 409, codeCallsRunning, "-")
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := ts.must(200, "POST", fmt.Sprintf("%s/calls/%d/outcome", p, i), map[string]any{"result": fmt.Sprint(i)})
			if r.str("result") != fmt.Sprint(i) {
				t.Errorf("call %d: %s", i, r)
			}
		}()
	}
	wg.Wait()
	ts.commit(p)
	atom := ts.must(200, "GET", "/v1/runs/r/atoms/1", nil)
	if got := len(atom.body["actions"].([]any)); got != n {
		t.Fatalf("the atom lists %d actions, want %d", got, n)
	}
}

// TestOutcomeErrorIsCertifiedFailed: an execution that reports an error
// (the effect did not happen) is certified failed, and the next call of
// the action executes it again under the same key.
func TestOutcomeErrorIsCertifiedFailed(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	p, _ := ts.begin("r", nil)
	call := map[string]any{"tool": "t", "key": "k"}
	ts.must(200, "POST", p+"/calls/0", call)
	r := ts.must(200, "POST", p+"/calls/0/outcome", map[string]any{"error": "HTTP 503 from the downstream"})
	if r.str("status") != "failed" || !strings.Contains(r.str("error"), "HTTP 503") {
		t.Fatalf("outcome error: %s", r)
	}
	r = ts.must(200, "POST", p+"/calls/1", call)
	if r.str("status") != "execute" || r.str("key") != "k" {
		t.Fatalf("a failed action is executed again with its key: %s", r)
	}
	ts.must(200, "POST", p+"/calls/1/outcome", map[string]any{"result_base64": "AP8="})
	r = ts.must(200, "GET", p, nil)
	calls := r.body["calls"].([]any)
	if calls[1].(map[string]any)["result_base64"] != "AP8=" {
		t.Fatalf("a result that is not UTF-8 travels as result_base64: %s", r)
	}
	ts.commit(p)
}

// TestSameActionTwiceAtOnce: a call of an action another call of the
// attempt is executing waits for that execution and answers its outcome;
// the action is executed once. A call shows as pending from its dispatch,
// a moment before its Do reaches the ledger: if the first execution's
// outcome lands in that moment, the second call finds the action failed
// and is asked to execute it again, which is right too. So the scenario is
// repeated, on a new key each time, until the second call has waited; it
// must wait in one of 20 tries (a server that never makes it wait, and
// executes the action twice at once, fails here).
func TestSameActionTwiceAtOnce(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	for try := range 20 {
		p, _ := ts.begin("r", nil)
		call := map[string]any{"tool": "t", "key": fmt.Sprintf("same-%d", try)}
		wantStatus(t, ts.must(200, "POST", p+"/calls/0", call), "execute")
		second := make(chan reply)
		go func() { second <- ts.must(200, "POST", p+"/calls/1", call) }()
		waitFor(t, hangGuard, "call 1 to wait for call 0's execution", func() bool {
			calls := ts.must(200, "GET", p, nil).body["calls"].([]any)
			return len(calls) == 2 && calls[1].(map[string]any)["status"] == "pending"
		})
		r := ts.must(200, "POST", p+"/calls/0/outcome", map[string]any{"error": "refused"})
		wantStatus(t, r, "failed")
		r = <-second
		switch {
		case r.str("status") == "failed" && r.str("error") == "refused":
			// It waited and answers the execution's outcome. The failed
			// action is executed again by the next call.
			wantStatus(t, ts.must(200, "POST", p+"/calls/2", call), "execute")
			ts.must(200, "POST", p+"/calls/2/outcome", map[string]any{"result": "ok"})
			ts.commit(p)
			return
		case r.str("status") == "execute":
			// It reached the ledger after the failure landed.
			wantStatus(t, ts.must(200, "POST", p+"/calls/1/outcome", map[string]any{"result": "ok"}), "done")
			ts.commit(p)
		default:
			t.Fatalf("the call that waited answers the execution's outcome: %s", r)
		}
	}
	t.Fatal("in 20 tries, the second call of an action being executed never waited for its execution")
}

// TestResolveFailedAndRetry: an in-doubt call that the downstream never
// saw is resolved as failed and executed again at once, under its key.
func TestResolveFailedAndRetry(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	p, _ := ts.begin("r", nil)
	call := map[string]any{"tool": "mail.send"}
	exec := ts.must(200, "POST", p+"/calls/0", call)
	p2, _ := ts.begin("r", map[string]any{"takeover": true})
	wantStatus(t, ts.must(200, "POST", p2+"/calls/0", call), "in_doubt")
	wantError(t, ts.do("POST", p2+"/calls/0/outcome", map[string]any{"result": "x"}), 409, codeNotExecuting, "-")
	wantError(t, ts.do("POST", p2+"/calls/0/resolve", map[string]any{"result": "x", "failed": "y"}), 400, codeBadRequest, "failed")
	wantError(t, ts.do("POST", p2+"/calls/0/resolve", map[string]any{"result": "x", "retry": true}), 400, codeBadRequest, "retry")
	r := ts.must(200, "POST", p2+"/calls/0/resolve", map[string]any{"failed": "no trace downstream", "retry": true})
	if r.str("status") != "execute" || r.str("key") != exec.str("key") {
		t.Fatalf("resolve failed with retry must ask to execute under the same key: %s (first %s)", r, exec)
	}
	again := ts.must(200, "POST", p2+"/calls/0/resolve", map[string]any{"failed": "no trace downstream", "retry": true})
	wantStatus(t, again, "execute")
	r = ts.must(200, "POST", p2+"/calls/0/outcome", map[string]any{"result": "sent"})
	wantStatus(t, r, "done")
	wantError(t, ts.do("POST", p2+"/calls/0/resolve", map[string]any{"result": "x"}), 409, codeNotInDoubt, "-")
	// A second call of the same action takes the next default key.
	r = ts.must(200, "POST", p2+"/calls/1", call)
	if r.str("status") != "execute" || r.str("key") != ledger.DefaultKey("r", 1, 1) {
		t.Fatalf("the next default-key call: %s", r)
	}
	ts.must(200, "POST", p2+"/calls/1/outcome", map[string]any{"result": "sent again"})
	ts.commit(p2)
}

// TestRestartReportsInterrupted: a server stopped while an attempt runs
// comes back as the library does: the atom is interrupted, its certified
// actions answer done without executing, its in-doubt ones in_doubt.
func TestRestartReportsInterrupted(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	p, _ := ts.begin("r", nil)
	ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "1"})
	p, _ = ts.begin("r", nil)
	wantStatus(t, ts.act(p, 0, map[string]any{"tool": "a"}, "ra"), "done")
	wantStatus(t, ts.must(200, "POST", p+"/calls/1", map[string]any{"tool": "b"}), "execute")
	ts.restart()

	wantError(t, ts.do("POST", p+"/calls/1/outcome", map[string]any{"result": "x"}), 404, codeAttemptNotFound, "attempt")
	p2, b := ts.begin("r", nil)
	intr, _ := b.body["interrupted"].(map[string]any)
	if b.num("seq") != 2 || intr == nil || intr["reason"] != "restart" {
		t.Fatalf("begin after a restart: %s", b)
	}
	acts := intr["actions"].([]any)
	if len(acts) == 0 || acts[0].(map[string]any)["status"] != "done" || acts[0].(map[string]any)["tool"] != "a" {
		t.Fatalf("the interrupted atom's certified action: %s", b)
	}
	r := ts.must(200, "POST", p2+"/calls/0", map[string]any{"tool": "a"})
	if r.str("status") != "done" || r.str("result") != "ra" || r.body["replayed"] != true {
		t.Fatalf("certified before the restart: %s", r)
	}
	wantStatus(t, ts.must(200, "POST", p2+"/calls/1", map[string]any{"tool": "b"}), "in_doubt")
	ts.must(200, "POST", p2+"/calls/1/resolve", map[string]any{"failed": "never sent"})
	ts.commit(p2)
	if st := ts.must(200, "GET", "/v1/runs/r/state", nil); st.body["memory"].(map[string]any)["k"] != "1" || st.num("seq") != 2 {
		t.Fatalf("state after restart: %s", st)
	}
}

// TestShutdownDrainsCommits: commits in progress when shutdown begins are
// answered, and what was answered is in the store after it.
func TestShutdownDrainsCommits(t *testing.T) {
	ts := startServer(t, "", nil)
	const runs = 8
	for i := 0; i < runs; i++ {
		ts.openRun(fmt.Sprint("r", i))
	}
	var mu sync.Mutex
	acked := map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < runs; i++ {
		run := fmt.Sprint("r", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				r, ok := tryDo(ts, "POST", "/v1/runs/"+run+"/attempts", map[string]any{})
				if !ok || r.status != 201 {
					return
				}
				p := "/v1/runs/" + run + "/attempts/" + r.str("attempt")
				c, ok := tryDo(ts, "POST", p+"/commit", map[string]any{"delta": []any{map[string]any{"op": "set", "key": "n", "value": fmt.Sprint(n)}}})
				if !ok || c.status != 200 {
					return
				}
				mu.Lock()
				acked[run] = int(c.num("seq"))
				mu.Unlock()
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	ts.stop()
	close(stop)
	wg.Wait()
	ts.start()
	for run, seq := range acked {
		info := ts.must(200, "GET", "/v1/runs/"+run, nil)
		if int(info.num("last_seq")) < seq {
			t.Fatalf("run %s: seq %d was acknowledged, the store has %v", run, seq, info.num("last_seq"))
		}
	}
	if len(acked) == 0 {
		t.Fatal("no commit was acknowledged before the shutdown")
	}
}

// tryDo is send for a client that stops at its first transport error
// (the server went away).
func tryDo(ts *testServer, method, path string, body any) (reply, bool) {
	r, err := ts.send(method, path, body)
	return r, err == nil
}

// TestReaperRetainsThenForgets: the reaper keeps a finished attempt for
// cfg.retain (a repeated commit still answers the commit), then forgets
// it (attempt_not_found), and checks only the open attempts' leases: an
// open attempt is neither forgotten nor abandoned while its lease runs.
func TestReaperRetainsThenForgets(t *testing.T) {
	ts := startServer(t, "", func(c *serverConfig) { c.reapEvery = time.Hour }) // reapOnce by hand
	ts.openRun("r")
	ts.openRun("o")
	p, _ := ts.begin("r", nil)
	c1 := ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "v"})
	open, _ := ts.begin("o", map[string]any{"lease_ms": time.Hour.Milliseconds()})
	srv := ts.srv
	srv.mu.Lock()
	nOpen, nDone := len(srv.mu.open), len(srv.mu.done)
	srv.mu.Unlock()
	if nOpen != 1 || nDone != 1 {
		t.Fatalf("after a commit and a begin: %d open, %d done attempts; want 1 and 1", nOpen, nDone)
	}
	srv.reapOnce(time.Now())
	if c2 := ts.commit(p, map[string]any{"op": "set", "key": "k", "value": "v"}); c2.str("head") != c1.str("head") {
		t.Fatalf("a repeated commit within retain: %s, first %s", c2, c1)
	}
	// Past the lease and retain of the committed attempt, but before the
	// open one's lease ends (an hour): the committed one is forgotten.
	srv.reapOnce(time.Now().Add(ts.cfg.lease + ts.cfg.retain + time.Second))
	wantError(t, ts.do("POST", p+"/commit", map[string]any{"delta": []any{}}), 404, codeAttemptNotFound, "attempt")
	srv.mu.Lock()
	nOpen, nDone, nAll := len(srv.mu.open), len(srv.mu.done), len(srv.mu.attempts)
	srv.mu.Unlock()
	if nOpen != 1 || nDone != 0 || nAll != 1 {
		t.Fatalf("after forgetting: %d open, %d done, %d attempts; want 1, 0, 1", nOpen, nDone, nAll)
	}
	wantStatus(t, ts.act(open, 0, map[string]any{"tool": "t"}, "r"), "done")
	if got := srv.counters.expired.Load(); got != 0 {
		t.Fatalf("%d attempts expired; the open one's lease has not run out", got)
	}
}
