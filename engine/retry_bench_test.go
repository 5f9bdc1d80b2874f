//go:build unix

package engine

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

// BenchmarkAtomDoRetryPolicy is Atom.Do of an action that succeeds on its
// first attempt, with and without a retry policy, through the whole engine
// (strict durability, in-memory filesystem: the log's CPU, no fsync wait),
// 100 actions per atom.
func BenchmarkAtomDoRetryPolicy(b *testing.B) {
	ok := func(context.Context, string) ([]byte, error) { return []byte(`{"ok":true}`), nil }
	for _, bc := range []struct {
		name string
		pol  *ledger.RetryPolicy
	}{{"plain", nil}, {"retry", &ledger.RetryPolicy{MaxAttempts: 5, Initial: 100 * time.Millisecond, Max: 10 * time.Second, Deadline: time.Minute}}} {
		b.Run(bc.name, func(b *testing.B) {
			mem := vfs.NewMem()
			db, err := Open("store", testOptions(mem))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			run, err := db.Run(ctx, "r")
			if err != nil {
				b.Fatal(err)
			}
			var a *Atom
			b.ReportAllocs()
			cpu0 := processCPUEngine()
			for i := 0; b.Loop(); i++ {
				if i%100 == 0 {
					if a != nil {
						if err := a.Commit(ctx, new(frame.Delta).Set("n", []byte(strconv.Itoa(i)))); err != nil {
							b.Fatal(err)
						}
					}
					if a, err = run.Begin(ctx); err != nil {
						b.Fatal(err)
					}
				}
				act := ledger.Action{Tool: "http.post", Args: []byte(`{"n":` + strconv.Itoa(i) + `}`), Idempotent: true, Retry: bc.pol}
				if _, err := a.Do(ctx, act, ok); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPUEngine()-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}

// processCPU is the CPU time the process used so far, every thread (the
// log's writer, the GC) counted, in nanoseconds: on a machine shared with
// other work it is steadier than the wall clock.
func processCPUEngine() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
