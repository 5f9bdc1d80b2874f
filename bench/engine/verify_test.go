package enginebench

// Verify of a whole store on one core (issue 16, goal 8: >= 1M records/s):
//
//	go test -run '^$' -bench VerifyStore -benchtime 5x -count 5 ./bench/engine
//
// The store holds the agent workload (internal/workload: each atom one Do
// of ~200 B args and ~300 B result, one ~500 B delta) of 40 runs of 2,000 atoms, written
// with fsync off. Each iteration verifies it with GOMAXPROCS=1, as
// `continuumctl verify` does (engine.Verify, not Deep), and reports log
// records per second of wall time and CPU time per record (every record
// of the log, chained or not: intents and certificates too). The baseline,
// read-log, is the same process reading every record of the log through
// the record cursor (framing CRC, decompression, decoding) and nothing
// else: what verify costs beyond reading.
//
// Building the store takes longer than verifying it. To compare two
// builds of verify on one store, alternately, give both the same
// directory: the first run builds it there, the others reuse it.
//
//	go test -c -o verify.test ./bench/engine
//	./verify.test -test.run '^$' -test.bench VerifyStore -test.benchtime 5x -verifystore /tmp/vstore

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/layout"
)

var verifyStore = flag.String("verifystore", "", "BenchmarkVerifyStore: the directory of its store, built there if it does not exist and reused if it does (default: a new one per run)")

func buildVerifyStore(b *testing.B, runs, perRun int) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "s")
	if *verifyStore != "" {
		dir = *verifyStore
		if _, err := os.Stat(filepath.Join(dir, layout.StoreName)); err == nil {
			return dir
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	atoms := script()
	for i := 0; i < runs*perRun; i++ {
		run, err := db.Run(ctx, fmt.Sprint("run-", i%runs))
		if err != nil {
			b.Fatal(err)
		}
		a := atoms[i/runs] // each run plays the script once
		a.Key = fmt.Sprint("k", i)
		atom, err := run.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := atom.Do(ctx, agent.Action(a), func(context.Context, string) ([]byte, error) { return a.Result, nil }); err != nil {
			b.Fatal(err)
		}
		if err := atom.Commit(ctx, agent.Delta(a)); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

func BenchmarkVerifyStore(b *testing.B) {
	dir := buildVerifyStore(b, 40, scriptLen)
	ctx := context.Background()
	logRecords, err := readLog(dir) // every record of the log, chained or not
	if err != nil {
		b.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	rate := func(b *testing.B, records uint64, start time.Time, cpu time.Duration) {
		b.ReportMetric(float64(records)/time.Since(start).Seconds(), "records/s")
		b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(records), "cpu-ns/record")
	}
	b.Run("verify", func(b *testing.B) {
		var records uint64
		start, cpu := time.Now(), cpuTime()
		for b.Loop() {
			rep, err := engine.Verify(ctx, dir, nil)
			if err != nil || !rep.OK {
				b.Fatalf("verify: %v %v", err, rep.Failures)
			}
			records += logRecords
		}
		rate(b, records, start, cpu)
	})
	b.Run("read-log", func(b *testing.B) {
		var records uint64
		start, cpu := time.Now(), cpuTime()
		for b.Loop() {
			n, err := readLog(dir)
			if err != nil {
				b.Fatal(err)
			}
			records += n
		}
		rate(b, records, start, cpu)
	})
}

// readLog reads every record of the store's log as continuumctl scan does,
// and returns how many it read.
func readLog(dir string) (uint64, error) {
	var n uint64
	err := engine.Scan(context.Background(), dir, nil, func(*engine.LogRecord) error { n++; return nil })
	return n, err
}
