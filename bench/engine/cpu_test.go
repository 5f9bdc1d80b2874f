// Package enginebench measures the engine's CPU cost per atom, beside
// Pebble used directly the way an agent developer would (three Sets per
// atom and a whole-state snapshot every 50), with fsync off for both so
// that only CPU is measured:
//
//	go test -run '^$' -bench AtomCPU -benchtime 5000x -count 5 ./bench/engine
//
// The metric cpu-µs/atom is the process's user+system CPU time per atom
// (getrusage), background goroutines included; ns/op is wall time;
// snapshots/katom the engine's background snapshots per 1,000 atoms.
// continuum-strict-nosnapshots is the strict commit path without the
// background snapshots and engine checkpoints (before Close), and
// -sealed the same in a store encrypted at rest (Options.Keyring).
package enginebench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/continuumdb/continuum/seal"
)

const scriptLen = 2000 // distinct atoms, reused with fresh keys

func script() []workload.Atom {
	atoms := make([]workload.Atom, scriptLen)
	for i := range atoms {
		atoms[i] = workload.Script("r", uint64(i+1), 1)
	}
	return atoms
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkAtomCPU(b *testing.B) {
	atoms := script()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	ring, err := seal.NewKeyring(map[string][]byte{"bench": bytes.Repeat([]byte{7}, seal.KeySize)}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		mode           engine.Durability
		noSnap, sealed bool
	}{{engine.Strict, false, false}, {engine.Relaxed, false, false}, {engine.Strict, true, false}, {engine.Strict, true, true}} {
		name := "continuum-" + c.mode.String()
		opts := &engine.Options{NoSync: true, Durability: c.mode, Logger: quiet}
		if c.noSnap {
			// The commit path alone: no background snapshot, nor engine
			// checkpoint before Close, so that what the snapshot policy
			// adds (the other sub-benchmarks less this one) is told from
			// what each atom costs.
			name += "-nosnapshots"
			opts.SnapshotEvery, opts.SnapshotInterval, opts.RestartTail = -1, -1, -1
		}
		if c.sealed {
			// The same, encrypted at rest: what sealing adds to the
			// commit path, without the spread that background snapshots
			// bring.
			name += "-sealed"
			opts.Keyring = ring
		}
		b.Run(name, func(b *testing.B) {
			db, err := engine.Open(filepath.Join(b.TempDir(), "s"), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			step := func(i int) {
				run, err := db.Run(ctx, fmt.Sprint("run-", i/scriptLen))
				if err != nil {
					b.Fatal(err)
				}
				a := atoms[i%scriptLen]
				a.Key = fmt.Sprint("k", i)
				atom, err := run.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				res, err := atom.Do(ctx, agent.Action(a), func(context.Context, string) ([]byte, error) { return a.Result, nil })
				if err != nil {
					b.Fatal(err)
				}
				a.Result = res
				if err := atom.Commit(ctx, agent.Delta(a)); err != nil {
					b.Fatal(err)
				}
			}
			for i := 0; i < 300; i++ { // past dictionary training
				step(1_000_000 + i)
			}
			// An encrypted store trains no dictionary (its first records
			// would lie in the clear in it).
			for !c.sealed && db.Stats().Dictionary == 0 {
				time.Sleep(10 * time.Millisecond)
			}
			snaps := db.Stats().Snapshots
			measure(b, step)
			b.ReportMetric(float64(db.Stats().Snapshots-snaps)*1000/float64(b.N), "snapshots/katom")
		})
	}
	b.Run("pebble-direct", func(b *testing.B) {
		db, err := pebble.Open(filepath.Join(b.TempDir(), "p"), &pebble.Options{Logger: discard{}})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		states := map[string]*workload.State{}
		step := func(i int) {
			run := fmt.Sprint("run-", i/scriptLen)
			st := states[run]
			if st == nil {
				st = workload.NewState(run)
				states[run] = st
			}
			a := atoms[i%scriptLen]
			a.Run, a.Seq = run, st.Seq+1
			key := fmt.Sprintf("%s/%08d", run, a.Seq)
			intent := fmt.Appendf(nil, `{"tool":%q,"key":%q,"args":%s}`, a.Tool, a.Key, a.Args)
			cert := fmt.Appendf(nil, `{"key":%q,"result":%s}`, a.Key, a.Result)
			delta, err := workload.EncodeDelta(a)
			if err != nil {
				b.Fatal(err)
			}
			for _, kv := range [][2][]byte{{[]byte("i/" + key), intent}, {[]byte("c/" + key), cert}, {[]byte("d/" + key), delta}} {
				if err := db.Set(kv[0], kv[1], pebble.NoSync); err != nil {
					b.Fatal(err)
				}
			}
			if err := st.Apply(a); err != nil {
				b.Fatal(err)
			}
			if st.Seq%50 == 0 {
				snap, err := st.Encode()
				if err != nil {
					b.Fatal(err)
				}
				if err := db.Set([]byte("s/"+key), snap, pebble.NoSync); err != nil {
					b.Fatal(err)
				}
			}
		}
		measure(b, step)
	})
}

func measure(b *testing.B, step func(i int)) {
	b.ReportAllocs()
	c0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step(i)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N)/1e3, "cpu-µs/atom")
}

type discard struct{}

func (discard) Infof(string, ...any)  {}
func (discard) Errorf(string, ...any) {}
func (discard) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
