package otelcontinuum_test

// The cost of the observation hook per atom, fsync off so that only CPU
// is measured, side by side in one process:
//
//	cd otel && go test -run '^$' -bench AtomCPU -benchtime 5000x -count 8 ./otelcontinuum
//
// nil: no Observer (the engine's nil checks only); noop: an Observer
// whose methods do nothing, so that every call site runs; metrics: this
// package's Observer on the SDK's meter provider and no tracing; otel:
// the same with the SDK's tracer provider sampling every span (spans made,
// their attributes set, and dropped by the span processor). cpu-µs/atom is
// the process's user+system CPU time per atom (getrusage), background
// goroutines included; ns/op is wall time.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/otel/otelcontinuum"
	"github.com/continuumdb/continuum/wal"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// noopObserver hears every event and does nothing.
type noopObserver struct{}

func (noopObserver) Opened(engine.OpenInfo)                  {}
func (noopObserver) GroupCommitted(wal.GroupCommit)          {}
func (noopObserver) SnapshotWritten(engine.SnapshotEvent)    {}
func (noopObserver) Committed(engine.CommitEvent)            {}
func (noopObserver) Failed(string)                           {}
func (noopObserver) ActionEnded(engine.ActionOutcome, error) {}
func (o noopObserver) AtomBegun(context.Context, engine.AtomEvent) engine.AtomObserver {
	return o
}
func (o noopObserver) ActionStarted(ctx context.Context, _ engine.ActionEvent) (context.Context, engine.ActionObserver) {
	return ctx, o
}

// dropSpans is a span processor that drops every span once it ends.
type dropSpans struct{}

func (dropSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (dropSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (dropSpans) Shutdown(context.Context) error                  { return nil }
func (dropSpans) ForceFlush(context.Context) error                { return nil }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkAtomCPU(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	metricsOnly := func(b *testing.B) engine.Observer {
		o, err := otelcontinuum.NewObserver(otelcontinuum.Config{
			MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
			TracerProvider: tracenoop.NewTracerProvider(),
		})
		if err != nil {
			b.Fatal(err)
		}
		return o
	}
	full := func(b *testing.B) engine.Observer {
		o, err := otelcontinuum.NewObserver(otelcontinuum.Config{
			MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
				sdktrace.WithSpanProcessor(dropSpans{})),
		})
		if err != nil {
			b.Fatal(err)
		}
		return o
	}
	for _, c := range []struct {
		name string
		obs  func(*testing.B) engine.Observer
	}{
		{"nil", func(*testing.B) engine.Observer { return nil }},
		{"noop", func(*testing.B) engine.Observer { return noopObserver{} }},
		{"metrics", metricsOnly},
		{"otel", full},
	} {
		b.Run(c.name, func(b *testing.B) {
			db, err := engine.Open(filepath.Join(b.TempDir(), "s"), &engine.Options{NoSync: true, Logger: quiet, Observer: c.obs(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			ctx := context.Background()
			step := func(i int) {
				run, err := db.Run(ctx, fmt.Sprint("run-", i/2000))
				if err != nil {
					b.Fatal(err)
				}
				atom, err := run.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				act := ledger.Action{Tool: "search.web", Args: fmt.Appendf(nil, `{"q":"step %d of the plan","limit":10}`, i)}
				res, err := atom.Do(ctx, act, func(context.Context, string) ([]byte, error) {
					return fmt.Appendf(nil, `{"hits":["result %d","another result"]}`, i), nil
				})
				if err != nil {
					b.Fatal(err)
				}
				d := msg(fmt.Sprint("thinking about step ", i)).Set("last_search", res)
				if err := atom.Commit(ctx, d); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 300 { // past dictionary training
				step(1_000_000 + i)
			}
			for db.Stats().Dictionary == 0 {
				time.Sleep(10 * time.Millisecond)
			}
			b.ReportAllocs()
			c0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				step(i)
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N)/1e3, "cpu-µs/atom")
		})
	}
}
