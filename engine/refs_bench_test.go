package engine

// What references to certified results save on the agent workload, side
// by side in one process:
//
//	go test -run '^$' -bench AgentAtomBytes -benchtime 3000x -count 6 ./engine
//
// Each atom is the agent's (internal/agent's Step, which this package's
// tests cannot import): one Do, then a delta with the model's text, the
// tool's result as a tool message, and a memory key. "refs" is what Commit
// writes; "inline" is the same with inlineResults set, the results stored
// a second time in the delta as before. Metrics: atom-B/atom, the atom
// records' bytes as the log holds them (header and compressed body);
// log-B/atom, every record's (runs, intents, certificates, atoms, chain
// checkpoints); cpu-µs/atom, the process's user+system CPU per atom
// (getrusage), background goroutines included. fsync off: bytes and CPU
// only.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

func BenchmarkAgentAtomBytes(b *testing.B) {
	const scriptLen = 2000 // distinct atoms, reused with fresh keys
	atoms := make([]workload.Atom, scriptLen)
	for i := range atoms {
		atoms[i] = workload.Script("r", uint64(i+1), 1)
	}
	for _, mode := range []string{"inline", "refs"} {
		b.Run(mode, func(b *testing.B) {
			inlineResults.Store(mode == "inline")
			defer inlineResults.Store(false)
			db, err := Open(filepath.Join(b.TempDir(), "s"), &Options{NoSync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
				res, err := atom.Do(ctx, ledger.Action{Tool: a.Tool, Args: a.Args, Key: a.Key, Idempotent: a.Idempotent},
					func(context.Context, string) ([]byte, error) { return a.Result, nil })
				if err != nil {
					b.Fatal(err)
				}
				d := new(frame.Delta)
				if a.Objective != "" {
					d.SetObjective(a.Objective)
				}
				if a.Subgoal != "" {
					d.AddSubgoal(fmt.Sprintf("sg-%d", a.Seq), a.Subgoal)
				}
				d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: a.Thought}).
					AppendMessage(frame.Message{Role: frame.RoleTool, Content: string(res), Tool: a.Tool, CallID: a.Key}).
					Set(a.MemKey, a.MemVal)
				if err := atom.Commit(ctx, d); err != nil {
					b.Fatal(err)
				}
			}
			for i := 0; i < 300; i++ { // past dictionary training
				step(1_000_000 + i)
			}
			for db.Stats().Dictionary == 0 {
				time.Sleep(10 * time.Millisecond)
			}
			end := db.log.End()
			logBytes := db.log.Stats().Bytes
			b.ReportAllocs()
			c0 := cpuNow()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				step(i)
			}
			b.StopTimer()
			cpu := cpuNow() - c0
			atomBytes := atomRecordBytes(b, db, end)
			b.ReportMetric(float64(atomBytes)/float64(b.N), "atom-B/atom")
			b.ReportMetric(float64(db.log.Stats().Bytes-logBytes)/float64(b.N), "log-B/atom")
			b.ReportMetric(float64(cpu)/float64(b.N)/1e3, "cpu-µs/atom")
		})
	}
}

// BenchmarkStateAtFromLogRefs: what resolving references costs a reader
// that rebuilds a frame from the log, the one that pays for them: StateAt
// of a 1,000-atom run of the agent workload without snapshots, after a
// reopen (so every certified result is read from the log), with the
// results inline and with references.
//
//	go test -run '^$' -bench StateAtFromLogRefs -benchtime 20x ./engine
func BenchmarkStateAtFromLogRefs(b *testing.B) {
	const n = 1000
	for _, mode := range []string{"inline", "refs"} {
		b.Run(mode, func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "s")
			opts := &Options{NoSync: true, SnapshotEvery: 1 << 30, SnapshotInterval: 1 << 62, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			buildAgentStore(b, dir, opts, n, mode == "inline")
			db, err := Open(dir, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			run, err := db.Run(ctx, "r")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := run.StateAt(ctx, n-1); err != nil { // the scan of positions, once
				b.Fatal(err)
			}
			b.ReportAllocs()
			c0 := cpuNow()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := run.StateAt(ctx, n-1); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuNow()-c0)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}

// BenchmarkVerifyRefs: verify (not deep, then deep) of a closed store of
// one 2,000-atom run of the agent workload, with the results inline and
// with references: verify decodes a delta that may refer (version 2) to
// check its references, and a deep verify reads each referenced
// certificate back from the log to rebuild the frames.
//
//	go test -run '^$' -bench VerifyRefs -benchtime 5x ./engine
func BenchmarkVerifyRefs(b *testing.B) {
	for _, mode := range []string{"inline", "refs"} {
		dir := filepath.Join(b.TempDir(), "s")
		opts := &Options{NoSync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		buildAgentStore(b, dir, opts, 2000, mode == "inline")
		for _, deep := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/deep=%v", mode, deep), func(b *testing.B) {
				b.ReportAllocs()
				c0 := cpuNow()
				for i := 0; i < b.N; i++ {
					rep, err := Verify(ctx, dir, &VerifyOptions{Deep: deep})
					if err != nil || !rep.OK {
						b.Fatalf("verify: %v %v", err, rep)
					}
				}
				b.ReportMetric(float64(cpuNow()-c0)/float64(b.N)/1e3, "cpu-µs/op")
			})
		}
	}
}

// buildAgentStore writes n atoms of the agent workload to run "r" of a new
// store in dir, with the results inline or as references, and closes it.
func buildAgentStore(b *testing.B, dir string, opts *Options, n int, inline bool) {
	inlineResults.Store(inline)
	defer inlineResults.Store(false)
	db, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	run, err := db.Run(ctx, "r")
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		a := workload.Script("r", uint64(i), 1)
		atom, err := run.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		res, err := atom.Do(ctx, ledger.Action{Tool: a.Tool, Args: a.Args, Key: a.Key, Idempotent: a.Idempotent},
			func(context.Context, string) ([]byte, error) { return a.Result, nil })
		if err != nil {
			b.Fatal(err)
		}
		d := new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: a.Thought}).
			AppendMessage(frame.Message{Role: frame.RoleTool, Content: string(res), Tool: a.Tool, CallID: a.Key}).
			Set(a.MemKey, a.MemVal)
		if err := atom.Commit(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
}

// atomRecordBytes sums the sizes of the atom records of db's log from
// position from on.
func atomRecordBytes(b *testing.B, db *DB, from wal.Pos) int64 {
	dec := &record.Decoder{Skip: func(k record.Kind, _ []byte) bool { return k != record.KindAtom }}
	c, err := record.NewCursor(db.log, db.segmentFile, from, dec)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var n int64
	for c.Next() {
		n += int64(len(c.Record().Raw))
	}
	if err := c.Err(); err != nil {
		b.Fatal(err)
	}
	return n
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
