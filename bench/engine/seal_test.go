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
	"github.com/continuumdb/continuum/seal"
)

// BenchmarkSealCost measures encryption at rest (Options.Keyring) beside
// the same store without it, in one process: R = 16 agents at once, one
// run each, strict durability with fsync on (default options otherwise),
// b.N atoms in all, each one Do and one delta (the workload of
// BenchmarkConcurrentRuns), and the encrypted store with erasable memory
// keys (Options.ErasableKeys: 3 of the workload's 24 keys, then all of
// them); then the four again with NoSync, so that CPU alone is measured. Run each round in its own process, so that the stores
// alternate and a change of the machine's load falls on all of them:
//
//	go test -c -o /tmp/enginebench.test ./bench/engine
//	for i in 1 2 3 4 5 6; do /tmp/enginebench.test -test.run '^$' -test.bench SealCost -test.benchtime 9600x; done
//
// atoms/s is the store's throughput, cpu-µs/atom the process's CPU per
// atom (background work included), snapshots/katom the background
// snapshots written per 1,000 atoms.
func BenchmarkSealCost(b *testing.B) {
	const runs = 16
	atoms := script()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ring, err := seal.NewKeyring(map[string][]byte{"bench": bytes.Repeat([]byte{7}, seal.KeySize)}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	personal, every := []string{"customer", "owner", "user_preference"}, []string{"*"}
	for _, c := range []struct {
		sealed, nosync bool
		erasable       []string
	}{
		{false, false, nil}, {true, false, nil}, {true, false, personal}, {true, false, every},
		{false, true, nil}, {true, true, nil}, {true, true, personal}, {true, true, every},
	} {
		name := "plain-16"
		opts := &engine.Options{Logger: quiet, NoSync: c.nosync}
		if c.sealed {
			name, opts.Keyring = "sealed-16", ring
		}
		switch {
		case len(c.erasable) == 1:
			// Every memory key erasable: each value sealed with its
			// memory key's own data key, one per run and key (24 keys per
			// run in this workload), each added to KEYS once.
			name, opts.ErasableKeys = "erasable-all-16", c.erasable
		case len(c.erasable) > 1:
			// The keys that hold personal data: 3 of the workload's 24.
			name, opts.ErasableKeys = "erasable-3-16", c.erasable
		}
		if c.nosync {
			name += "-nosync" // CPU alone: no fsync waits
		}
		b.Run(name, func(b *testing.B) {
			db, err := engine.Open(filepath.Join(b.TempDir(), "s"), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			n, wall, cpu := agentAtoms(b, db, runs, atoms)
			b.ReportMetric(n/wall.Seconds(), "atoms/s")
			b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/atom")
			// Background snapshots follow the commits' pace, so their
			// number varies from round to round: a round's CPU per atom
			// is read beside it.
			b.ReportMetric(float64(db.Stats().Snapshots)*1000/n, "snapshots/katom")
		})
	}
}

// BenchmarkRunKeys measures what creating a run costs in an encrypted
// store as the store holds more runs: each new run's data key goes into
// KEYS, durably, before the run's creation record. 4,000 runs are created
// one after the other (fsync on, default options otherwise), each with one
// atom; first-ms/run is the mean of the first 500, last-ms/run of the last
// 500, keys-KB the size of KEYS at the end.
//
//	go test -c -o /tmp/enginebench.test ./bench/engine
//	for i in 1 2 3 4 5; do /tmp/enginebench.test -test.run '^$' -test.bench RunKeys -test.benchtime 1x; done
func BenchmarkRunKeys(b *testing.B) {
	const runs, window = 4000, 500
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ring, err := seal.NewKeyring(map[string][]byte{"bench": bytes.Repeat([]byte{7}, seal.KeySize)}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for range b.N {
		dir := filepath.Join(b.TempDir(), "s")
		db, err := engine.Open(dir, &engine.Options{Keyring: ring, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		var first, last time.Duration
		for i := range runs {
			t0 := time.Now()
			r, err := db.Run(ctx, fmt.Sprint("run-", i))
			if err != nil {
				b.Fatal(err)
			}
			switch took := time.Since(t0); {
			case i < window:
				first += took
			case i >= runs-window:
				last += took
			}
			a, err := r.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(first.Microseconds())/1000/window, "first-ms/run")
		b.ReportMetric(float64(last.Microseconds())/1000/window, "last-ms/run")
		if st, err := os.Stat(filepath.Join(dir, "KEYS")); err == nil {
			b.ReportMetric(float64(st.Size())/1024, "keys-KB")
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
