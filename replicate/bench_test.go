package replicate

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// Benchmarks: a replicated store (three JetStream nodes on loopback, each
// fsyncing every write) beside a local one, in one process; and failover
// time. The figures go into bench/RESULTS.md.
//
//	go test ./replicate -run '^$' -bench . -benchtime 2000x -count 5

// percentile returns the p-th percentile of sorted ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

var benchStores int

// BenchmarkCommit measures atoms (Begin, Commit of one small delta) per
// second and the Commit's latency, with runs concurrent runs, on a local
// store and on a replicated one.
func BenchmarkCommit(b *testing.B) {
	c := newCluster(b, true)
	for _, runs := range []int{1, 16, 64} {
		for _, mode := range []string{"local", "replicated"} {
			b.Run(fmt.Sprintf("mode=%s/runs=%d", mode, runs), func(b *testing.B) {
				benchStores++
				dir := filepath.Join(b.TempDir(), "s")
				opts := &engine.Options{SnapshotEvery: -1}
				var r *Replicator
				if mode == "replicated" {
					var err error
					cfg := c.config(fmt.Sprintf("bench%d", benchStores), "a", 0)
					if r, err = Open(ctx, dir, cfg); err != nil {
						b.Fatal(err)
					}
					opts.Replicator = r
				}
				db, err := engine.Open(dir, opts)
				if err != nil {
					b.Fatal(err)
				}
				handles := make([]*engine.Run, runs)
				for i := range handles {
					if handles[i], err = db.Run(ctx, fmt.Sprintf("run-%d", i)); err != nil {
						b.Fatal(err)
					}
				}
				lat := make([][]time.Duration, runs)
				b.ResetTimer()
				t0 := time.Now()
				var wg sync.WaitGroup
				for i, run := range handles {
					n := b.N / runs
					if i < b.N%runs {
						n++
					}
					wg.Go(func() {
						for j := range n {
							a, err := run.Begin(ctx)
							if err != nil {
								b.Error(err)
								return
							}
							d := new(frame.Delta).Set("k", fmt.Appendf(nil, "value %d of %s", j, run.ID()))
							s := time.Now()
							if err := a.Commit(ctx, d); err != nil {
								b.Error(err)
								return
							}
							lat[i] = append(lat[i], time.Since(s))
						}
					})
				}
				wg.Wait()
				el := time.Since(t0)
				b.StopTimer()
				all := slices.Concat(lat...)
				slices.Sort(all)
				b.ReportMetric(float64(b.N)/el.Seconds(), "atoms/s")
				b.ReportMetric(float64(percentile(all, 0.50).Microseconds()), "p50-µs")
				b.ReportMetric(float64(percentile(all, 0.99).Microseconds()), "p99-µs")
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				if r != nil {
					if err := r.Close(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFailover forces b.N failovers of a store between two nodes, by
// explicit takeover (the lease free at once), each followed by one atom,
// and reports the time from the takeover's start to the store resumed
// (replicate.Open and engine.Open returned): p50 and p99. The store grows
// by one atom per failover from 100 atoms.
func BenchmarkFailover(b *testing.B) {
	c := newCluster(b, true)
	cfgs := []Config{c.config("failover", "a", 0), c.config("failover", "b", 1)}
	root := b.TempDir()
	var reads, opens []time.Duration
	open := func(i, n int) (*Replicator, *engine.DB, time.Duration) {
		cfg := cfgs[i%2]
		cfg.Takeover = true
		t0 := time.Now()
		r, err := Open(ctx, filepath.Join(root, fmt.Sprint(n)), cfg)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		db, err := engine.Open(filepath.Join(root, fmt.Sprint(n)), &engine.Options{Replicator: r, SnapshotEvery: -1})
		if err != nil {
			b.Fatal(err)
		}
		reads, opens = append(reads, r.Restored().Read), append(opens, time.Since(t1))
		return r, db, time.Since(t0)
	}
	r, db, _ := open(0, 0)
	commit := func(db *engine.DB) {
		run, err := db.Run(ctx, "agent")
		if err != nil {
			b.Fatal(err)
		}
		a, err := run.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Commit(ctx, new(frame.Delta).Set("k", fmt.Appendf(nil, "v%d", run.LastSeq()))); err != nil {
			b.Fatal(err)
		}
	}
	for range 100 {
		commit(db)
	}
	var ds []time.Duration
	b.ResetTimer()
	for i := range b.N {
		// The old writer is left running: it is fenced, not closed.
		r2, db2, d := open(i+1, i+1)
		ds = append(ds, d)
		commit(db2)
		db.Close()
		r.Abandon()
		r, db = r2, db2
	}
	b.StopTimer()
	slices.Sort(ds)
	reads, opens = reads[1:], opens[1:] // the first store's creation is not a failover
	slices.Sort(reads)
	slices.Sort(opens)
	b.ReportMetric(float64(percentile(ds, 0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(ds, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(percentile(reads, 0.50).Microseconds())/1000, "restore-p50-ms")
	b.ReportMetric(float64(percentile(opens, 0.50).Microseconds())/1000, "open-p50-ms")
	b.ReportMetric(0, "ns/op")
	db.Close()
	r.Close()
}

// behindGroups is how many atoms (one group each) the other node writes
// between two failovers of BenchmarkFailoverLocal's path=behind.
const behindGroups = 16

// BenchmarkFailoverLocal measures failover time (replicate.Open and
// engine.Open of the new writer, the previous one having closed: the
// lease is free) by what the new writer's directory holds: path=current,
// its own copy with nothing written since it closed (nothing is read from
// the stream); path=behind, its own copy while the other node wrote
// behindGroups atoms (those are read and appended); path=restore, an empty
// directory (the whole stream is read). Every run of a sub-benchmark
// starts a new store of history atoms, written by 4 runs at once (group
// commit: stream-msgs says how many messages that made), copied to both
// nodes. Each failover is followed by one atom (path=behind: behindGroups
// atoms) and a Close. Besides the failover's p50 and p99: those of taking
// the lease (lease), of fencing and bringing the directory up (read), and
// of engine.Open (engine-open).
//
//	go test ./replicate -run '^$' -bench FailoverLocal -benchtime 100x -count 3
func BenchmarkFailoverLocal(b *testing.B) {
	c := newCluster(b, true)
	stores := 0
	for _, history := range []int{1000, 8000} {
		for _, path := range []string{"current", "behind", "restore"} {
			b.Run(fmt.Sprintf("history=%d/path=%s", history, path), func(b *testing.B) {
				stores++
				store := fmt.Sprintf("history%d", stores)
				root := b.TempDir()
				dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b")}
				cfgs := []Config{c.config(store, "a", 0), c.config(store, "b", 1)}
				var engineOpen time.Duration // of the last open
				open := func(node int, dir string) (*Replicator, *engine.DB, time.Duration) {
					t0 := time.Now()
					r, err := Open(ctx, dir, cfgs[node])
					if err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					db, err := engine.Open(dir, &engine.Options{Replicator: r, SnapshotEvery: -1, DictSamples: -1})
					if err != nil {
						b.Fatal(err)
					}
					engineOpen = time.Since(t1)
					return r, db, time.Since(t0)
				}
				closeBoth := func(r *Replicator, db *engine.DB) {
					if err := db.Close(); err != nil {
						b.Fatal(err)
					}
					if err := r.Close(); err != nil {
						b.Fatal(err)
					}
				}
				commit := func(db *engine.DB, run string, n int) {
					h, err := db.Run(ctx, run)
					if err != nil {
						b.Fatal(err)
					}
					for range n {
						a, err := h.Begin(ctx)
						if err != nil {
							b.Fatal(err)
						}
						if err := a.Commit(ctx, new(frame.Delta).Set("k", fmt.Appendf(nil, "v%d", h.LastSeq()))); err != nil {
							b.Fatal(err)
						}
					}
				}
				// The history, then a copy of it on b: both nodes have one.
				r, db, _ := open(0, dirs[0])
				var wg sync.WaitGroup
				for i := range 4 {
					wg.Go(func() { commit(db, fmt.Sprint("run-", i), history/4) })
				}
				wg.Wait()
				closeBoth(r, db)
				r, db, _ = open(1, dirs[1])
				msgs0 := r.Restored().Messages
				closeBoth(r, db)
				last := 1 // the node that wrote last

				var ds, leases, reads, opens []time.Duration
				var msgs []int
				rereads := 0
				b.ResetTimer()
				for i := range b.N {
					node, dir, n := 1-last, dirs[1-last], 1
					switch path {
					case "current":
						node, dir = last, dirs[last]
					case "behind":
						n = behindGroups
					case "restore":
						dir = filepath.Join(root, fmt.Sprint("restore-", i))
					}
					r, db, d := open(node, dir)
					info := r.Restored()
					if want := map[string]string{"restore": PathRestored, "current": PathCurrent, "behind": PathCaughtUp}[path]; info.Path != want {
						b.Fatalf("failover %d: path %q, want %q (%+v)", i, info.Path, want, info)
					}
					ds, msgs = append(ds, d), append(msgs, info.Messages)
					leases, reads, opens = append(leases, info.Lease), append(reads, info.Read), append(opens, engineOpen)
					rereads += info.Rereads
					commit(db, "agent", n)
					closeBoth(r, db)
					last = node
					if path == "restore" { // the new copy is the node's from now on
						if err := os.RemoveAll(dirs[node]); err != nil {
							b.Fatal(err)
						}
						if err := os.Rename(dir, dirs[node]); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StopTimer()
				slices.Sort(ds)
				slices.Sort(msgs)
				b.ReportMetric(float64(percentile(ds, 0.50).Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(percentile(ds, 0.99).Microseconds())/1000, "p99-ms")
				for _, c := range []struct {
					name string
					ds   []time.Duration
				}{{"lease", leases}, {"read", reads}, {"engine-open", opens}} {
					slices.Sort(c.ds)
					b.ReportMetric(float64(percentile(c.ds, 0.50).Microseconds())/1000, c.name+"-p50-ms")
					b.ReportMetric(float64(percentile(c.ds, 0.99).Microseconds())/1000, c.name+"-p99-ms")
				}
				b.ReportMetric(float64(msgs[len(msgs)/2]), "msgs-read-p50")
				b.ReportMetric(float64(msgs0), "stream-msgs")
				b.ReportMetric(float64(rereads), "rereads")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
