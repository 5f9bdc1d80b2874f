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

// TestStreamsInspectExportVerify: inspect lists a run's streams, export
// --stream writes its chunks with their attempts' statuses, and verify
// passes the stream records.
func TestStreamsInspectExportVerify(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "s")
	db, err := engine.Open(dir, storeOptions())
	if err != nil {
		t.Fatal(err)
	}
	r, _ := db.Run(ctx, "r")
	a, _ := r.Begin(ctx)
	if _, err := a.Append(ctx, "tok", []byte("lost")); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(ctx, "retry"); err != nil {
		t.Fatal(err)
	}
	a, _ = r.Begin(ctx)
	if _, err := a.Append(ctx, "tok", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, "progress", []byte{0xff, 0x00}); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", dir, "r"}, "streams: progress (1 chunks), tok (2 chunks)"},
		{[]string{"inspect", dir, "r", "--json"}, `"name": "tok"`},
		{[]string{"export", dir, "--run", "r", "--stream", "tok"},
			`{"run":"r","stream":"tok","offset":0,"seq":1,"attempt":1,"status":"failed","data":"lost"}` + "\n" +
				`{"run":"r","stream":"tok","offset":1,"seq":1,"attempt":2,"status":"committed","data":"kept"}` + "\n"},
		{[]string{"export", dir, "--run", "r", "--stream", "tok", "--offset", "1"}, `"offset":1`},
		{[]string{"export", dir, "--run", "r", "--stream", "progress"}, `"data":{"base64":"/wA="}`},
		{[]string{"verify", dir}, ""},
	} {
		code, out, errOut := runCLI(c.args...)
		if code != cli.ExitOK || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, stderr %q; output lacks %q:\n%s", c.args, code, errOut, c.want, out)
		}
	}
	if code, _, errOut := runCLI("export", dir, "--run", "r", "--stream", "a/b"); code == cli.ExitOK || !strings.Contains(errOut, "stream name") {
		t.Errorf("a bad stream name: exit %d, %q", code, errOut)
	}
}
