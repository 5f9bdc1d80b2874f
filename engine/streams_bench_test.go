package engine

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
)

// streamBenchStore opens a store on the real disk (fsyncs cost what they cost)
// with one run.
func streamBenchStore(b *testing.B) (*DB, *Run) {
	b.Helper()
	opts := &Options{FS: vfs.Default, Logger: quiet()}
	db, err := Open(b.TempDir()+"/store", opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	run, err := db.Run(ctx, "r")
	if err != nil {
		b.Fatal(err)
	}
	return db, run
}

func reportSyncs(b *testing.B, db *DB, before int64) {
	b.ReportMetric(float64(db.log.Stats().Syncs-before)/float64(b.N), "fsyncs/chunk")
}

// BenchmarkStreamAppend is the cost of a chunk appended by one atom, its
// durability included: b.N chunks, then FlushStreams (the group commits
// that made them durable are in the time). Baselines, side by side:
// AppendFlushEach waits for each chunk to be durable before the next
// (a chunk fsynced on its own), and CommitEach writes each chunk as an
// atom of its own (what an agent did before streams to make partial
// output durable and visible).
func BenchmarkStreamAppend(b *testing.B) {
	for _, size := range []int{16, 256, 4096} {
		chunk := make([]byte, size)
		for i := range chunk {
			chunk[i] = 'a' + byte(i%26)
		}
		b.Run(fmt.Sprintf("Append/%dB", size), func(b *testing.B) {
			db, run := streamBenchStore(b)
			a, err := run.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			syncs := db.log.Stats().Syncs
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := a.Append(ctx, "tok", chunk); err != nil {
					b.Fatal(err)
				}
			}
			if err := a.FlushStreams(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			reportSyncs(b, db, syncs)
		})
		b.Run(fmt.Sprintf("AppendFlushEach/%dB", size), func(b *testing.B) {
			db, run := streamBenchStore(b)
			a, err := run.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			syncs := db.log.Stats().Syncs
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := a.Append(ctx, "tok", chunk); err != nil {
					b.Fatal(err)
				}
				if err := a.FlushStreams(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportSyncs(b, db, syncs)
		})
		b.Run(fmt.Sprintf("CommitEach/%dB", size), func(b *testing.B) {
			db, run := streamBenchStore(b)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			syncs := db.log.Stats().Syncs
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				a, err := run.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := a.Commit(ctx, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: string(chunk)})); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportSyncs(b, db, syncs)
		})
	}
}

// BenchmarkStreamRead is the read throughput of a stream of 20,000 chunks
// of 256 bytes, read from offset 0 to its end in batches of 1,000, the
// index loaded (FromOpen: the first read after a reopen, which builds the
// index from the log, is in the time).
func BenchmarkStreamRead(b *testing.B) {
	const n, size = 20000, 256
	chunk := make([]byte, size)
	setup := func(b *testing.B) (*DB, string) {
		dir := b.TempDir() + "/store"
		db, err := Open(dir, &Options{FS: vfs.Default, Logger: quiet()})
		if err != nil {
			b.Fatal(err)
		}
		run, _ := db.Run(ctx, "r")
		a, _ := run.Begin(ctx)
		for i := 0; i < n; i++ {
			if _, err := a.Append(ctx, "tok", chunk); err != nil {
				b.Fatal(err)
			}
		}
		if err := a.Commit(ctx, new(frame.Delta).Set("k", nil)); err != nil {
			b.Fatal(err)
		}
		return db, dir
	}
	readAll := func(b *testing.B, run *Run) {
		from, got := uint64(0), 0
		for {
			bt, err := run.ReadStream(ctx, "tok", from, &ReadStreamOptions{Max: 1000})
			if err != nil {
				b.Fatal(err)
			}
			if len(bt.Chunks) == 0 {
				break
			}
			got += len(bt.Chunks)
			from = bt.Next
		}
		if got != n {
			b.Fatalf("read %d chunks, want %d", got, n)
		}
	}
	b.Run("Loaded", func(b *testing.B) {
		db, _ := setup(b)
		defer db.Close()
		run, _ := db.Run(ctx, "r")
		readAll(b, run) // the index is loaded
		b.SetBytes(n * size)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			readAll(b, run)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/chunk")
	})
	b.Run("FromOpen", func(b *testing.B) {
		db, dir := setup(b)
		db.Close()
		b.SetBytes(n * size)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			db, err := Open(dir, &Options{FS: vfs.Default, Logger: quiet()})
			if err != nil {
				b.Fatal(err)
			}
			run, _ := db.Run(ctx, "r")
			b.StartTimer()
			readAll(b, run)
			b.StopTimer()
			db.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/chunk")
	})
}
