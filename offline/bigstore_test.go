package offline_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
)

// A store for measuring the tools' memory (README: no tool needs more
// than 256 MB), built only when asked:
//
//	go test -run TestBuildBigStore -bigstore /tmp/big -bigstore.atoms 170000 ./offline
//
// then, e.g., /usr/bin/time -v continuumctl verify --deep /tmp/big. Each
// atom makes one Do (about 200 B of arguments, 300 B of result) and
// commits a delta of about 500 B: three log records (intent, certificate,
// atom), so 170,000 atoms are about 510,000 records, over 40 runs.
var (
	bigStore      = flag.String("bigstore", "", "TestBuildBigStore: build a large store in this directory (skipped when empty)")
	bigStoreAtoms = flag.Int("bigstore.atoms", 170000, "TestBuildBigStore: atoms, over 40 runs")
)

func TestBuildBigStore(t *testing.T) {
	if *bigStore == "" {
		t.Skip("-bigstore not set")
	}
	dir := *bigStore
	if _, err := os.Stat(filepath.Join(dir, layout.StoreName)); err == nil {
		t.Fatalf("%s holds a store already", dir)
	}
	const runs = 40
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	words := strings.Repeat("the agent checks the deployment of service ", 12)
	for i := 0; i < *bigStoreAtoms; i++ {
		r, err := db.Run(ctx, fmt.Sprint("run-", i%runs))
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		args := fmt.Sprintf(`{"n":%d,"q":%q}`, i, words[:180])
		res, err := a.Do(ctx, ledger.Action{Tool: "lookup", Args: []byte(args)}, func(context.Context, string) ([]byte, error) {
			return []byte(fmt.Sprintf(`{"i":%d,"text":%q}`, i, words[i%40:i%40+280])), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		d := new(frame.Delta).Set(fmt.Sprint("k", i%16), res).
			AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprintf("step %d: %s", i, words[:200])})
		if j := i / runs; j%50 == 49 {
			d.DropMessages(40) // the agent compacts its context now and then
		}
		if err := a.Commit(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

var bigStoreHeap = flag.String("bigstore.heap", "", "TestVerifyBigStore: write a heap profile (in use, after a GC) at 90% of the log to this file")

// TestVerifyBigStore verifies the store -bigstore names deeply and, with
// -bigstore.heap, writes a heap profile of what verify holds at 90% of
// the log: what grows with the records read.
//
//	go test -run TestVerifyBigStore ./offline -args -bigstore /tmp/big -bigstore.heap /tmp/verify.heap
//	go tool pprof -top -inuse_space /tmp/verify.heap
func TestVerifyBigStore(t *testing.T) {
	if *bigStore == "" {
		t.Skip("-bigstore not set")
	}
	written := false
	o := &engine.VerifyOptions{Deep: true, Progress: func(done, total int64) {
		if written || *bigStoreHeap == "" || done < total/10*9 {
			return
		}
		written = true
		runtime.GC()
		f, err := os.Create(*bigStoreHeap)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		t.Logf("at %d of %d bytes: heap in use %d MB", done, total, ms.HeapInuse>>20)
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Error(err)
		}
	}}
	rep, err := engine.Verify(context.Background(), *bigStore, o)
	if err != nil || !rep.OK {
		t.Fatalf("verify: %v %v", err, rep)
	}
}
