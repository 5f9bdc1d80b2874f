package agentloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/agentloop"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/zeebo/blake3"
)

var ctx = context.Background()

// world is the outside world the tests' tools act on: it counts the effects
// each idempotency key took and remembers each effect's result, so that a
// reconcile can ask it. Results are pure functions of (tool, args, key).
type world struct {
	mu      sync.Mutex
	effects map[string]int
	results map[string][]byte
	calls   []string // "tool key", in order
	// hook, if set, runs for every call with when = "before" (before the
	// effect) or "after" (after it): it returns an error to make the call
	// fail there (before: no effect).
	hook func(tool, key, when string) error
}

func newWorld() *world { return &world{effects: map[string]int{}, results: map[string][]byte{}} }

func result(tool string, args []byte, key string) []byte {
	sum := blake3.Sum256([]byte(tool + "\x00" + string(args) + "\x00" + key))
	return fmt.Appendf(nil, `{"tool":%q,"receipt":"%x"}`, tool, sum[:6])
}

func (w *world) call(tool string, args []byte, key string, idempotent bool) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, tool+" "+key)
	if w.hook != nil {
		if err := w.hook(tool, key, "before"); err != nil {
			return nil, err
		}
	}
	if r, ok := w.results[key]; ok && idempotent {
		return r, nil
	}
	r := result(tool, args, key)
	w.effects[key]++
	w.results[key] = r
	if w.hook != nil {
		if err := w.hook(tool, key, "after"); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (w *world) lookup(key string) ([]byte, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.results[key]
	return r, ok
}

// once checks that every key took effect exactly once, and that there were
// want keys.
func (w *world) once(t *testing.T, want int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, n := range w.effects {
		if n != 1 {
			t.Errorf("key %s took effect %d times", k, n)
		}
	}
	if len(w.effects) != want {
		t.Errorf("%d keys took effect, want %d: %v", len(w.effects), want, w.effects)
	}
}

func (w *world) tools() map[string]agentloop.Tool {
	tool := func(name string, idempotent bool) agentloop.Tool {
		return agentloop.Tool{
			Description: "the " + name + " tool",
			Parameters:  []byte(`{"type":"object"}`),
			Idempotent:  idempotent,
			Func: func(ctx context.Context, c frame.ToolCall, key string) ([]byte, error) {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				return w.call(c.Name, c.Arguments, key, idempotent)
			},
		}
	}
	return map[string]agentloop.Tool{
		"lookup_stock": tool("lookup_stock", true),
		"place_order":  tool("place_order", false),
		"send_email":   tool("send_email", false),
	}
}

func (w *world) reconcile(ctx context.Context, c frame.ToolCall, key string) ([]byte, bool, error) {
	r, ok := w.lookup(key)
	return r, ok, nil
}

// scripted is a deterministic model: its answer is a function of the
// request alone. Turn 0 looks up stock and orders (two calls), turn 1
// mails the order's receipt, turn 2 answers with the mail's receipt.
type scripted struct {
	mu    sync.Mutex
	calls int
	keys  []string
	// hook, if set, runs at the start of every call; an error fails it.
	hook func(req *agentloop.Request) error
}

func (m *scripted) complete(ctx context.Context, req *agentloop.Request) (frame.Message, error) {
	m.mu.Lock()
	m.calls++
	m.keys = append(m.keys, req.Key)
	hook := m.hook
	m.mu.Unlock()
	if hook != nil {
		if err := hook(req); err != nil {
			return frame.Message{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return frame.Message{}, err
	}
	return scriptTurn(req.Messages), nil
}

// scriptTurn is the scripted answer to a conversation.
func scriptTurn(msgs []frame.Message) frame.Message {
	turn := 0
	var lastTool string
	for _, m := range msgs {
		if m.Role == frame.RoleAssistant {
			turn++
		}
		if m.Role == frame.RoleTool {
			lastTool = m.Content
		}
	}
	switch turn {
	case 0:
		return frame.Message{Role: frame.RoleAssistant, Content: "Checking stock first.", ToolCalls: []frame.ToolCall{
			{ID: "call_a", Name: "lookup_stock", Arguments: []byte(`{"item": "coffee"}`)},
			{ID: "call_b", Name: "place_order", Arguments: []byte(`{ "item":"coffee",  "qty":2 }`)},
		}}
	case 1:
		body, _ := json.Marshal(map[string]string{"to": "ops@example.com", "body": lastTool})
		return frame.Message{Role: frame.RoleAssistant, ToolCalls: []frame.ToolCall{
			{ID: "call_c", Name: "send_email", Arguments: body},
		}}
	}
	return frame.Message{Role: frame.RoleAssistant, Content: "Ordered 2 coffee; mail receipt " + lastTool}
}

// prompt is the scripted run's beginning.
var prompt = []frame.Message{
	{Role: frame.RoleSystem, Content: "You run the office's errands."},
	{Role: frame.RoleUser, Content: "Order 2 bags of coffee and mail ops the receipt."},
}

// scriptKeys is the number of keys the scripted run takes effect under.
const scriptKeys = 3

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// memOptions are engine options on a crash-simulating filesystem.
func memOptions(fs vfs.FS, mode engine.Durability) *engine.Options {
	return &engine.Options{
		FS:            &memLockFS{FS: fs},
		Durability:    mode,
		SnapshotEvery: 2,
		Logger:        quiet(),
		Nonces:        zeros{}, // the same heads in every store
	}
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// memLockFS takes file locks in memory: MemFS.Lock deadlocks with a
// CrashClone taken while Pebble opens in the background (pebble v2.1.7).
type memLockFS struct {
	vfs.FS
	mu   sync.Mutex
	held map[string]bool
}

func (fs *memLockFS) Lock(name string) (io.Closer, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.held[name] {
		return nil, fmt.Errorf("lock %s: held", name)
	}
	if fs.held == nil {
		fs.held = map[string]bool{}
	}
	fs.held[name] = true
	return unlock(func() error {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		delete(fs.held, name)
		return nil
	}), nil
}

type unlock func() error

func (u unlock) Close() error { return u() }

// openDisk opens a store in a fresh directory; a deep Verify of it runs
// when the test ends.
func openDisk(t *testing.T) (*engine.DB, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	db, err := engine.Open(dir, &engine.Options{Logger: quiet(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil && !errors.Is(err, engine.ErrClosed) {
			t.Errorf("close: %v", err)
		}
		verify(t, dir, nil)
	})
	return db, dir
}

func verify(t *testing.T, dir string, fs vfs.FS) {
	t.Helper()
	if _, err := os.Stat(dir); fs == nil && err != nil {
		t.Errorf("verify: %v", err)
		return
	}
	rep, err := engine.Verify(ctx, dir, &engine.VerifyOptions{FS: fs, Deep: true})
	if err != nil {
		t.Errorf("verify: %v", err)
		return
	}
	if !rep.OK {
		var b strings.Builder
		for _, f := range rep.Failures {
			fmt.Fprintf(&b, "\n  %v", f)
		}
		t.Errorf("verify: store not intact:%s", b.String())
	}
}

func newRun(t *testing.T, db *engine.DB, id string) *engine.Run {
	t.Helper()
	run, err := db.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func noWait(int) time.Duration { return 0 }
