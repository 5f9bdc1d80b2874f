package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

// liveAgent commits atoms in a few runs of the store in dir until stop is
// closed, as many as budget allows (a send on it grants that many more,
// so that the store grows with the number of tool runs, not with time),
// with options that make the engine's background file work as
// frequent as it gets: engine checkpoints (frame files, the ledger table,
// CHECKPOINT, segment removal) every few KiB, small segments (rotation and
// spares), snapshots every few atoms. It reports its first error on errc.
func liveAgent(t *testing.T, dir string, stop <-chan struct{}, budget <-chan int) <-chan error {
	errc := make(chan error, 1)
	db, err := engine.Open(dir, &engine.Options{
		SegmentSize: 64 << 10, RestartTail: 16 << 10, SnapshotEvery: 3, CheckpointEvery: 4,
		NoSync: true, DictSamples: 64,
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(errc)
		defer func() {
			if err := db.Close(); err != nil {
				errc <- err
			}
		}()
		ctx := context.Background()
		var runs []*engine.Run
		for i := range 3 {
			r, err := db.Run(ctx, fmt.Sprintf("agent-%d", i))
			if err != nil {
				errc <- err
				return
			}
			runs = append(runs, r)
		}
		left := 0
		for n := 0; ; n++ {
			if left == 0 {
				select {
				case k := <-budget:
					left = k
				case <-stop:
					return
				}
			}
			left--
			r := runs[n%len(runs)]
			a, err := r.Begin(ctx)
			if err == nil {
				_, err = a.Do(ctx, ledger.Action{Tool: "search", Args: []byte(fmt.Sprintf(`{"q":%d}`, n))},
					func(context.Context, string) ([]byte, error) { return []byte(strings.Repeat("r", n%300)), nil })
			}
			if err == nil {
				d := new(frame.Delta).
					AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: strings.Repeat("thinking ", 20+n%50)}).
					Set(fmt.Sprintf("k%d", n%40), bytes.Repeat([]byte{byte(n)}, n%500))
				err = a.Commit(ctx, d)
			}
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	return errc
}

// TestReadOnlyToolsBesideLiveAgent runs each read-only command many times
// against a store that an agent in this process commits to all along:
// every run must succeed (exit 0) and give a self-consistent answer.
func TestReadOnlyToolsBesideLiveAgent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	stop := make(chan struct{})
	budget := make(chan int, 1)
	errc := liveAgent(t, dir, stop, budget)
	budget <- 30
	defer func() {
		close(stop)
		if err := <-errc; err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	tries := 100
	if testing.Short() {
		tries = 15
	}
	check := map[string]func(out string) error{
		"inspect": func(out string) error {
			if !strings.Contains(out, "agent-2") {
				return fmt.Errorf("no agent-2 in the runs")
			}
			return nil
		},
		"stats": func(out string) error {
			var s struct{ Runs int }
			if err := json.Unmarshal([]byte(out), &s); err != nil || s.Runs != 3 {
				return fmt.Errorf("runs %d, %v", s.Runs, err)
			}
			return nil
		},
		"export": func(out string) error {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			for i, l := range lines {
				var a struct{ Seq uint64 }
				if err := json.Unmarshal([]byte(l), &a); err != nil || a.Seq != uint64(i+1) {
					return fmt.Errorf("line %d: seq %d, %v", i+1, a.Seq, err)
				}
			}
			return nil
		},
		"diff": func(out string) error {
			// Everything from the empty frame to the last seq: the atoms
			// 1..last, in order, whatever the agent committed since.
			var d struct {
				Base struct{ Seq uint64 }
				A    struct{ Atoms []struct{} }
				B    struct {
					Seq   uint64
					Atoms []struct{ Seq uint64 }
				}
			}
			if err := json.Unmarshal([]byte(out), &d); err != nil {
				return err
			}
			if d.Base.Seq != 0 || len(d.A.Atoms) != 0 || d.B.Seq == 0 || uint64(len(d.B.Atoms)) != d.B.Seq {
				return fmt.Errorf("base seq %d, %d atoms on a, %d atoms to seq %d on b", d.Base.Seq, len(d.A.Atoms), len(d.B.Atoms), d.B.Seq)
			}
			for i, a := range d.B.Atoms {
				if a.Seq != uint64(i+1) {
					return fmt.Errorf("atom %d has seq %d", i+1, a.Seq)
				}
			}
			return nil
		},
		"verify": func(out string) error {
			if !strings.Contains(out, "result: INTACT") {
				return fmt.Errorf("not intact:\n%s", out)
			}
			return nil
		},
	}
	args := map[string][]string{
		"inspect": {"inspect", dir},
		"stats":   {"stats", dir, "--json"},
		"export":  {"export", dir, "--run", "agent-1"},
		"diff":    {"diff", dir, "agent-1", "0", "last", "--json"},
		"verify":  {"verify", dir},
	}
	var mu sync.Mutex
	failures := map[string]int{}
	for _, cmd := range []string{"inspect", "stats", "export", "diff", "verify"} {
		for i := range tries {
			select {
			case budget <- 20: // commits beside this run of the command
			case err := <-errc:
				t.Fatalf("agent: %v", err)
			}
			var stdout, stderr bytes.Buffer
			code := run(args[cmd], &stdout, &stderr)
			err := check[cmd](stdout.String())
			if code != cli.ExitOK || err != nil {
				mu.Lock()
				failures[cmd]++
				if failures[cmd] <= 3 {
					t.Errorf("%s, try %d: exit %d, %v\nstderr: %s", cmd, i+1, code, err, stderr.String())
				}
				mu.Unlock()
			}
		}
	}
	for cmd, n := range failures {
		t.Errorf("%s failed %d of %d tries", cmd, n, tries)
	}
}
