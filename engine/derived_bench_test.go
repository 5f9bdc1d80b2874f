package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
)

// The restart when a derived file must be rebuilt from the log, against
// the normal restart, on a store of 10,000 atoms (20 runs of 500, one
// action each) on the real filesystem. A restart is: Open, every run's
// StateE, and a Do of each run's last action (answered from the ledger,
// so that a ledger table rebuilt in the background is waited for).
//
//	go test ./engine -run '^$' -bench RestartDerived -benchtime 10x -count 5

const (
	benchRuns  = 20
	benchAtoms = 500
)

var benchStore struct {
	once sync.Once
	dir  string
	err  error
}

func benchAction(run string, seq int) ledger.Action {
	return ledger.Action{Tool: "bench.tool", Args: []byte(fmt.Sprintf(`{"run":%q,"seq":%d}`, run, seq)), Key: fmt.Sprintf("%s/%d", run, seq)}
}

// buildBenchStore writes the store once per process (NoSync: the files
// are the same, the build is faster).
func buildBenchStore() (string, error) {
	benchStore.once.Do(func() {
		dir, err := os.MkdirTemp("", "continuum-derived-bench-")
		if err != nil {
			benchStore.err = err
			return
		}
		benchStore.dir = filepath.Join(dir, "store")
		db, err := Open(benchStore.dir, &Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			benchStore.err = err
			return
		}
		ctx := context.Background()
		for r := 0; r < benchRuns && benchStore.err == nil; r++ {
			id := fmt.Sprintf("run-%02d", r)
			run, err := db.Run(ctx, id)
			if err != nil {
				benchStore.err = err
				break
			}
			for s := 1; s <= benchAtoms; s++ {
				a, err := run.Begin(ctx)
				if err == nil {
					_, err = a.Do(ctx, benchAction(id, s), func(context.Context, string) ([]byte, error) {
						return []byte(fmt.Sprintf(`{"ok":%d}`, s)), nil
					})
				}
				if err == nil {
					err = a.Commit(ctx, new(frame.Delta).Set(fmt.Sprint("k", s%16), []byte(fmt.Sprint("value ", s))).
						AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprintf("thought %d of %s", s, id)}))
				}
				if err != nil {
					benchStore.err = err
					break
				}
			}
		}
		if err := db.Close(); err != nil && benchStore.err == nil {
			benchStore.err = err
		}
	})
	return benchStore.dir, benchStore.err
}

func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

func flipFile(name string, at int64) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		return err
	}
	b[0] ^= 0x20
	_, err = f.WriteAt(b, at)
	return err
}

func globOne(dir, pattern string) (string, error) {
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil || len(m) == 0 {
		return "", fmt.Errorf("no %s in %s: %v", pattern, dir, err)
	}
	return m[0], nil
}

var restartDerivedCases = []struct {
	name   string
	damage func(dir string) error
	check  func(st Stats) error
}{
	{"normal", func(string) error { return nil }, func(st Stats) error {
		if st.Open.CheckpointIgnored != "" || st.FramesRebuilt != 0 || st.LedgerRebuilt != "" {
			return fmt.Errorf("something was rebuilt: %+v", st)
		}
		return nil
	}},
	{"CHECKPOINT-damaged", func(dir string) error { return flipFile(filepath.Join(dir, layout.CheckpointName), 20) },
		func(st Stats) error {
			if st.Open.CheckpointIgnored == "" {
				return fmt.Errorf("CHECKPOINT was used")
			}
			return nil
		}},
	{"ledger-table-damaged", func(dir string) error {
		t, err := globOne(dir, "ledger-*.tbl")
		if err != nil {
			return err
		}
		return flipFile(t, 100)
	}, func(st Stats) error {
		if st.LedgerRebuilt == "" {
			return fmt.Errorf("the ledger table was not rebuilt")
		}
		return nil
	}},
	{"one-frame-file-damaged", func(dir string) error {
		f, err := globOne(dir, "frames/*.frame")
		if err != nil {
			return err
		}
		return flipFile(f, 40)
	}, func(st Stats) error {
		if st.FramesRebuilt != 1 {
			return fmt.Errorf("%d frames rebuilt, want 1", st.FramesRebuilt)
		}
		return nil
	}},
	{"every-frame-file-deleted", func(dir string) error {
		m, _ := filepath.Glob(filepath.Join(dir, "frames", "*.frame"))
		for _, f := range m {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
		return nil
	}, func(st Stats) error {
		if st.FramesRebuilt != benchRuns {
			return fmt.Errorf("%d frames rebuilt, want %d", st.FramesRebuilt, benchRuns)
		}
		return nil
	}},
}

func BenchmarkRestartDerived(b *testing.B) {
	src, err := buildBenchStore()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range restartDerivedCases {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dst := filepath.Join(b.TempDir(), "store")
				if err := copyTree(src, dst); err != nil {
					b.Fatal(err)
				}
				if err := tc.damage(dst); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				db, err := Open(dst, &Options{Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				for r := 0; r < benchRuns; r++ {
					id := fmt.Sprintf("run-%02d", r)
					run, err := db.Run(ctx, id)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := run.StateE(); err != nil {
						b.Fatal(err)
					}
					a, err := run.Begin(ctx)
					if err != nil {
						b.Fatal(err)
					}
					res, err := a.Do(ctx, benchAction(id, benchAtoms), func(context.Context, string) ([]byte, error) {
						return nil, fmt.Errorf("executed again")
					})
					if err != nil || !strings.Contains(string(res), fmt.Sprint(benchAtoms)) {
						b.Fatalf("Do of a past action: %q, %v", res, err)
					}
				}
				b.StopTimer()
				if err := tc.check(db.Stats()); err != nil {
					b.Fatal(err)
				}
				db.Close()
				b.StartTimer()
			}
		})
	}
}
