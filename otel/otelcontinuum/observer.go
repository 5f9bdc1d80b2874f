package otelcontinuum

import (
	"context"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Config says where an Observer's metrics and spans go. The zero value
// uses the global providers (otel.GetMeterProvider, otel.GetTracerProvider).
type Config struct {
	// MeterProvider makes the meter; nil: otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider makes the tracer; nil: otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Attributes are added to every measurement (not to spans): name the
	// store with them when one process has several open, so that their
	// figures stay apart.
	Attributes []attribute.KeyValue
}

// Observer records the engine's events as OpenTelemetry metrics and spans.
// It implements engine.Observer: set it as engine.Options.Observer. It is
// safe for concurrent use and may serve several DBs (their figures add up
// unless Config.Attributes tell them apart: one Observer per store then).
type Observer struct {
	meter  metric.Meter
	tracer trace.Tracer
	attrs  []attribute.KeyValue

	atoms      metric.Int64Counter
	actions    metric.Int64Counter
	commitDur  metric.Float64Histogram
	atomSize   metric.Int64Histogram
	groupSize  metric.Int64Histogram
	syncDur    metric.Float64Histogram
	restartDur metric.Float64Histogram
	replayed   metric.Int64Counter
	snapshots  metric.Int64Counter
	snapLag    metric.Int64Histogram

	verifications  metric.Int64Counter
	verifyDur      metric.Float64Histogram
	verifyFailures metric.Int64Counter
	verifyWarnings metric.Int64Counter
	waitRecords    metric.Int64Counter
	waitKinds      map[record.Kind]metric.MeasurementOption // the attribute sets of waitRecords
	streamChunks   metric.Int64Counter
	streamPayload  metric.Int64Counter

	// Measurement options made once, so that recording builds no
	// attribute set: base holds Config.Attributes alone.
	base              metric.MeasurementOption
	committed, failed metric.MeasurementOption
	outcomes          map[engine.ActionOutcome]metric.MeasurementOption
}

var _ engine.Observer = (*Observer)(nil)

// Bucket boundaries: durations from 50 µs (a commit without fsync) to 10 s,
// sizes in powers of two from 64 B to 1 MiB, counts in powers of two.
var (
	durationBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	sizeBuckets     = powersOfTwo(64, 1<<20)
	groupBuckets    = powersOfTwo(1, 1024)
	lagBuckets      = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000}
)

func powersOfTwo(from, to float64) []float64 {
	var b []float64
	for v := from; v <= to; v *= 2 {
		b = append(b, v)
	}
	return b
}

// NewObserver makes the instruments of doc.go's table on cfg's meter
// provider and a tracer on its tracer provider.
func NewObserver(cfg Config) (*Observer, error) {
	mp, tp := cfg.MeterProvider, cfg.TracerProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	o := &Observer{
		meter:  mp.Meter(ScopeName),
		tracer: tp.Tracer(ScopeName),
		attrs:  append([]attribute.KeyValue(nil), cfg.Attributes...),
	}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := o.meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		h, err := o.meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	histogram := func(name, unit, desc string, bounds []float64) metric.Int64Histogram {
		h, err := o.meter.Int64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(bounds...))
		errs = append(errs, err)
		return h
	}
	o.atoms = counter(MetricAtoms, "{atom}", "Atoms that ended, by outcome: committed (durable) or failed (Atom.Fail).")
	o.actions = counter(MetricActions, "{action}", "Do and Resolve calls that reached the ledger, by outcome.")
	o.commitDur = seconds(MetricCommitDuration, "Wall time of Atom.Commit: encoding, append, group-commit fsync wait, apply.")
	o.atomSize = histogram(MetricAtomSize, "By", "Bytes of a committed atom's log record, as stored (compressed).", sizeBuckets)
	o.groupSize = histogram(MetricGroupSize, "{append}", "Appends made durable by one group commit of the log.", groupBuckets)
	o.syncDur = seconds(MetricSyncDuration, "Time of a group commit's fdatasyncs: what each of its appends waited for once written.")
	o.restartDur = seconds(MetricRestartTime, "Wall time of Open of an existing store (replay of the log's tail included).")
	o.replayed = counter(MetricReplayed, "{record}", "Log records Open replayed (the tail since the last engine checkpoint).")
	o.snapshots = counter(MetricSnapshots, "{snapshot}", "Background snapshots written to the snapshot store.")
	o.snapLag = histogram(MetricSnapshotLag, "{atom}", "Atoms of a run not covered by a snapshot just before a new one landed.", lagBuckets)
	o.verifications = counter(MetricVerifications, "{verification}", "Verifications of a store, by result: intact, tampered or error.")
	o.verifyDur = seconds(MetricVerifyDuration, "Wall time of a verification that produced a report.")
	o.verifyFailures = counter(MetricVerifyFailures, "{failure}", "Failures verify reported, by kind.")
	o.verifyWarnings = counter(MetricVerifyWarnings, "{warning}", "Warnings verify reported, by kind.")
	o.waitRecords = counter(MetricWaitRecords, "{record}", "Records of runs' waits made durable, by kind: wait, event, wake.")
	o.streamChunks = counter(MetricStreamChunks, "{chunk}", "Chunks atoms appended to their runs' streams (Atom.Append).")
	o.streamPayload = counter(MetricStreamPayload, "By", "Data bytes of the chunks atoms appended to their runs' streams.")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelcontinuum: making instruments: %w", err)
	}

	o.base = o.with()
	o.committed = o.with(attribute.String(AttrAtomOutcome, "committed"))
	o.failed = o.with(attribute.String(AttrAtomOutcome, "failed"))
	o.waitKinds = map[record.Kind]metric.MeasurementOption{}
	for _, k := range []record.Kind{record.KindWait, record.KindEvent, record.KindWake} {
		o.waitKinds[k] = o.with(attribute.String(AttrWaitRecord, k.String()))
	}
	o.outcomes = map[engine.ActionOutcome]metric.MeasurementOption{}
	for out := engine.ActionExecuted; out <= engine.ActionResolvedFailed; out++ {
		o.outcomes[out] = o.with(attribute.String(AttrActionOutcome, out.String()))
	}
	return o, nil
}

// with returns the measurement option of Config.Attributes and kv.
func (o *Observer) with(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue(nil), o.attrs...), kv...)...))
}

func (o *Observer) outcome(out engine.ActionOutcome) metric.MeasurementOption {
	if m, ok := o.outcomes[out]; ok {
		return m
	}
	return o.with(attribute.String(AttrActionOutcome, out.String()))
}

// Opened records a restart: an Open of an existing store (the creation of
// a store replays nothing and is not recorded).
func (o *Observer) Opened(info engine.OpenInfo) {
	if info.Created {
		return
	}
	ctx := context.Background()
	o.restartDur.Record(ctx, info.Duration.Seconds(), o.base)
	o.replayed.Add(ctx, int64(info.Replayed), o.base)
}

// GroupCommitted records a group commit's size and, when it synced, the
// time of its fdatasyncs.
func (o *Observer) GroupCommitted(g wal.GroupCommit) {
	ctx := context.Background()
	o.groupSize.Record(ctx, int64(g.Appends), o.base)
	if g.Syncs > 0 {
		o.syncDur.Record(ctx, g.SyncDuration.Seconds(), o.base)
	}
}

// WaitRecorded counts a wait, event or wake record (engine.WaitObserver).
func (o *Observer) WaitRecorded(k record.Kind, _ string, _ uint64, _ engine.Wait) {
	m, ok := o.waitKinds[k]
	if !ok {
		m = o.with(attribute.String(AttrWaitRecord, k.String()))
	}
	o.waitRecords.Add(context.Background(), 1, m)
}

var _ engine.WaitObserver = (*Observer)(nil)

// SnapshotWritten counts a snapshot and records the run's lag before it.
func (o *Observer) SnapshotWritten(ev engine.SnapshotEvent) {
	ctx := context.Background()
	o.snapshots.Add(ctx, 1, o.base)
	o.snapLag.Record(ctx, int64(ev.Head-ev.Previous), o.base)
}

// AtomBegun starts the atom's span, a child of the span in Begin's
// context; it ends at Commit or Fail.
func (o *Observer) AtomBegun(ctx context.Context, ev engine.AtomEvent) engine.AtomObserver {
	_, span := o.tracer.Start(ctx, SpanAtom)
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String(AttrRun, ev.Run),
			attribute.Int64(AttrSeq, int64(ev.Seq)),
			attribute.Bool(AttrInterrupted, ev.Interrupted))
	}
	return &atom{o: o, span: span, mctx: trace.ContextWithSpan(context.Background(), span)}
}

// atom is one atom's observer: its span, and a context holding only the
// span for the measurements made when it ends (exemplars link to it).
type atom struct {
	o    *Observer
	span trace.Span
	mctx context.Context
}

// ActionStarted starts the action's span as a child of the atom's span,
// whatever span ctx carries (that one, if any and another, is linked), and
// returns ctx with it: exec runs under the action's span.
func (a *atom) ActionStarted(ctx context.Context, ev engine.ActionEvent) (context.Context, engine.ActionObserver) {
	name := SpanDo + " " + ev.Tool
	if ev.Resolve {
		name = SpanResolve + " " + ev.Tool
	}
	var opts []trace.SpanStartOption
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && !sc.Equal(a.span.SpanContext()) {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := a.o.tracer.Start(trace.ContextWithSpan(ctx, a.span), name, opts...)
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String(AttrTool, ev.Tool),
			attribute.String(AttrKey, ev.Key),
			attribute.Int64(AttrIndex, int64(ev.Index)),
			attribute.String(AttrFingerprint, ev.Fingerprint.String()),
			attribute.Bool(AttrIdempotent, ev.Idempotent))
	}
	return ctx, &action{o: a.o, ctx: ctx, span: span}
}

// Committed records the atom's commit latency and size, and ends its span.
func (a *atom) Committed(ev engine.CommitEvent) {
	o := a.o
	o.atoms.Add(a.mctx, 1, o.committed)
	o.commitDur.Record(a.mctx, ev.Duration.Seconds(), o.base)
	o.atomSize.Record(a.mctx, int64(ev.Bytes), o.base)
	if a.span.IsRecording() {
		a.span.SetAttributes(attribute.String(AttrAtomOutcome, "committed"),
			attribute.Int(AttrAtomBytes, ev.Bytes), attribute.Int(AttrAtomActions, ev.Actions))
	}
	a.span.End()
}

// ChunkAppended counts a chunk the atom appended to a stream of its run,
// and its data bytes (engine.StreamObserver).
func (a *atom) ChunkAppended(ev engine.StreamEvent) {
	a.o.streamChunks.Add(a.mctx, 1, a.o.base)
	a.o.streamPayload.Add(a.mctx, int64(ev.Bytes), a.o.base)
}

var _ engine.StreamObserver = (*atom)(nil)

// Failed counts the failed atom and ends its span with an error status.
func (a *atom) Failed(reason string) {
	a.o.atoms.Add(a.mctx, 1, a.o.failed)
	if a.span.IsRecording() {
		a.span.SetAttributes(attribute.String(AttrAtomOutcome, "failed"), attribute.String(AttrFailReason, reason))
		a.span.SetStatus(codes.Error, "atom failed: "+reason)
	}
	a.span.End()
}

// action is one Do or Resolve call's observer.
type action struct {
	o    *Observer
	ctx  context.Context
	span trace.Span
}

// ActionEnded counts the call by outcome and ends its span; a call that
// failed or found its action in doubt ends with an error status.
func (x *action) ActionEnded(out engine.ActionOutcome, err error) {
	x.o.actions.Add(x.ctx, 1, x.o.outcome(out))
	if x.span.IsRecording() {
		x.span.SetAttributes(attribute.String(AttrActionOutcome, out.String()))
		if err != nil {
			x.span.SetStatus(codes.Error, err.Error())
		}
	}
	x.span.End()
}
