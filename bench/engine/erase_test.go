package enginebench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/seal"
)

// BenchmarkErase measures DB.Erase of one ended run beside DB.Delete of
// one, and DB.EraseKey of one memory key of a run, on the same encrypted
// store (fsync on): a store of 40 ended runs of 200 atoms each (one Do and
// one ~500 B delta per atom, over 8 memory keys, of which k0 is erasable
// in the erase-key case), b.N runs erased (or deleted, or their k0 erased)
// one after the other, at most 40. An erasure reads the log for the run's
// actions, writes an engine checkpoint and KEYS twice besides its record;
// a deletion writes its record; a key's erasure its record and KEYS once.
//
//	go test -c -o /tmp/enginebench.test ./bench/engine
//	for i in 1 2 3 4 5; do /tmp/enginebench.test -test.run '^$' -test.bench 'BenchmarkErase' -test.benchtime 20x; done
func BenchmarkErase(b *testing.B) {
	const runs, atoms = 40, 200
	if b.N > runs {
		b.Skipf("b.N %d: the store holds %d runs", b.N, runs)
	}
	ring, err := seal.NewKeyring(map[string][]byte{"bench": bytes.Repeat([]byte{7}, seal.KeySize)}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	for _, op := range []string{"delete", "erase", "erase-key"} {
		b.Run(op, func(b *testing.B) {
			var erasable []string
			if op == "erase-key" {
				erasable = []string{"k0"}
			}
			dir := filepath.Join(b.TempDir(), "s")
			db, err := engine.Open(dir, &engine.Options{Keyring: ring, Logger: quiet, NoSync: true, ErasableKeys: erasable})
			if err != nil {
				b.Fatal(err)
			}
			value := bytes.Repeat([]byte("agent memory, "), 36)
			for r := range runs {
				run, err := db.Run(ctx, fmt.Sprint("run-", r))
				if err != nil {
					b.Fatal(err)
				}
				for i := range atoms {
					a, err := run.Begin(ctx)
					if err != nil {
						b.Fatal(err)
					}
					res, err := a.Do(ctx, ledger.Action{Tool: "lookup", Args: []byte(fmt.Sprintf(`{"q":%d}`, i))},
						func(context.Context, string) ([]byte, error) { return []byte(fmt.Sprintf(`"result %d"`, i)), nil })
					if err != nil {
						b.Fatal(err)
					}
					if err := a.Commit(ctx, new(frame.Delta).Set(fmt.Sprint("k", i%8), append(value, res...))); err != nil {
						b.Fatal(err)
					}
				}
				if err := run.End(ctx, engine.StatusCompleted, nil); err != nil {
					b.Fatal(err)
				}
			}
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			db, err = engine.Open(dir, &engine.Options{Keyring: ring, Logger: quiet, ErasableKeys: erasable})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Runs(); err != nil { // the registry read once, before the clock
				b.Fatal(err)
			}
			b.ResetTimer()
			t0 := time.Now()
			for i := range b.N {
				id := fmt.Sprint("run-", i)
				switch op {
				case "erase":
					_, err = db.Erase(ctx, id, "")
				case "erase-key":
					_, err = db.EraseKey(ctx, id, "k0", "")
				default:
					_, err = db.Delete(ctx, id)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(t0).Microseconds())/1000/float64(b.N), "ms/run")
			b.ReportMetric(float64(dirBytes(b, filepath.Join(dir, "wal")))/1e6, "log-MB")
		})
	}
}

// dirBytes is the size of the files in dir.
func dirBytes(b *testing.B, dir string) int64 {
	b.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if info, err := e.Info(); err == nil && !info.IsDir() {
			n += info.Size()
		}
	}
	return n
}
