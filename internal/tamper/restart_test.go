package tamper

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/continuumdb/continuum/engine"
)

// restartCase is a derived file taken away before a restart: the engine
// must rebuild what it held from the log.
type restartCase struct {
	name   string
	remove func(dir string) error
}

var restartCases = []restartCase{
	{"normal", func(string) error { return nil }},
	{"no-CHECKPOINT", func(dir string) error { return os.Remove(filepath.Join(dir, "CHECKPOINT")) }},
	{"no-frames", func(dir string) error { return removeGlob(dir, "frames/*") }},
	{"no-ledger-table", func(dir string) error { return removeGlob(dir, "ledger-*.tbl") }},
	{"no-snapshots", func(dir string) error { return os.RemoveAll(filepath.Join(dir, "snapshots")) }},
}

func removeGlob(dir, pattern string) error {
	names, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("no %s in %s", pattern, dir)
	}
	for _, n := range names {
		if err := os.Remove(n); err != nil {
			return err
		}
	}
	return nil
}

// history is the store the restart benchmark reopens: restartRuns runs of
// restartAtoms atoms each, built once per process.
const (
	restartRuns  = 8
	restartAtoms = 150
)

var history struct {
	once sync.Once
	dir  string
	st   *Store
	err  error
}

func historyStore(b *testing.B) (string, *Store) {
	history.once.Do(func() {
		root, err := os.MkdirTemp("", "tamper-restart-")
		if err != nil {
			history.err = err
			return
		}
		history.dir = root
		history.st, history.err = BuildHistory(context.Background(), root, 1, restartRuns, restartAtoms)
	})
	if history.err != nil {
		b.Fatal(history.err)
	}
	return history.dir, history.st
}

// BenchmarkRestart measures the time an agent waits to resume after a
// restart: Open, then every run's State and a Do of its last certified
// action (which waits for the ledger's index), on a copy of a store of
// 8 runs x 150 atoms; normal, and with each derived file removed (the
// engine must then rebuild it from the log). A case the engine cannot
// resume from is skipped with its error: its restart time does not exist.
//
//	go test ./internal/tamper -run '^$' -bench Restart -count 5
func BenchmarkRestart(b *testing.B) {
	root, st := historyStore(b)
	last := map[string]Action{}
	for _, a := range st.Actions {
		if a.Outcome == outcomeResult {
			last[a.Run] = a
		}
	}
	for _, c := range restartCases {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := filepath.Join(root, fmt.Sprintf("copy-%s-%d", c.name, i))
				if err := copyTree(st.Dir, dir); err != nil {
					b.Fatal(err)
				}
				if err := c.remove(dir); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				db, atoms, err := resume(dir, st, last)
				b.StopTimer()
				for _, a := range atoms {
					a.Fail(context.Background(), "benchmark")
				}
				if db != nil {
					db.Close()
				}
				os.RemoveAll(dir)
				if err != nil {
					b.Skipf("the engine does not resume: %v", err)
				}
				b.StartTimer()
			}
		})
	}
}

// resume opens the store in dir and reads what an agent needs to go on;
// it leaves an atom begun in each run (the caller fails them, off the
// clock: Fail writes to the log).
func resume(dir string, st *Store, last map[string]Action) (db *engine.DB, atoms []*engine.Atom, err error) {
	ctx := context.Background()
	db, err = engine.Open(dir, options(st.KeySeed, 99, nil, st.Sealed))
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, 0, len(last))
	for id := range last {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r, err := db.Run(ctx, id)
		if err != nil {
			return db, atoms, err
		}
		if _, err := r.StateE(); err != nil {
			return db, atoms, err
		}
		atom, err := r.Begin(ctx)
		if err != nil {
			return db, atoms, err
		}
		atoms = append(atoms, atom)
		a := last[id]
		if got := doAnswer(ctx, atom, a); got != "result "+digest(a.Result) {
			return db, atoms, fmt.Errorf("run %s: Do of its last action: %s", id, strings.TrimPrefix(got, errPrefix))
		}
	}
	return db, atoms, nil
}
