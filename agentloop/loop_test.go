package agentloop_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/agentloop"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/google/go-cmp/cmp"
)

func scriptLoop(run *engine.Run, m *scripted, w *world) *agentloop.Loop {
	return &agentloop.Loop{
		Run: run, Model: m.complete, ModelID: "scripted", Tools: w.tools(), Reconcile: w.reconcile,
		Prompt: prompt, Logger: quiet(), Retry: agentloop.Retry{Backoff: noWait},
	}
}

func TestDriveToCompletion(t *testing.T) {
	db, _ := openDisk(t)
	const id = "errand-1"
	run := newRun(t, db, id)
	w, m := newWorld(), &scripted{}
	loop := scriptLoop(run, m, w)
	st, res, err := loop.Drive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := run.State()
	final := f.Messages[len(f.Messages)-1].Content
	if st != engine.StatusCompleted || string(res) != final || !strings.HasPrefix(final, "Ordered 2 coffee") {
		t.Fatalf("Drive = %v, %q; want completed with the final answer %q", st, res, final)
	}
	if run.Status() != engine.StatusCompleted || run.LastSeq() != 3 {
		t.Fatalf("run is %v at seq %d, want completed at 3", run.Status(), run.LastSeq())
	}
	// The frame: the prompt, then each step's turn and its tool messages,
	// each answering its call by id with the result certified under the
	// call's default key (the model call takes index 0 of each atom).
	key := func(seq uint64, i int) string { return ledger.DefaultKey(id, seq, i) }
	want := []frame.Message{
		prompt[0], prompt[1],
		scriptTurn(prompt),
		{Role: frame.RoleTool, CallID: "call_a", Tool: "lookup_stock", Content: string(result("lookup_stock", []byte(`{"item": "coffee"}`), key(1, 1)))},
		{Role: frame.RoleTool, CallID: "call_b", Tool: "place_order", Content: string(result("place_order", []byte(`{ "item":"coffee",  "qty":2 }`), key(1, 2)))},
	}
	want = append(want, scriptTurn(want))
	want = append(want, frame.Message{Role: frame.RoleTool, CallID: "call_c", Tool: "send_email",
		Content: string(result("send_email", want[5].ToolCalls[0].Arguments, key(2, 1)))})
	want = append(want, scriptTurn(want))
	if diff := cmp.Diff(want, f.Messages); diff != "" {
		t.Fatalf("conversation (-want +got):\n%s", diff)
	}
	// Arguments byte for byte, as the model wrote them.
	if got := string(f.Messages[2].ToolCalls[1].Arguments); got != `{ "item":"coffee",  "qty":2 }` {
		t.Errorf("arguments stored as %q", got)
	}
	if diff := cmp.Diff([]string{key(1, 0), key(2, 0), key(3, 0)}, m.keys); diff != "" {
		t.Errorf("model call keys (-want +got):\n%s", diff)
	}
	w.once(t, scriptKeys)

	// Driving an ended run returns how it ended, without a call.
	st2, res2, err := scriptLoop(run, m, w).Drive(ctx)
	if err != nil || st2 != st || string(res2) != string(res) || m.calls != 3 {
		t.Fatalf("second Drive = %v, %q, %v after %d model calls; want the same end, no call", st2, res2, err, m.calls)
	}
}

// crashTrial drives the scripted run on a crash-simulating filesystem and
// loses power at each of points in turn, one per incarnation: a point is
// "model:SEQ" (in the model call of atom SEQ, before its certificate),
// "before:TOOL" and "after:TOOL" (in the tool's call, before or after its
// effect: the call is then in doubt), "extend:SEQ" (before atom SEQ's
// commit). After each power loss it opens the store again and drives on.
// It returns the final store and the number of incarnations.
func crashTrial(t *testing.T, mode engine.Durability, id string, w *world, points []string) (*vfs.MemFS, int) {
	t.Helper()
	mem := vfs.NewCrashableMem()
	for inc := 0; ; inc++ {
		db, err := engine.Open("store", memOptions(mem, mode))
		if err != nil {
			t.Fatalf("incarnation %d: open: %v", inc, err)
		}
		run := newRun(t, db, id)
		dctx, cancel := context.WithCancel(ctx)
		var clone *vfs.MemFS
		var dead atomic.Bool
		point := ""
		if inc < len(points) {
			point = points[inc]
		}
		// crash takes the disk as power loss leaves it, and stops this
		// incarnation: nothing it does from now on reaches the world.
		crash := func(at string) bool {
			if at != point || dead.Load() {
				return false
			}
			clone = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			dead.Store(true)
			cancel()
			return true
		}
		errCrash := errors.New("power lost")
		w.hook = func(tool, key, when string) error {
			if dead.Load() || crash(when+":"+tool) {
				return errCrash
			}
			return nil
		}
		m := &scripted{hook: func(req *agentloop.Request) error {
			seq := 1
			for _, msg := range req.Messages {
				if msg.Role == frame.RoleAssistant {
					seq++
				}
			}
			if dead.Load() || crash(fmt.Sprintf("model:%d", seq)) {
				return errCrash
			}
			return nil
		}}
		loop := scriptLoop(run, m, w)
		loop.Extend = func(ctx context.Context, s *agentloop.Step, d *frame.Delta) error {
			if crash(fmt.Sprintf("extend:%d", s.Seq)) {
				return errCrash
			}
			d.Set(fmt.Sprintf("step-%d", s.Seq), fmt.Appendf(nil, "%d calls, final %t", len(s.Results), s.Final))
			return nil
		}
		st, _, err := loop.Drive(dctx)
		cancel()
		db.Close()
		if clone != nil {
			if err == nil {
				t.Fatalf("incarnation %d: Drive went on after the power loss at %s", inc, point)
			}
			mem = clone
			continue
		}
		if point != "" {
			t.Fatalf("incarnation %d: point %s never came", inc, point)
		}
		if err != nil || st != engine.StatusCompleted {
			t.Fatalf("incarnation %d: Drive = %v, %v; want completed", inc, st, err)
		}
		w.hook = nil
		return mem, inc + 1
	}
}

// TestCrashConvergence: whatever point of a step power is lost at, once
// or several times, the run resumes and ends as one that never lost power:
// the same frame and head at every seq, the same answer, every effect
// once, a store that verifies.
func TestCrashConvergence(t *testing.T) {
	const id = "errand-crash"
	trials := [][]string{
		{"model:1"}, {"model:3"},
		{"before:lookup_stock"}, {"after:lookup_stock"}, // idempotent: made again, same key
		{"before:place_order"}, {"after:place_order"}, // in doubt: reconciled
		{"after:send_email"},
		{"extend:1"}, {"extend:3"}, // every call certified: nothing runs again
		{"after:place_order", "extend:1", "model:2", "before:send_email", "extend:3"},
	}
	for _, mode := range []engine.Durability{engine.Strict, engine.Relaxed} {
		refWorld := newWorld()
		ref, _ := crashTrial(t, mode, id, refWorld, nil)
		for _, points := range trials {
			t.Run(fmt.Sprintf("%v/%s", mode, strings.Join(points, ",")), func(t *testing.T) {
				w := newWorld()
				got, n := crashTrial(t, mode, id, w, points)
				if n != len(points)+1 {
					t.Fatalf("%d incarnations, want %d", n, len(points)+1)
				}
				w.once(t, scriptKeys)
				compareStores(t, mode, id, ref, got)
			})
		}
	}
}

// compareStores checks that run id has the same frames, heads, status and
// result in both stores, and that both verify.
func compareStores(t *testing.T, mode engine.Durability, id string, ref, got *vfs.MemFS) {
	t.Helper()
	open := func(fs *vfs.MemFS) (*engine.DB, *engine.Run) {
		db, err := engine.Open("store", memOptions(fs, mode))
		if err != nil {
			t.Fatal(err)
		}
		return db, newRun(t, db, id)
	}
	dbA, a := open(ref)
	defer dbA.Close()
	dbB, b := open(got)
	defer dbB.Close()
	if a.LastSeq() != b.LastSeq() {
		t.Fatalf("last seq %d, want %d", b.LastSeq(), a.LastSeq())
	}
	for seq := uint64(1); seq <= a.LastSeq(); seq++ {
		fa, err := a.StateAt(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		fb, err := b.StateAt(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(fa, fb); diff != "" {
			t.Fatalf("frame at seq %d (-never crashed +crashed):\n%s", seq, diff)
		}
		ia, err := a.Atom(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		ib, err := b.Atom(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if ia.Head != ib.Head {
			t.Fatalf("head at seq %d: %x, want %x", seq, ib.Head[:8], ia.Head[:8])
		}
	}
	infoA, infoB := a.Info(), b.Info()
	if infoA.Status != infoB.Status || string(infoA.Result) != string(infoB.Result) {
		t.Fatalf("ended %v %q, want %v %q", infoB.Status, infoB.Result, infoA.Status, infoA.Result)
	}
	dbA.Close()
	dbB.Close()
	verify(t, "store", &memLockFS{FS: ref})
	verify(t, "store", &memLockFS{FS: got})
}

// flaky fails the first n calls of a model.
func flaky(n int, m *scripted) (*atomic.Int32, func(*agentloop.Request) error) {
	var calls atomic.Int32
	return &calls, func(*agentloop.Request) error {
		if calls.Add(1) <= int32(n) {
			return errors.New("HTTP 503: overloaded")
		}
		return nil
	}
}

func TestRetryAfterFailedStep(t *testing.T) {
	db, _ := openDisk(t)
	run := newRun(t, db, "errand-retry")
	w, m := newWorld(), &scripted{}
	_, m.hook = flaky(2, m)
	// place_order fails transiently (without effect) the first time: the
	// step is tried again; lookup_stock, certified in the failed try, is
	// not called again, and place_order is called again under its key.
	loop := scriptLoop(run, m, w)
	var orders []string
	var mu sync.Mutex
	inner := loop.Tools["place_order"].Func
	po := loop.Tools["place_order"]
	po.Func = func(ctx context.Context, c frame.ToolCall, key string) ([]byte, error) {
		mu.Lock()
		orders = append(orders, key)
		first := len(orders) == 1
		mu.Unlock()
		if first {
			return nil, agentloop.Transient(errors.New("connection refused"))
		}
		return inner(ctx, c, key)
	}
	loop.Tools["place_order"] = po
	loop.Retry.Attempts = 4 // the step fails three times
	st, _, err := loop.Drive(ctx)
	if err != nil || st != engine.StatusCompleted {
		t.Fatalf("Drive = %v, %v; want completed", st, err)
	}
	key := ledger.DefaultKey(run.ID(), 1, 2)
	if len(orders) != 2 || orders[0] != key || orders[1] != key {
		t.Errorf("place_order called with keys %q, want %q twice", orders, key)
	}
	n := 0
	for _, c := range w.calls {
		if strings.HasPrefix(c, "lookup_stock ") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("lookup_stock called %d times, want once: its certificate answers the retry", n)
	}
	if f := db.Stats().Fails; f != 3 {
		t.Errorf("%d failed atoms, want 3 (two model errors, one transient tool error)", f)
	}
	w.once(t, scriptKeys)
}

func TestRetriesExhaustedEndFailed(t *testing.T) {
	db, _ := openDisk(t)
	run := newRun(t, db, "errand-down")
	w, m := newWorld(), &scripted{}
	calls, hook := flaky(1<<30, m)
	m.hook = hook
	loop := scriptLoop(run, m, w)
	loop.Retry.Attempts = 4
	st, res, err := loop.Drive(ctx)
	if err != nil || st != engine.StatusFailed {
		t.Fatalf("Drive = %v, %v; want failed", st, err)
	}
	if !strings.Contains(string(res), "failed 4 times") || !strings.Contains(string(res), "HTTP 503: overloaded") {
		t.Errorf("result %q does not say why", res)
	}
	if calls.Load() != 4 || run.Status() != engine.StatusFailed || run.LastSeq() != 0 {
		t.Errorf("%d model calls, run %v at seq %d; want 4, failed at 0", calls.Load(), run.Status(), run.LastSeq())
	}
	if _, err := run.Begin(ctx); !errors.Is(err, engine.ErrRunEnded) {
		t.Errorf("Begin of the failed run: %v, want ErrRunEnded", err)
	}
}

// unsure makes place_order report ErrUnknownOutcome on its first call,
// after its effect (effect) or before it, and counts its calls by key.
func unsure(loop *agentloop.Loop, effect bool) *[]string {
	var keys []string
	t := loop.Tools["place_order"]
	inner := t.Func
	t.Func = func(ctx context.Context, c frame.ToolCall, key string) ([]byte, error) {
		keys = append(keys, key)
		if len(keys) > 1 {
			return inner(ctx, c, key)
		}
		if effect {
			if _, err := inner(ctx, c, key); err != nil {
				return nil, err
			}
		}
		return nil, fmt.Errorf("POST /orders: timeout after sending: %w", agentloop.ErrUnknownOutcome)
	}
	loop.Tools["place_order"] = t
	return &keys
}

func TestUnknownOutcomeReconciled(t *testing.T) {
	for _, happened := range []bool{true, false} {
		t.Run(fmt.Sprintf("happened=%t", happened), func(t *testing.T) {
			db, _ := openDisk(t)
			run := newRun(t, db, "errand-unsure")
			w, m := newWorld(), &scripted{}
			loop := scriptLoop(run, m, w)
			keys := unsure(loop, happened)
			var asked []string
			loop.Reconcile = func(ctx context.Context, c frame.ToolCall, key string) ([]byte, bool, error) {
				asked = append(asked, c.Name+" "+key)
				return w.reconcile(ctx, c, key)
			}
			st, _, err := loop.Drive(ctx)
			if err != nil || st != engine.StatusCompleted {
				t.Fatalf("Drive = %v, %v; want completed", st, err)
			}
			key := ledger.DefaultKey(run.ID(), 1, 2)
			if diff := cmp.Diff([]string{"place_order " + key}, asked); diff != "" {
				t.Errorf("reconciled (-want +got):\n%s", diff)
			}
			// Happened: the reconciled result is recorded, no second call.
			// Not: called again, under the same key.
			want := []string{key}
			if !happened {
				want = append(want, key)
			}
			if diff := cmp.Diff(want, *keys); diff != "" {
				t.Errorf("place_order calls (-want +got):\n%s", diff)
			}
			w.once(t, scriptKeys)
			// The conversation is the one of a run without doubt.
			ref := refConversation(t)
			if diff := cmp.Diff(ref, run.State().Messages); diff != "" {
				t.Errorf("conversation differs from a run without doubt (-want +got):\n%s", diff)
			}
		})
	}
}

// refConversation is the scripted run's conversation when nothing goes
// wrong, in a run named "errand-unsure".
func refConversation(t *testing.T) []frame.Message {
	t.Helper()
	db, _ := openDisk(t)
	run := newRun(t, db, "errand-unsure")
	if _, _, err := scriptLoop(run, &scripted{}, newWorld()).Drive(ctx); err != nil {
		t.Fatal(err)
	}
	return run.State().Messages
}

func TestInDoubtUnsettled(t *testing.T) {
	db, _ := openDisk(t)
	run := newRun(t, db, "errand-unsure")
	w, m := newWorld(), &scripted{}

	// No Reconcile: Drive stops, the run stays active, its atom failed.
	loop := scriptLoop(run, m, w)
	loop.Reconcile = nil
	unsure(loop, true)
	st, _, err := loop.Drive(ctx)
	if !errors.Is(err, agentloop.ErrUnsettled) || st != engine.StatusActive {
		t.Fatalf("Drive without Reconcile = %v, %v; want active, ErrUnsettled", st, err)
	}
	if info := run.Info(); info.Status != engine.StatusActive || info.Running != 0 || info.LastSeq != 0 {
		t.Fatalf("run after Drive: %+v; want active, no atom running, seq 0", info)
	}

	// A Reconcile that cannot reach the downstream: the same, after the
	// retries, and never "no effect".
	loop = scriptLoop(run, m, w)
	asked := 0
	loop.Reconcile = func(context.Context, frame.ToolCall, string) ([]byte, bool, error) {
		asked++
		return nil, false, errors.New("lookup: connection refused")
	}
	st, _, err = loop.Drive(ctx)
	if !errors.Is(err, agentloop.ErrUnsettled) || st != engine.StatusActive || asked != agentloop.DefaultAttempts {
		t.Fatalf("Drive with a failing Reconcile = %v, %v after %d asks; want active, ErrUnsettled after %d",
			st, err, asked, agentloop.DefaultAttempts)
	}

	// Then a working one settles it: the effect happened once.
	st, _, err = scriptLoop(run, m, w).Drive(ctx)
	if err != nil || st != engine.StatusCompleted {
		t.Fatalf("Drive = %v, %v; want completed", st, err)
	}
	w.once(t, scriptKeys)
	if diff := cmp.Diff(refConversation(t), run.State().Messages); diff != "" {
		t.Errorf("conversation (-want +got):\n%s", diff)
	}
}

func TestMaxSteps(t *testing.T) {
	db, _ := openDisk(t)
	run := newRun(t, db, "errand-forever")
	w := newWorld()
	n := 0
	loop := &agentloop.Loop{
		Run: run, Tools: w.tools(), Prompt: prompt, MaxSteps: 4, Logger: quiet(),
		Model: func(ctx context.Context, req *agentloop.Request) (frame.Message, error) {
			n++
			return frame.Message{Role: frame.RoleAssistant, ToolCalls: []frame.ToolCall{
				{ID: fmt.Sprintf("call_%d", n), Name: "lookup_stock", Arguments: []byte(`{"item":"tea"}`)},
			}}, nil
		},
	}
	st, res, err := loop.Drive(ctx)
	if err != nil || st != engine.StatusFailed || !strings.Contains(string(res), "MaxSteps (4 atoms)") {
		t.Fatalf("Drive = %v, %q, %v; want failed at MaxSteps", st, res, err)
	}
	if run.LastSeq() != 4 || n != 4 {
		t.Fatalf("%d atoms, %d model calls; want 4 of each", run.LastSeq(), n)
	}
}

// TestToolErrorsAnswerTheModel: a tool's error, an unknown tool, arguments
// that are not JSON and arguments the ledger refuses are answered with a
// tool message with IsError, which the model sees next; nothing runs for
// the last three.
func TestToolErrorsAnswerTheModel(t *testing.T) {
	db, _ := openDisk(t)
	run := newRun(t, db, "errand-errors")
	w := newWorld()
	tools := w.tools()
	mail := tools["send_email"]
	mailCalls := 0
	mail.Func = func(ctx context.Context, c frame.ToolCall, key string) ([]byte, error) {
		mailCalls++
		return nil, errors.New("mailbox full")
	}
	tools["send_email"] = mail
	var seen []frame.Message
	loop := &agentloop.Loop{
		Run: run, Tools: tools, Prompt: prompt, Logger: quiet(),
		Model: func(ctx context.Context, req *agentloop.Request) (frame.Message, error) {
			if len(req.Messages) > len(prompt) {
				seen = append([]frame.Message(nil), req.Messages...)
				return frame.Message{Role: frame.RoleAssistant, Content: "I could not do it."}, nil
			}
			return frame.Message{Role: frame.RoleAssistant, ToolCalls: []frame.ToolCall{
				{ID: "c1", Name: "teleport", Arguments: []byte(`{}`)},
				{ID: "c2", Name: "place_order", Arguments: []byte(`{"item": "cof`)}, // cut by the token limit
				{ID: "c3", Name: "send_email", Arguments: []byte(`{"to":"ops"}`)},
				{ID: "c4", Name: "lookup_stock", Arguments: []byte(`{"item":"a","item":"b"}`)}, // JSON, refused by the ledger
			}}, nil
		},
	}
	st, _, err := loop.Drive(ctx)
	if err != nil || st != engine.StatusCompleted {
		t.Fatalf("Drive = %v, %v", st, err)
	}
	msgs := run.State().Messages
	turn := msgs[2]
	if got := string(turn.ToolCalls[1].Arguments); got != `"{\"item\": \"cof"` {
		t.Errorf("arguments that are not JSON stored as %s, want them as a JSON string", got)
	}
	if string(turn.ToolCalls[3].Arguments) != `{"item":"a","item":"b"}` {
		t.Errorf("arguments the ledger refuses were changed: %s", turn.ToolCalls[3].Arguments)
	}
	for i, want := range []string{`unknown tool "teleport"`, "not valid JSON", "mailbox full", "arguments were refused"} {
		m := msgs[3+i]
		if m.Role != frame.RoleTool || !m.IsError || m.CallID != turn.ToolCalls[i].ID || !strings.Contains(m.Content, want) {
			t.Errorf("answer %d: %+v; want a tool error for %s saying %q", i, m, turn.ToolCalls[i].ID, want)
		}
	}
	if diff := cmp.Diff(msgs[:len(msgs)-1], seen); diff != "" {
		t.Errorf("the model did not see the answers (-frame +seen):\n%s", diff)
	}
	if mailCalls != 1 || len(w.calls) != 0 {
		t.Errorf("send_email called %d times, world calls %q; want 1 and none", mailCalls, w.calls)
	}
}

func TestCancel(t *testing.T) {
	db, _ := openDisk(t)
	run := newRun(t, db, "errand-cancel")
	w, m := newWorld(), &scripted{}
	loop := scriptLoop(run, m, w)
	cctx, cancel := context.WithCancel(ctx)
	po := loop.Tools["place_order"]
	inner := po.Func
	po.Func = func(ctx context.Context, c frame.ToolCall, key string) ([]byte, error) {
		cancel() // the operator stops the agent while the order is placed
		return inner(ctx, c, key)
	}
	loop.Tools["place_order"] = po
	st, _, err := loop.Drive(cctx)
	if !errors.Is(err, context.Canceled) || st != engine.StatusActive {
		t.Fatalf("Drive = %v, %v; want active, context.Canceled", st, err)
	}
	if info := run.Info(); info.Running != 0 || info.LastSeq != 0 || info.Status != engine.StatusActive {
		t.Fatalf("run after a cancelled Drive: %+v; want active at seq 0, no atom running", info)
	}
	st, _, err = scriptLoop(run, m, w).Drive(ctx)
	if err != nil || st != engine.StatusCompleted {
		t.Fatalf("Drive again = %v, %v", st, err)
	}
	w.once(t, scriptKeys)
}

// TestCommittedAnswerEnds: a crash after the final step's commit and
// before End leaves an active run whose last message is the answer: Drive
// ends it without asking the model.
func TestCommittedAnswerEnds(t *testing.T) {
	db, _ := openDisk(t)
	run := newRun(t, db, "errand-answered")
	atom, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := new(frame.Delta).AppendMessage(prompt[0]).AppendMessage(prompt[1]).
		AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: "Nothing to do."})
	if err := atom.Commit(ctx, d); err != nil {
		t.Fatal(err)
	}
	m := &scripted{}
	st, res, err := scriptLoop(run, m, newWorld()).Drive(ctx)
	if err != nil || st != engine.StatusCompleted || string(res) != "Nothing to do." || m.calls != 0 {
		t.Fatalf("Drive = %v, %q, %v after %d model calls; want completed with the answer, no call", st, res, err, m.calls)
	}
}

// TestBadTurnNotCertified: a turn the frame cannot hold (a call without an
// id) is not certified: the step is tried again and the model asked anew.
func TestBadTurnNotCertified(t *testing.T) {
	db, _ := openDisk(t)
	run := newRun(t, db, "errand-bad")
	w, m := newWorld(), &scripted{}
	loop := scriptLoop(run, m, w)
	bad := true
	loop.Model = func(ctx context.Context, req *agentloop.Request) (frame.Message, error) {
		if bad {
			bad = false
			return frame.Message{Role: frame.RoleAssistant, ToolCalls: []frame.ToolCall{{Name: "lookup_stock"}}}, nil
		}
		return m.complete(ctx, req)
	}
	st, _, err := loop.Drive(ctx)
	if err != nil || st != engine.StatusCompleted || m.calls != 3 {
		t.Fatalf("Drive = %v, %v after %d good calls; want completed after 3", st, err, m.calls)
	}
	if db.Stats().Fails != 1 {
		t.Errorf("%d failed atoms, want 1", db.Stats().Fails)
	}
}

func TestInvalidLoop(t *testing.T) {
	db, _ := openDisk(t)
	run := newRun(t, db, "errand-invalid")
	model := (&scripted{}).complete
	fn := func(context.Context, frame.ToolCall, string) ([]byte, error) { return nil, nil }
	for name, l := range map[string]*agentloop.Loop{
		"no run":       {Model: model},
		"no model":     {Run: run},
		"no func":      {Run: run, Model: model, Tools: map[string]agentloop.Tool{"t": {}}},
		"empty name":   {Run: run, Model: model, Tools: map[string]agentloop.Tool{"": {Func: fn}}},
		"model's name": {Run: run, Model: model, Tools: map[string]agentloop.Tool{agentloop.ModelTool: {Func: fn}}},
		"bad schema":   {Run: run, Model: model, Tools: map[string]agentloop.Tool{"t": {Func: fn, Parameters: []byte("{")}}},
		"negative max": {Run: run, Model: model, MaxSteps: -1},
		"negative try": {Run: run, Model: model, Retry: agentloop.Retry{Attempts: -1}},
	} {
		if _, _, err := l.Drive(ctx); !errors.Is(err, agentloop.ErrInvalidLoop) {
			t.Errorf("%s: %v, want ErrInvalidLoop", name, err)
		}
	}
	if run.LastSeq() != 0 || run.Info().Running != 0 {
		t.Errorf("an invalid loop touched the run")
	}
}

// TestCompactionKeepsCertifiedAnswers: an Extend that drops messages (a
// compacted conversation) leaves the model call's fingerprint that of the
// conversation as it is, so that a step resumed in a new Drive finds the
// answer it got before, and the model is not asked twice.
func TestCompactionKeepsCertifiedAnswers(t *testing.T) {
	db, _ := openDisk(t)
	run := newRun(t, db, "errand-compact")
	w, m := newWorld(), &scripted{}
	cctx, cancel := context.WithCancel(ctx)
	extend := func(ctx context.Context, s *agentloop.Step, d *frame.Delta) error {
		switch s.Seq {
		case 2:
			d.DropMessages(1) // the system prompt
		case 3:
			if cctx.Err() == nil {
				cancel() // the operator stops the agent before the answer commits
				return errors.New("stopped")
			}
		}
		return nil
	}
	loop := scriptLoop(run, m, w)
	loop.Extend = extend
	if _, _, err := loop.Drive(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("first Drive: %v, want it cancelled", err)
	}
	if m.calls != 3 || run.LastSeq() != 2 {
		t.Fatalf("first Drive: %d model calls, seq %d; want 3 calls, seq 2", m.calls, run.LastSeq())
	}
	loop = scriptLoop(run, m, w)
	loop.Extend = extend
	st, _, err := loop.Drive(ctx)
	if err != nil || st != engine.StatusCompleted {
		t.Fatalf("second Drive = %v, %v", st, err)
	}
	if m.calls != 3 {
		t.Errorf("the model was asked %d times, want 3: the resumed step's answer is certified", m.calls)
	}
	if msgs := run.State().Messages; msgs[0].Role != frame.RoleUser {
		t.Errorf("the system prompt was not dropped: %+v", msgs[0])
	}
}

// TestForkFollowsLineage: a fork of a finished run, driven by the same
// loop, gets its parent's certified answers and results at every step
// (I10: same calls at the same positions), so it ends as its parent did
// without asking the model or calling a tool. With another ModelID the
// model is asked anew; the calls it repeats at the same positions still
// do not run again.
func TestForkFollowsLineage(t *testing.T) {
	db, _ := openDisk(t)
	parent := newRun(t, db, "errand-parent")
	w, m := newWorld(), &scripted{}
	if st, _, err := scriptLoop(parent, m, w).Drive(ctx); err != nil || st != engine.StatusCompleted {
		t.Fatalf("parent: %v, %v", st, err)
	}
	effects := len(w.calls)
	want := parent.State()

	fork, err := db.Fork(ctx, parent.ID(), 1, "errand-fork")
	if err != nil {
		t.Fatal(err)
	}
	fm := &scripted{}
	st, res, err := scriptLoop(fork, fm, w).Drive(ctx)
	if err != nil || st != engine.StatusCompleted || string(res) != string(parent.Info().Result) {
		t.Fatalf("fork: %v, %q, %v", st, res, err)
	}
	if fm.calls != 0 || len(w.calls) != effects {
		t.Errorf("the fork asked the model %d times and called tools %d times; want neither", fm.calls, len(w.calls)-effects)
	}
	if diff := cmp.Diff(want, fork.State()); diff != "" {
		t.Errorf("the fork's frame (-parent +fork):\n%s", diff)
	}

	other, err := db.Fork(ctx, parent.ID(), 1, "errand-other-model")
	if err != nil {
		t.Fatal(err)
	}
	om := &scripted{}
	loop := scriptLoop(other, om, w)
	loop.ModelID = "another model"
	if st, _, err := loop.Drive(ctx); err != nil || st != engine.StatusCompleted {
		t.Fatalf("fork with another model: %v, %v", st, err)
	}
	if om.calls != 2 || len(w.calls) != effects {
		t.Errorf("fork with another model: %d model calls, %d tool calls; want 2 and none (the same email at the same place)",
			om.calls, len(w.calls)-effects)
	}
	w.once(t, scriptKeys)
}
