package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// TestInspectAtomMessages: inspect of an atom lists the messages it sent
// (index, receiver, size) and the ids of those it consumed, in text and
// JSON.
func TestInspectAtomMessages(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "s")
	db, err := engine.Open(dir, storeOptions())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := db.Run(ctx, "a")
	b, _ := db.Run(ctx, "b")
	at, _ := a.Begin(ctx)
	if err := at.Send(ctx, "b", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := at.Commit(ctx, new(frame.Delta)); err != nil {
		t.Fatal(err)
	}
	bt, _ := b.Begin(ctx)
	if _, err := bt.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bt.Commit(ctx, new(frame.Delta)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", dir, "a", "--seq", "1"}, "messages sent: 1\n  0 to \"b\": 5 bytes\n"},
		{[]string{"inspect", dir, "b", "--seq", "1"}, "messages consumed: 1\n  \"a\"/1/0\n"},
		{[]string{"inspect", dir, "a", "--seq", "1", "--json"}, `"sent": [`},
		{[]string{"inspect", dir, "b", "--seq", "1", "--json"}, `"from": "a"`},
	} {
		code, out, errOut := runCLI(c.args...)
		if code != cli.ExitOK || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, stderr %q; output lacks %q:\n%s", c.args, code, errOut, c.want, out)
		}
	}
}
