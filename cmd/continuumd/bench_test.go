package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

var (
	benchArgs   = []byte(`{"region":"eu-west-1","service":"checkout","replicas":3}`)
	benchResult = `{"status":"ok","deployment":"d-1234","replicas":3}`
	benchMsg    = "deployed checkout to eu-west-1, 3 replicas; next: verify health checks"
)

func benchDB(b *testing.B) *engine.DB {
	db, err := engine.Open("store", &engine.Options{FS: vfs.NewMem(), NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// BenchmarkAtom is one atom (begin, one action executed by the client,
// commit) through the server's handler, without a socket, against the same
// atom through the library: what the server's code adds per atom, apart
// from the network stack and the processes' scheduling. In memory, no
// fsync.
//
//	go test ./cmd/continuumd -run '^$' -bench BenchmarkAtom -count 6
func BenchmarkAtom(b *testing.B) {
	b.Run("library", func(b *testing.B) {
		ctx := context.Background()
		run, err := benchDB(b).Run(ctx, "r")
		if err != nil {
			b.Fatal(err)
		}
		exec := func(context.Context, string) ([]byte, error) { return []byte(benchResult), nil }
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			a, err := run.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := a.Do(ctx, ledger.Action{Tool: "deploy", Args: benchArgs}, exec); err != nil {
				b.Fatal(err)
			}
			d := new(frame.Delta).Set("step", []byte(fmt.Sprint(a.Seq()))).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: benchMsg})
			if err := a.Commit(ctx, d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("handler", func(b *testing.B) {
		cfg := testConfig("store")
		srv := newServer(benchDB(b), cfg, slog.New(slog.DiscardHandler))
		h := srv.handler()
		send := func(method, path string, body any) map[string]any {
			var buf []byte
			if body != nil {
				buf, _ = json.Marshal(body)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(method, path, bytes.NewReader(buf)))
			if w.Code >= 300 {
				b.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
			}
			var out map[string]any
			json.Unmarshal(w.Body.Bytes(), &out)
			return out
		}
		send("PUT", "/v1/runs/r", nil)
		call := map[string]any{"tool": "deploy", "args": json.RawMessage(benchArgs)}
		outcome := map[string]any{"result": benchResult}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			a := send("POST", "/v1/runs/r/attempts", map[string]any{})
			p := "/v1/runs/r/attempts/" + a["attempt"].(string)
			send("POST", p+"/calls/0", call)
			send("POST", p+"/calls/0/outcome", outcome)
			send("POST", p+"/commit", map[string]any{"delta": []any{
				map[string]any{"op": "set", "key": "step", "value": fmt.Sprint(a["seq"])},
				map[string]any{"op": "append_message", "role": "assistant", "content": benchMsg},
			}})
		}
	})
}
