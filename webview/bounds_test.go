package webview_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/webview"
)

// TestLongNamesAreCut: a run whose tool names, idempotency keys, memory
// keys, call ids, subgoal ids and a branch's read keys are megabytes long
// (of "<", which the page writes as four bytes each). Every page of it
// shows each such name cut to webview's name bound and says its size, and
// no page is larger than what its atoms' names may take at that bound.
func TestLongNamesAreCut(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "names")
	db, err := engine.Open(dir, &engine.Options{Durability: engine.Relaxed})
	if err != nil {
		t.Fatal(err)
	}
	const size = 2 << 20
	long := func(kind string, i int) string { return fmt.Sprintf("%s%d-", kind, i) + strings.Repeat("<", size) }
	tool, key, mem, call, goal := long("tool", 0), long("key", 0), long("mem", 0), long("call", 0), long("goal", 0)
	run, err := db.Run(ctx, "names")
	if err != nil {
		t.Fatal(err)
	}
	commit := func(a *engine.Atom, err error) func(d *frame.Delta) {
		return func(d *frame.Delta) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Commit(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	ok := func(ctx context.Context, key string) ([]byte, error) { return []byte(`"ok"`), nil }
	// atom 1: the frame's names
	commit(run.Begin(ctx))(new(frame.Delta).SetObjective("long names").AddSubgoal(goal, "a goal").Set(mem, []byte("v")).
		AppendMessage(frame.Message{Role: frame.RoleAssistant, ToolCalls: []frame.ToolCall{{ID: call, Name: tool, Arguments: []byte(`{}`)}}}).
		AppendMessage(frame.Message{Role: frame.RoleAssistant, Parts: []frame.Part{{Kind: frame.PartToolCall, Call: frame.ToolCall{ID: call, Name: tool, Arguments: []byte(`{}`)}}}}).
		AppendMessage(frame.Message{Role: frame.RoleTool, Tool: tool, CallID: call, Content: "done"}).
		AddPending(frame.Pending{CallID: call, Tool: tool, Key: key, Args: []byte(`{}`)}))
	// atoms 2 to 52: an action each, with a long tool, key and
	// compensation, and a set of the long memory key
	const atoms = 52
	for i := 2; i <= atoms; i++ {
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Do(ctx, ledger.Action{Tool: long("tool", i), Key: long("key", i), Args: []byte(`{}`),
			Compensate: &ledger.Action{Tool: long("undo", i), Key: long("undokey", i)}}, ok); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			if _, err := a.Append(ctx, "out", []byte("chunk")); err != nil {
				t.Fatal(err)
			}
		}
		d := new(frame.Delta).Set(mem, fmt.Appendf(nil, "v%d", i))
		if i == 2 {
			d.RemovePending(call)
		}
		commit(a, nil)(d)
	}
	// a branch that reads the long memory key, and a rollback past the
	// last two atoms (their compensations' long names)
	commit(run.Branch(ctx, "b", engine.MemoryKey(mem)))(new(frame.Delta).Set("x", []byte("y")))
	if _, err := run.Rollback(ctx, atoms-2, engine.RollbackOptions{AllowNotUndone: true,
		Exec: func(engine.Undo) ledger.Exec { return ok }}); err != nil {
		t.Fatal(err)
	}
	// an interrupted atom with an action: every page of the run names it
	// in its header
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Do(ctx, ledger.Action{Tool: long("left", 0), Key: long("leftkey", 0), Args: []byte(`{}`)}, ok); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	v, _ := newView(t, webview.Options{Dir: dir})
	// A page of n atoms of this run shows fewer than 32 names of each (in
	// its ops, actions, undos, reads and messages), each at most MaxName
	// bytes and its marker, written at most 5 bytes a byte ("&#34;"), with
	// 8 KiB of markup an atom, and 256 KiB for the rest of the page.
	perName := 5 * (webview.MaxName + 32)
	bound := func(n int) int { return 256<<10 + n*(32*perName+8<<10) }
	runAtoms := atoms + 3 // the branch, the rollback and the interrupted one aside
	for _, c := range []struct {
		page  string
		atoms int
	}{
		{"/", 0}, {"/run?id=names", webview.AtomsPerPage}, {"/run?id=names&from=1", webview.AtomsPerPage},
		{"/frame?id=names&seq=1", 1}, {"/frame?id=names", 1}, {"/frame?id=names&seq=1&against=0", 2}, {"/frame?id=names&against=1", 2},
		{"/ledger?id=names", runAtoms}, {"/dag?id=names", runAtoms}, {"/lineage?id=names", 0}, {"/waits?id=names", 0},
		{"/stream?id=names&name=out", 0}, {"/verify", 0},
	} {
		code, body, _ := get(t, v, c.page)
		t.Logf("%s: %d bytes", c.page, len(body))
		if code != 200 {
			t.Errorf("%s: %d %.300s", c.page, code, body)
		}
		if len(body) > bound(c.atoms) {
			t.Errorf("%s: %d bytes, more than the %d its %d atoms' names may take", c.page, len(body), bound(c.atoms), c.atoms)
		}
		if strings.Contains(body, strings.Repeat("&lt;", webview.MaxName+1)) {
			t.Errorf("%s shows a name longer than %d bytes", c.page, webview.MaxName)
		}
	}
	cut := func(s string) string { return fmt.Sprintf("… (%d bytes)", len(s)) }
	for _, c := range []struct{ page, what, name, before string }{
		{"/run?id=names", "tool", long("tool", atoms), ""}, {"/run?id=names", "idempotency key", long("key", atoms), ""},
		{"/run?id=names", "memory key", mem, ""}, {"/run?id=names", "read key", "memory:" + mem, ""},
		{"/run?id=names", "undo tool", long("undo", atoms), ""}, {"/run?id=names", "header's tool", long("left", 0), ""},
		{"/run?id=names&from=1", "call id", call, ""}, {"/run?id=names&from=1", "subgoal id", goal, ""},
		{"/ledger?id=names", "tool", long("tool", 2), ""}, {"/ledger?id=names", "idempotency key", long("key", 2), ""},
		{"/frame?id=names&seq=1", "memory key", mem, ""}, {"/frame?id=names&seq=1", "call id", call, ""},
		{"/frame?id=names&seq=1", "tool", tool, ""}, {"/frame?id=names&seq=1", "subgoal id", goal, ""}, {"/frame?id=names&seq=1", "pending key", key, ""},
		{"/frame?id=names&seq=1&against=0", "diff's memory key", mem, "memory "},
	} {
		_, body, _ := get(t, v, c.page)
		prefix := c.before + c.name[:strings.Index(c.name, "-")+1]
		if !strings.Contains(body, prefix+strings.Repeat("&lt;", 8)) || !strings.Contains(body, cut(c.name)) {
			t.Errorf("%s does not show the %s %q…, cut, with its size %q", c.page, c.what, prefix, cut(c.name))
		}
	}
}

// TestLoginRedirectStaysHere: the redirect after a login in the URL goes
// to a path of this server, whatever the path asked for: never to one a
// browser reads as another host ("//host", "/\host", with a tab between).
func TestLoginRedirectStaysHere(t *testing.T) {
	dir := demoStore(t)
	for _, prefix := range []string{"/", "/view/"} {
		v, _ := newView(t, webview.Options{Dir: dir, Prefix: prefix})
		for _, target := range []string{
			"/\\evil.example/x", "/%5Cevil.example/x", "//evil.example/x", "/\\\\evil.example/x", "/%5C%5Cevil.example",
			"/%2F%2Fevil.example/x", "/%2F%5Cevil.example", "/%09/evil.example", "/%0A/evil.example", "/%0D%0A/evil.example",
			"///evil.example", "/\\/evil.example", "/%5C%09%2Fevil.example", "/%E2%80%AE/evil.example",
		} {
			target = strings.TrimSuffix(prefix, "/") + target
			r := httptest.NewRequest("GET", target+"?token=test-token-0123456789&seq=2", nil)
			w := httptest.NewRecorder()
			v.ServeHTTP(w, r)
			loc := w.Header().Get("Location")
			// what a browser makes of it: tabs and newlines dropped, "\" as "/"
			seen := strings.ReplaceAll(strings.Map(func(r rune) rune {
				if r == '\t' || r == '\n' || r == '\r' {
					return -1
				}
				return r
			}, loc), `\`, "/")
			u, err := url.Parse(seen)
			if w.Code != http.StatusSeeOther || err != nil || u.Host != "" || u.Scheme != "" || !strings.HasPrefix(loc, prefix) ||
				strings.HasPrefix(seen, "//") || strings.ContainsAny(loc, "\t\r\n\\") || u.Query().Get("seq") != "2" {
				t.Errorf("prefix %s: login at %q: %d, to %q: it must be a path of this server", prefix, target, w.Code, loc)
			}
		}
	}
}
