package downstream

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/google/go-cmp/cmp"
)

var _ agent.Downstream = (*Client)(nil)

func start(t *testing.T, opts *Options) (*Server, *Client) {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s, NewClient(s.URL())
}

func TestCallsAndEffects(t *testing.T) {
	s, c := start(t, nil)
	ctx := context.Background()
	args := []byte(`{"region":"eu-west-1"}`)
	type call struct {
		tool, key  string
		idempotent bool
	}
	calls := []call{
		{"bucket.create", "k1", true},
		{"bucket.create", "k1", true}, // honoured key: no new effect
		{"billing.charge", "k2", false},
		{"billing.charge", "k2", false}, // not idempotent: a duplicate effect
		{"email.send", "k3", false},
	}
	var results [][]byte
	for _, cl := range calls {
		r, err := c.Exec(ctx, cl.tool, args, cl.key, cl.idempotent)
		if err != nil {
			t.Fatalf("%s %s: %v", cl.tool, cl.key, err)
		}
		if want := workload.Downstream(cl.tool, args, cl.key); !bytes.Equal(r, want) {
			t.Errorf("%s %s: result %q, want workload.Downstream's %q", cl.tool, cl.key, r, want)
		}
		results = append(results, r)
	}
	want := []Effect{
		{Key: "k1", Tool: "bucket.create", Effects: 1, Calls: 2},
		{Key: "k2", Tool: "billing.charge", Effects: 2, Calls: 2},
		{Key: "k3", Tool: "email.send", Effects: 1, Calls: 1},
	}
	if diff := cmp.Diff(want, s.Effects()); diff != "" {
		t.Errorf("server effects (-want +got):\n%s", diff)
	}
	got, err := c.Effects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET /effects (-want +got):\n%s", diff)
	}
	if h := s.History(); len(h) != len(calls) || h[1].Effect || !h[3].Effect || h[3].Effects != 2 {
		t.Errorf("history %+v", h)
	}

	for _, tc := range []struct {
		key  string
		want []byte
		ok   bool
	}{
		{"k1", results[0], true},
		{"k2", results[2], true},
		{"missing", nil, false},
	} {
		r, ok, err := c.LookupContext(ctx, tc.key)
		if err != nil || ok != tc.ok || !bytes.Equal(r, tc.want) {
			t.Errorf("LookupContext(%q) = %q, %v, %v; want %q, %v", tc.key, r, ok, err, tc.want, tc.ok)
		}
		if r, ok, err := c.Lookup(context.Background(), tc.key); err != nil || ok != tc.ok || !bytes.Equal(r, tc.want) {
			t.Errorf("Lookup(%q) = %q, %v, %v; want %q, %v", tc.key, r, ok, err, tc.want, tc.ok)
		}
	}
}

func TestBadRequests(t *testing.T) {
	s, _ := start(t, nil)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"not json", "POST", "/call", `{`, http.StatusBadRequest},
		{"no tool", "POST", "/call", `{"key":"k"}`, http.StatusBadRequest},
		{"no key", "POST", "/call", `{"tool":"t"}`, http.StatusBadRequest},
		{"too large", "POST", "/call", `{"tool":"t","key":"k","args":"` + strings.Repeat("x", MaxRequestBytes) + `"}`, http.StatusRequestEntityTooLarge},
		{"lookup without key", "GET", "/lookup", "", http.StatusBadRequest},
		{"wrong method", "GET", "/call", "", http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, s.URL()+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
	if e := s.Effects(); len(e) != 0 {
		t.Errorf("bad requests took effect: %+v", e)
	}
}

func TestHooks(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	var s *Server
	refuse := errors.New("down for maintenance")
	s, c := start(t, &Options{
		Result: func(tool string, args []byte, key string) []byte { return []byte(`{"ok":"` + key + `"}`) },
		BeforeEffect: func(c Call) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, "before "+c.Key)
			if c.Key == "refused" {
				return refuse
			}
			return nil
		},
		AfterEffect: func(c Call) {
			// The effect is recorded before the hook runs: a crash here
			// leaves an effect that a lookup finds.
			r, ok := s.Lookup(c.Key)
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, "after "+c.Key+" "+string(r))
			if !ok || !c.Effect || c.Effects != 1 {
				t.Errorf("AfterEffect(%+v): lookup %v", c, ok)
			}
		},
	})
	ctx := context.Background()
	if _, err := c.Exec(ctx, "t", []byte(`{}`), "a", false); err != nil {
		t.Fatal(err)
	}
	_, err := c.Exec(ctx, "t", []byte(`{}`), "refused", false)
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), refuse.Error()) {
		t.Errorf("refused call: err %v, want HTTP 503 naming the reason", err)
	}
	want := []string{"before a", `after a {"ok":"a"}`, "before refused"}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("hook order (-want +got):\n%s", diff)
	}
	if _, ok := s.Lookup("refused"); ok {
		t.Error("a refused call took effect")
	}
}

// TestAgentInDoubt drives the scripted agent over HTTP and crashes it (a
// crash clone of its filesystem) right after the downstream took the effect
// of a non-idempotent call and before the agent heard back: after the
// restart the action is in doubt, and the agent reconciles it with a lookup
// instead of calling again.
func TestAgentInDoubt(t *testing.T) {
	ctx := context.Background()
	const seed = 7
	// Find a seq whose scripted tool is not idempotent.
	var seq uint64
	for s := uint64(2); s < 50; s++ {
		if !workload.Script("r", s, seed).Idempotent {
			seq = s
			break
		}
	}
	if seq == 0 {
		t.Fatal("no non-idempotent atom in the script")
	}
	mem := vfs.NewCrashableMem()
	var crashed *vfs.MemFS
	srv, cl := start(t, &Options{AfterEffect: func(c Call) {
		if c.Key == workload.IdempotencyKey("r", seq) && crashed == nil {
			crashed = mem.CrashClone(vfs.CrashCloneCfg{}) // only what was synced survives
		}
	}})
	open := func(fs vfs.FS) (*engine.DB, *engine.Run) {
		db, err := engine.Open("store", &engine.Options{FS: fs, DictSamples: -1})
		if err != nil {
			t.Fatal(err)
		}
		r, err := db.Run(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		return db, r
	}
	db, run := open(mem)
	for crashed == nil {
		if _, err := agent.Step(ctx, run, seed, cl); err != nil {
			t.Fatal(err)
		}
	}
	db.Close() // the process that crashed goes no further

	db, run = open(crashed)
	defer db.Close()
	if got, _, err := run.Interrupted(ctx); err != nil || got != seq {
		t.Fatalf("Interrupted() = %d, %v; want seq %d", got, err, seq)
	}
	for run.LastSeq() < seq+2 {
		if _, err := agent.Step(ctx, run, seed, cl); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range srv.Effects() {
		if e.Effects != 1 {
			t.Errorf("key %s (%s): %d effects, want 1", e.Key, e.Tool, e.Effects)
		}
	}
	if e := srv.Effects(); len(e) != int(seq)+2 {
		t.Errorf("%d keys called, want %d", len(e), seq+2)
	}
}
