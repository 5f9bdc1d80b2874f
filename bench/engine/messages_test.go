package enginebench

// Message latency between runs, from the sending atom's Commit to the
// receiver's Receive, under load, beside the latency of a Commit without a
// message (the baseline: what the message's durability costs alone):
//
//	go test -run '^$' -bench MessageLatency -benchtime 300x -count 5 ./bench/engine
//
// Strict durability, fsync on, a real temporary directory. A sender run
// and a receiver run exchange one message at a time (the receiver is
// blocked in Receive when the sender commits; it commits its consumption
// before the next is sent, so no message waits in a queue); load runs
// commit atoms of their own meanwhile, sharing the group commit. Each
// round also times a Commit of the sender without a message. Reported:
// p50 and p99 of both, in µs, and their ratio at p50.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

func BenchmarkMessageLatency(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	for _, load := range []int{0, 4, 16} {
		b.Run(fmt.Sprintf("load=%d", load), func(b *testing.B) {
			db, err := engine.Open(filepath.Join(b.TempDir(), "s"), &engine.Options{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			sender, err := db.Run(ctx, "sender")
			if err != nil {
				b.Fatal(err)
			}
			receiver, err := db.Run(ctx, "receiver")
			if err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for l := range load {
				run, err := db.Run(ctx, fmt.Sprint("load-", l))
				if err != nil {
					b.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if err := commit(ctx, run, i); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			starts := make([]time.Time, b.N)
			msg := make([]time.Duration, b.N)
			base := make([]time.Duration, b.N)
			received := make(chan error)
			go func() {
				for i := range b.N {
					a, err := receiver.Begin(ctx)
					if err == nil {
						var m engine.Message
						if m, err = a.Receive(ctx); err == nil {
							msg[i] = time.Since(starts[i])
							err = a.Commit(ctx, new(frame.Delta).Set("last", m.Payload))
						}
					}
					received <- err
					if err != nil {
						return
					}
				}
			}()
			time.Sleep(10 * time.Millisecond) // the receiver waits in Receive
			b.ResetTimer()
			for i := range b.N {
				a, err := sender.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := a.Send(ctx, "receiver", []byte(fmt.Sprint("task ", i))); err != nil {
					b.Fatal(err)
				}
				starts[i] = time.Now()
				if err := a.Commit(ctx, new(frame.Delta).Set("sent", []byte(fmt.Sprint(i)))); err != nil {
					b.Fatal(err)
				}
				if err := <-received; err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				if err := commit(ctx, sender, i); err != nil {
					b.Fatal(err)
				}
				base[i] = time.Since(t0)
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			p := func(d []time.Duration, q float64) float64 {
				s := slices.Clone(d)
				slices.Sort(s)
				return float64(s[min(len(s)-1, int(q*float64(len(s))))].Nanoseconds()) / 1e3
			}
			b.ReportMetric(p(msg, 0.5), "msg-p50-µs")
			b.ReportMetric(p(msg, 0.99), "msg-p99-µs")
			b.ReportMetric(p(base, 0.5), "commit-p50-µs")
			b.ReportMetric(p(base, 0.99), "commit-p99-µs")
			b.ReportMetric(p(msg, 0.5)/p(base, 0.5), "msg/commit-p50")
		})
	}
}

// commit commits one atom of run that sets a small value.
func commit(ctx context.Context, run *engine.Run, i int) error {
	a, err := run.Begin(ctx)
	if err != nil {
		return err
	}
	return a.Commit(ctx, new(frame.Delta).Set(fmt.Sprint("k", i%16), []byte(fmt.Sprintf("value %d of some state", i))))
}

// BenchmarkInboxRestart: after a restart, the first Inbox of a run, with
// INBOX as the last Close wrote it and with INBOX removed (rebuilt from
// the log), side by side, against the history the log holds:
//
//	go test -run '^$' -bench InboxRestart -benchtime 20x -count 5 ./bench/engine
//
// The store holds atoms of 4 runs sending messages around, 100 per run
// left unconsumed. Each op opens the store, gets one run and reads its
// inbox; Close (not timed) writes nothing: nothing changed. The baseline,
// INBOX=unread, is Open and Run without the Inbox.
func BenchmarkInboxRestart(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	for _, atoms := range []int{1000, 10000} {
		dir := filepath.Join(b.TempDir(), "s")
		db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		runs := []string{"planner", "researcher", "writer", "reviewer"}
		for i := range atoms {
			id := runs[i%len(runs)]
			run, err := db.Run(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			a, err := run.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if i >= 100*len(runs) { // the first 100 of each are left in the inboxes
				if _, _, err := a.TryReceive(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if err := a.Send(ctx, runs[(i+1)%len(runs)], []byte(fmt.Sprintf("message %d of some length, like a task", i))); err != nil {
				b.Fatal(err)
			}
			if err := a.Commit(ctx, new(frame.Delta).Set(fmt.Sprint("k", i%16), []byte(fmt.Sprint("v", i)))); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		for _, file := range []string{"unread", "kept", "removed"} {
			b.Run(fmt.Sprintf("atoms=%d/INBOX=%s", atoms, file), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if file == "removed" {
						b.StopTimer()
						if err := os.Remove(filepath.Join(dir, "INBOX")); err != nil && !os.IsNotExist(err) {
							b.Fatal(err)
						}
						b.StartTimer()
					}
					db, err := engine.Open(dir, &engine.Options{Logger: quiet})
					if err != nil {
						b.Fatal(err)
					}
					run, err := db.Run(ctx, "planner")
					if err != nil {
						b.Fatal(err)
					}
					if file != "unread" { // the baseline: Open and Run alone
						in, err := run.Inbox(ctx)
						if err != nil || len(in) == 0 {
							b.Fatalf("inbox: %d messages, %v", len(in), err)
						}
						if got := db.Stats().InboxRebuilt != ""; got != (file == "removed") {
							b.Fatalf("rebuilt %v with INBOX %s", got, file)
						}
					}
					b.StopTimer()
					if err := db.Close(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			})
		}
	}
}
