package offline_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

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

var frameStore = flag.String("framestore", "", "TestBuildFrameStore: build a store of runs at the frame limit in this directory (skipped when empty)")

// TestBuildFrameStore builds a store whose runs' frames reach the frame
// limit (engine.MaxSize, 63 MiB), for measuring the tools' memory on the
// largest frame the engine writes:
//
//	go test -run TestBuildFrameStore ./offline -args -framestore /tmp/frames
//
// then, e.g., /usr/bin/time -v continuumctl inspect --json /tmp/frames bin.
// Run "bin": three atoms of random memory values (20, 20 and 23 MiB) that
// bring the frame to exactly MaxSize, shown as base64. Run "one": one
// atom, one random value as large as a delta may be. Run "text": one
// atom, one message of text (quotes, newlines, non-ASCII: escaped in
// JSON) as large as a delta may be.
func TestBuildFrameStore(t *testing.T) {
	if *frameStore == "" {
		t.Skip("-framestore not set")
	}
	dir := *frameStore
	if _, err := os.Stat(filepath.Join(dir, layout.StoreName)); err == nil {
		t.Fatalf("%s holds a store already", dir)
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// commit commits d in a new atom of run; a delta past the limit is
	// failed and reported.
	commit := func(run string, d *frame.Delta) error {
		t.Helper()
		r, err := db.Run(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Commit(ctx, d); err != nil {
			if !errors.Is(err, engine.ErrTooLarge) {
				t.Fatal(err)
			}
			if err := a.Fail(ctx, "too large"); err != nil {
				t.Fatal(err)
			}
			return err
		}
		return nil
	}
	// largest commits the largest delta make(n) gives that the engine
	// accepts, from n = MaxSize down by 4 KiB.
	largest := func(run string, make func(n int) *frame.Delta) {
		t.Helper()
		for n := engine.MaxSize; n > engine.MaxSize-1<<20; n -= 4 << 10 {
			if commit(run, make(n)) == nil {
				t.Logf("run %q: a delta of %d bytes", run, n)
				return
			}
		}
		t.Fatalf("run %q: no delta within 1 MiB of the limit was accepted", run)
	}

	want := &frame.Frame{Memory: map[string][]byte{}}
	for i, n := range []int{20 << 20, 20 << 20} {
		v := random(n)
		if err := commit("bin", new(frame.Delta).Set(fmt.Sprint("v", i), v)); err != nil {
			t.Fatal(err)
		}
		want.Memory[fmt.Sprint("v", i)] = v
	}
	n := engine.MaxSize - frame.EncodedFrameSize(want) - 8
	for {
		want.Memory["v2"] = make([]byte, n)
		size := frame.EncodedFrameSize(want)
		if size == engine.MaxSize {
			break
		}
		n += engine.MaxSize - size
	}
	if err := commit("bin", new(frame.Delta).Set("v2", random(n))); err != nil {
		t.Fatal(err)
	}
	one := random(engine.MaxSize)
	largest("one", func(n int) *frame.Delta { return new(frame.Delta).Set("v", one[:n]) })
	line := []byte("the agent said \"deploy <service> & wait\"\tthen checked: ok — naïve café ✓\n")
	text := bytes.Repeat(line, engine.MaxSize/len(line)+1)
	largest("text", func(n int) *frame.Delta {
		return new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: string(text[:n])})
	})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
