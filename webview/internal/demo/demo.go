// Package demo writes the stores the web view is tested and measured on,
// through the engine's public API only: an agent's conversation with tool
// calls, results and errors, branches, a fork, a rollback with
// compensations, messages between runs, an erased memory key, waits for
// events and the clock with their events and timeouts, streams out (with a
// failed attempt's chunks), an XSS corpus in messages, tool names, run
// ids, events and chunks, many runs, one long run, and a live agent that
// keeps committing.
package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/seal"
)

// XSS is the corpus of hostile strings the store's content carries: each
// must show as text.
var XSS = []string{
	`<script>window.__xss=1</script>`,
	`"><img src=x onerror="window.__xss=2">`,
	`'><svg onload=window.__xss=3>`,
	`javascript:window.__xss=4`,
	`</textarea></pre><iframe src="javascript:window.__xss=5">`,
	`{{.Secret}} ${7*7} <b onmouseover=alert(1)>hover</b>`,
	"\u202e<a href=javascript:alert(6)>rtl</a>",
}

// XSSRun is the id of the run whose id is hostile.
const XSSRun = `xss-<img src=x onerror="window.__xss=9">`

// Secret is an argument the agent redacts: it must never reach the store.
const Secret = "sk-live-DO-NOT-SHOW-0123456789"

// Erased is the value of the memory key the demo erases.
const Erased = "ERASED-EMAIL-alice@example.com"

// KeyringFile is the demo's keyring file (a fixed test key: never for
// real data).
const KeyringFile = "continuum-keyring 1\ncurrent demo\nkey demo 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n"

// Keyring returns the keyring of KeyringFile.
func Keyring() seal.Keyring {
	k, err := seal.ParseKeyringFile([]byte(KeyringFile))
	if err != nil {
		panic("demo: keyring: " + err.Error())
	}
	return k
}

// Build writes the demo store in dir (created if missing): the runs
// described in the package comment. With an encrypted store (ring set),
// memory key "email" is erasable and one of its values is erased.
func Build(ctx context.Context, dir string, ring seal.Keyring) error {
	opts := &engine.Options{}
	if ring != nil {
		opts.Keyring = ring
		opts.ErasableKeys = []string{"email"}
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := buildAgent(ctx, db, "agent-1"); err != nil {
		return fmt.Errorf("agent-1: %w", err)
	}
	if _, err := db.Fork(ctx, "agent-1", 2, "agent-1-retry"); err != nil {
		return fmt.Errorf("fork: %w", err)
	}
	fork, err := db.Run(ctx, "agent-1-retry")
	if err != nil {
		return err
	}
	if err := commit(ctx, fork, new(frame.Delta).Set("plan", []byte("try the other region")).
		AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: "Retrying in eu-west."})); err != nil {
		return fmt.Errorf("fork commit: %w", err)
	}
	if _, err := db.Fork(ctx, "agent-1-retry", 3, "agent-1-retry-2"); err != nil {
		return fmt.Errorf("fork 2: %w", err)
	}
	if err := buildBranches(ctx, db, "planner"); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	if err := buildRollback(ctx, db, "deploy-rb"); err != nil {
		return fmt.Errorf("deploy-rb: %w", err)
	}
	if err := buildXSS(ctx, db); err != nil {
		return fmt.Errorf("xss: %w", err)
	}
	if err := buildWaits(ctx, db, WaitsRun); err != nil {
		return fmt.Errorf("%s: %w", WaitsRun, err)
	}
	if ring != nil {
		r, err := db.Run(ctx, "pii")
		if err != nil {
			return err
		}
		if err := commit(ctx, r, new(frame.Delta).Set("email", []byte(Erased)).Set("name", []byte("Alice"))); err != nil {
			return err
		}
		if _, err := db.EraseKey(ctx, "pii", "email", "GDPR request 17"); err != nil {
			return fmt.Errorf("erase key: %w", err)
		}
	}
	return nil
}

func commit(ctx context.Context, r *engine.Run, d *frame.Delta) error {
	a, err := r.Begin(ctx)
	if err != nil {
		return err
	}
	return a.Commit(ctx, d)
}

func result(s string) ledger.Exec {
	return func(ctx context.Context, key string) ([]byte, error) { return []byte(s), nil }
}

// buildAgent writes an LLM agent's steps: system and user messages, an
// assistant turn with two tool calls, their results (one an error), parts,
// a message sent to another run and received there, and an ended run.
func buildAgent(ctx context.Context, db *engine.DB, id string) error {
	r, err := db.Run(ctx, id)
	if err != nil {
		return err
	}
	if err := commit(ctx, r, new(frame.Delta).SetObjective("Deploy build 1.4.2 to production").
		AddSubgoal("build", "build the image").AddSubgoal("deploy", "roll it out").
		AppendMessage(frame.Message{Role: frame.RoleSystem, Content: "You are a careful deploy agent."}).
		AppendMessage(frame.Message{Role: frame.RoleUser, Content: "Ship 1.4.2 please."})); err != nil {
		return err
	}
	a, err := r.Begin(ctx)
	if err != nil {
		return err
	}
	out, err := a.Do(ctx, ledger.Action{Tool: "ci.build", Args: []byte(`{"ref":"v1.4.2","token":"` + Secret + `"}`), Redact: []string{"/token"}},
		result(`{"image":"registry/app:1.4.2","seconds":81}`))
	if err != nil {
		return err
	}
	if _, err := a.Do(ctx, ledger.Action{Tool: "ci.lint", Args: []byte(`{"ref":"v1.4.2"}`)},
		func(ctx context.Context, key string) ([]byte, error) {
			return nil, errors.New("lint: 3 warnings treated as errors")
		}); err == nil {
		return errors.New("lint did not fail")
	}
	if err := a.Commit(ctx, new(frame.Delta).
		AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: "Building and linting.", ToolCalls: []frame.ToolCall{
			{ID: "call_1", Name: "ci.build", Arguments: []byte(`{"ref":"v1.4.2"}`)},
			{ID: "call_2", Name: "ci.lint", Arguments: []byte(`{"ref":"v1.4.2"}`)}}}).
		AppendMessage(frame.Message{Role: frame.RoleTool, Tool: "ci.build", CallID: "call_1", Content: string(out)}).
		AppendMessage(frame.Message{Role: frame.RoleTool, Tool: "ci.lint", CallID: "call_2", Content: "lint: 3 warnings treated as errors", IsError: true}).
		SetSubgoalStatus("build", frame.SubgoalDone).
		Set("image", out).Set("notes", []byte(strings.Repeat("a long note about the build. ", 60)))); err != nil {
		return err
	}
	a, err = r.Begin(ctx)
	if err != nil {
		return err
	}
	if err := a.Send(ctx, "notifier", []byte(`{"text":"1.4.2 is rolling out"}`)); err != nil {
		return err
	}
	if err := a.Commit(ctx, new(frame.Delta).
		AppendMessage(frame.Message{Role: frame.RoleAssistant, Parts: []frame.Part{
			{Kind: frame.PartText, Text: "Rolling out; I told the notifier."},
			{Kind: frame.PartToolCall, Call: frame.ToolCall{ID: "call_3", Name: "deploy.rollout", Arguments: []byte(`{"pct":10}`)}}}}).
		AddPending(frame.Pending{CallID: "call_3", Tool: "deploy.rollout", Args: []byte(`{"pct":10}`), Key: "rollout-1.4.2"})); err != nil {
		return err
	}
	n, err := db.Run(ctx, "notifier")
	if err != nil {
		return err
	}
	na, err := n.Begin(ctx)
	if err != nil {
		return err
	}
	m, err := na.Receive(ctx)
	if err != nil {
		return err
	}
	if err := na.Commit(ctx, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleUser, Content: string(m.Payload)})); err != nil {
		return err
	}
	if err := n.End(ctx, engine.StatusCompleted, []byte(`{"notified":1}`)); err != nil {
		return err
	}
	return nil
}

// buildBranches writes a run with two branches from one base.
func buildBranches(ctx context.Context, db *engine.DB, id string) error {
	r, err := db.Run(ctx, id)
	if err != nil {
		return err
	}
	if err := commit(ctx, r, new(frame.Delta).SetObjective("Plan a survey")); err != nil {
		return err
	}
	research, err := r.Branch(ctx, "research")
	if err != nil {
		return err
	}
	review, err := r.Branch(ctx, "review", engine.MemoryKey("draft"))
	if err != nil {
		return err
	}
	found, err := research.Do(ctx, ledger.Action{Tool: "search", Args: []byte(`{"q":"optimistic concurrency"}`)}, result("3 papers"))
	if err != nil {
		return err
	}
	if err := review.Commit(ctx, new(frame.Delta).Set("summary", []byte("reviewed"))); err != nil {
		return err
	}
	if err := research.Commit(ctx, new(frame.Delta).Set("draft", found)); err != nil {
		return err
	}
	return commit(ctx, r, new(frame.Delta).Set("final", []byte("merged")))
}

// buildRollback writes a run that books two things, one with a
// compensation, and rolls back past both.
func buildRollback(ctx context.Context, db *engine.DB, id string) error {
	r, err := db.Run(ctx, id)
	if err != nil {
		return err
	}
	if err := commit(ctx, r, new(frame.Delta).SetObjective("Book a trip")); err != nil {
		return err
	}
	a, err := r.Begin(ctx)
	if err != nil {
		return err
	}
	if _, err := a.Do(ctx, ledger.Action{Tool: "hotel.book", Args: []byte(`{"night":"2026-12-24"}`),
		Compensate: &ledger.Action{Tool: "hotel.cancel", Args: []byte(`{"night":"2026-12-24"}`)}}, result(`{"booking":"H-77"}`)); err != nil {
		return err
	}
	if _, err := a.Do(ctx, ledger.Action{Tool: "email.send", Args: []byte(`{"to":"boss"}`)}, result("sent")); err != nil {
		return err
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("hotel", []byte("H-77"))); err != nil {
		return err
	}
	_, err = r.Rollback(ctx, 1, engine.RollbackOptions{AllowNotUndone: true,
		Exec: func(u engine.Undo) ledger.Exec { return result(`{"cancelled":true}`) }})
	return err
}

// buildXSS writes the corpus into messages, tool names, memory keys and
// values, a run id and a sent message.
func buildXSS(ctx context.Context, db *engine.DB) error {
	r, err := db.Run(ctx, XSSRun)
	if err != nil {
		return err
	}
	a, err := r.Begin(ctx)
	if err != nil {
		return err
	}
	d := new(frame.Delta).SetObjective(XSS[0])
	for i, s := range XSS {
		tool := fmt.Sprintf("tool%d%s", i, s)
		if _, err := a.Do(ctx, ledger.Action{Tool: tool, Args: fmt.Appendf(nil, `{"x":%q}`, s)}, result(s)); err != nil {
			return err
		}
		d.AppendMessage(frame.Message{Role: frame.RoleUser, Content: s}).
			AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: s, ToolCalls: []frame.ToolCall{{ID: fmt.Sprintf("c%d%s", i, s), Name: tool, Arguments: fmt.Appendf(nil, `{"x":%q}`, s)}}}).
			AppendMessage(frame.Message{Role: frame.RoleTool, Tool: tool, CallID: fmt.Sprintf("c%d%s", i, s), Content: s, IsError: i%2 == 0}).
			Set(fmt.Sprintf("key%d%s", i, s), []byte(s)).AddSubgoal(fmt.Sprintf("g%d%s", i, s), s)
	}
	if err := a.Send(ctx, XSSRun, []byte(XSS[1])); err != nil {
		return err
	}
	return a.Commit(ctx, d)
}

// WaitsRun is the id of the run that waits for a human and streams its
// output.
const WaitsRun = "approval"

// buildWaits writes a run that streams tokens (an attempt that failed
// after its first chunks, then the one that committed), waits for a
// human's approval that an event delivers, sleeps past a timer's
// deadline (a timeout), and is left waiting for a review with a deadline,
// with an event of another name kept for a later wait. The event payloads
// and a chunk carry the XSS corpus.
func buildWaits(ctx context.Context, db *engine.DB, id string) error {
	r, err := db.Run(ctx, id)
	if err != nil {
		return err
	}
	a, err := r.Begin(ctx)
	if err != nil {
		return err
	}
	for _, tok := range []string{"Deleting ", "the "} {
		if _, err := a.Append(ctx, "tokens", []byte(tok)); err != nil {
			return err
		}
	}
	if err := a.Fail(ctx, "the model's connection dropped"); err != nil {
		return err
	}
	if a, err = r.Begin(ctx); err != nil {
		return err
	}
	for _, tok := range []string{"I will ", "delete ", "bucket ", "logs-2019", XSS[0]} {
		if _, err := a.Append(ctx, "tokens", []byte(tok)); err != nil {
			return err
		}
	}
	if _, err := a.Append(ctx, "progress", []byte(`{"step":1,"of":3}`)); err != nil {
		return err
	}
	if err := a.Commit(ctx, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant,
		Content: "I will delete bucket logs-2019. Asking for approval first."})); err != nil {
		return err
	}
	if _, err := r.Wait(ctx, "approval", time.Now().Add(24*time.Hour)); err != nil {
		return err
	}
	if _, err := db.SendEvent(ctx, id, "approval", "alice@console-7", []byte(`{"approved":true,"by":"alice","note":`+fmt.Sprintf("%q", XSS[1])+`}`)); err != nil {
		return err
	}
	if a, err = r.Begin(ctx); err != nil {
		return err
	}
	if _, err := a.WaitOutcome(ctx); err != nil {
		return err
	}
	if err := a.Commit(ctx, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: "Approved by alice: bucket deleted."})); err != nil {
		return err
	}
	if _, err := r.Sleep(ctx, time.Now().Add(-time.Second)); err != nil {
		return err
	}
	if _, err := db.Ready(ctx, 0); err != nil { // records the timer's timeout
		return err
	}
	if a, err = r.Begin(ctx); err != nil {
		return err
	}
	if _, err := a.WaitOutcome(ctx); err != nil {
		return err
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("cooldown", []byte("done"))); err != nil {
		return err
	}
	if _, err := db.SendEvent(ctx, id, "comment", "bob-"+XSS[2], []byte(XSS[5])); err != nil {
		return err
	}
	_, err = r.Wait(ctx, "review", time.Now().Add(48*time.Hour))
	return err
}

// Many writes n runs of atoms each (ids "run-000000" on) in dir.
func Many(ctx context.Context, dir string, n, atoms int) error {
	db, err := engine.Open(dir, &engine.Options{Durability: engine.Relaxed})
	if err != nil {
		return err
	}
	defer db.Close()
	for i := range n {
		r, err := db.Run(ctx, fmt.Sprintf("run-%06d", i))
		if err != nil {
			return err
		}
		for j := range atoms {
			if err := commit(ctx, r, new(frame.Delta).Set("step", fmt.Appendf(nil, "%d", j)).
				AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprintf("step %d of run %d", j, i)})); err != nil {
				return err
			}
		}
		if i%3 == 0 {
			if err := r.End(ctx, engine.StatusCompleted, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// Long writes one run, id, of n atoms, each with a tool call and its
// result message; the frame keeps its last 20 messages.
func Long(ctx context.Context, dir, id string, n int) error {
	db, err := engine.Open(dir, &engine.Options{Durability: engine.Relaxed})
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := db.Run(ctx, id)
	if err != nil {
		return err
	}
	for j := range n {
		a, err := r.Begin(ctx)
		if err != nil {
			return err
		}
		out, err := a.Do(ctx, ledger.Action{Tool: "probe", Args: fmt.Appendf(nil, `{"step":%d}`, j)}, result(fmt.Sprintf(`{"ok":true,"step":%d}`, j)))
		if err != nil {
			return err
		}
		d := new(frame.Delta).Set("step", fmt.Appendf(nil, "%d", j)).
			AppendMessage(frame.Message{Role: frame.RoleTool, Tool: "probe", CallID: fmt.Sprintf("c%d", j), Content: string(out)})
		if j >= 20 {
			d.DropMessages(1)
		}
		if err := a.Commit(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// Live keeps the run id of the store in dir committing, one atom every
// interval, until ctx is done; it opens the store (and holds its lock) for
// as long. ready, if set, is called once the store is open.
func Live(ctx context.Context, dir, id string, interval time.Duration, ready func()) error {
	db, err := engine.Open(dir, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := db.Run(ctx, id)
	if err != nil {
		return err
	}
	if ready != nil {
		ready()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for i := 0; ; i++ {
		if err := commit(context.WithoutCancel(ctx), r, new(frame.Delta).Set("tick", fmt.Appendf(nil, "%d", i)).
			AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprintf("live tick %d", i)})); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// CrashInDoubt opens the store in dir, begins an atom of run id and calls
// a tool whose exec ends the process (exit code 3) once its intent is
// durable: the action is left in doubt, the atom interrupted. It returns
// only on an error before that.
func CrashInDoubt(ctx context.Context, dir, id string, ring seal.Keyring) error {
	opts := &engine.Options{}
	if ring != nil {
		opts.Keyring, opts.ErasableKeys = ring, []string{"email"}
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		return err
	}
	r, err := db.Run(ctx, id)
	if err != nil {
		return err
	}
	if err := commit(ctx, r, new(frame.Delta).SetObjective("Pay invoice 981")); err != nil {
		return err
	}
	a, err := r.Begin(ctx)
	if err != nil {
		return err
	}
	_, err = a.Do(ctx, ledger.Action{Tool: "payments.charge", Args: []byte(`{"invoice":981,"cents":4200}`), Idempotent: true},
		func(ctx context.Context, key string) ([]byte, error) {
			os.Exit(3) // the process dies while the charge is in flight
			return nil, nil
		})
	return fmt.Errorf("the exec returned: %v", err)
}
