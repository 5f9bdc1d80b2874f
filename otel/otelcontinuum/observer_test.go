package otelcontinuum_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/otel/otelcontinuum"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

var ctx = context.Background()

// telemetry is one process's metrics and spans, read in memory.
type telemetry struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	mp     *sdkmetric.MeterProvider
	tp     *sdktrace.TracerProvider
	obs    *otelcontinuum.Observer
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	tel := &telemetry{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	tel.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans))
	obs, err := otelcontinuum.NewObserver(otelcontinuum.Config{MeterProvider: tel.mp, TracerProvider: tel.tp})
	if err != nil {
		t.Fatal(err)
	}
	tel.obs = obs
	return tel
}

// metrics collects what the reader holds now.
type metrics map[string]metricdata.Metrics

func (tel *telemetry) collect(t *testing.T) metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	m := metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, x := range sm.Metrics {
			if _, dup := m[x.Name]; dup {
				t.Errorf("metric %s exported twice", x.Name)
			}
			m[x.Name] = x
		}
	}
	return m
}

// sum returns the value of the counter name at the attributes kv (key,
// value pairs), and whether it has such a point.
func (m metrics) sum(name string, kv ...string) (int64, bool) {
	want := attrs(kv...)
	switch d := m[name].Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Value, true
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Value, true
			}
		}
	}
	return 0, false
}

// points returns every attribute set the counter name has a point at,
// as "key=value" strings, with its value.
func (m metrics) points(name string) map[string]int64 {
	out := map[string]int64{}
	if d, ok := m[name].Data.(metricdata.Sum[int64]); ok {
		for _, p := range d.DataPoints {
			var kv []string
			for _, a := range p.Attributes.ToSlice() {
				kv = append(kv, string(a.Key)+"="+a.Value.Emit())
			}
			out[strings.Join(kv, ",")] = p.Value
		}
	}
	return out
}

// hist returns the count and sum of the histogram name (one point, no
// attributes), float or int.
func (m metrics) hist(name string) (count uint64, sum float64) {
	switch d := m[name].Data.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			count, sum = count+p.Count, sum+p.Sum
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			count, sum = count+p.Count, sum+float64(p.Sum)
		}
	}
	return count, sum
}

func attrs(kv ...string) attribute.Set {
	var a []attribute.KeyValue
	for i := 0; i+1 < len(kv); i += 2 {
		a = append(a, attribute.String(kv[i], kv[i+1]))
	}
	return attribute.NewSet(a...)
}

func options(fs vfs.FS, obs engine.Observer) *engine.Options {
	return &engine.Options{FS: fs, SegmentSize: 1 << 20, SnapshotEvery: 5, Observer: obs,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func tool(name string) ledger.Action { return ledger.Action{Tool: name, Args: []byte(`{"n":1}`)} }

func returns(s string) ledger.Exec {
	return func(context.Context, string) ([]byte, error) { return []byte(s), nil }
}

func msg(s string) *frame.Delta {
	return new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: s})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// atomSizes returns the size in the log of every atom record of run r.
func atomSizes(t *testing.T, fs vfs.FS) map[uint64]int {
	t.Helper()
	size := map[uint64]int{}
	must(t, engine.Scan(ctx, "store", fs, func(r *engine.LogRecord) error {
		if r.Kind == "atom" {
			size[r.Seq] = r.Size
		}
		return nil
	}))
	return size
}

// TestScriptedWorkload runs an agent's workload across a crash and checks
// every metric and span the Observer made, to the exact count.
//
// First process: atom 1 does search and fetch and commits; atom 2 does
// charge and fails; atom 2 again finds charge cached and commits; atom 3
// does email, then pay, during whose exec the machine loses power.
// Second process: atom 3 again finds email cached and pay in doubt,
// resolves pay, finds it cached by its key, and commits; atoms 4-8
// commit, and the snapshot store takes a snapshot; then verify.
func TestScriptedWorkload(t *testing.T) {
	mem := vfs.NewCrashableMem()
	p1 := newTelemetry(t)
	db, err := engine.Open("store", options(mem, p1.obs))
	must(t, err)
	run, err := db.Run(ctx, "agent")
	must(t, err)

	// The agent's own span for its step: the parent of the atom's span.
	stepCtx, step := p1.tp.Tracer("agent").Start(ctx, "agent.step")
	a, err := run.Begin(stepCtx)
	must(t, err)
	var execSpan trace.SpanContext
	_, err = a.Do(ctx, tool("search"), func(ctx context.Context, _ string) ([]byte, error) {
		execSpan = trace.SpanContextFromContext(ctx)
		return []byte("found"), nil
	})
	must(t, err)
	_, err = a.Do(stepCtx, tool("fetch"), returns("page")) // under the step's span: linked
	must(t, err)
	must(t, a.Commit(ctx, msg("one")))
	step.End()

	a, _ = run.Begin(ctx)
	_, err = a.Do(ctx, tool("charge"), returns("charged"))
	must(t, err)
	must(t, a.Fail(ctx, "model refused"))
	a, _ = run.Begin(ctx)
	_, err = a.Do(ctx, tool("charge"), returns("charged twice"))
	must(t, err)
	must(t, a.Commit(ctx, msg("two")))

	a, _ = run.Begin(ctx)
	_, err = a.Do(ctx, tool("email"), returns("sent"))
	must(t, err)
	var crashed *vfs.MemFS
	_, err = a.Do(ctx, tool("pay"), func(context.Context, string) ([]byte, error) {
		crashed = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		return []byte("paid"), nil
	})
	must(t, err)
	must(t, db.Close())
	st1 := db.Stats()

	m := p1.collect(t)
	check := func(what string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	checkSum := func(name string, want int64, kv ...string) {
		t.Helper()
		got, ok := m.sum(name, kv...)
		if !ok || got != want {
			t.Errorf("%s%v: %d (point found: %v), want %d", name, kv, got, ok, want)
		}
	}
	checkSum(otelcontinuum.MetricAtoms, 2, otelcontinuum.AttrAtomOutcome, "committed")
	checkSum(otelcontinuum.MetricAtoms, 1, otelcontinuum.AttrAtomOutcome, "failed")
	checkSum(otelcontinuum.MetricActions, 5, otelcontinuum.AttrActionOutcome, "executed")
	checkSum(otelcontinuum.MetricActions, 1, otelcontinuum.AttrActionOutcome, "cached")
	check("action outcomes", len(m.points(otelcontinuum.MetricActions)), 2)
	n, _ := m.hist(otelcontinuum.MetricCommitDuration)
	check("commit durations", n, uint64(2))
	sizes := atomSizes(t, crashed)
	n, sum := m.hist(otelcontinuum.MetricAtomSize)
	check("atom sizes", n, uint64(2))
	check("atom bytes", sum, float64(sizes[1]+sizes[2]))
	// Every append of the log, Close's included, went through a group.
	n, sum = m.hist(otelcontinuum.MetricGroupSize)
	check("appends in groups", sum, float64(st1.Log.Appends))
	if n == 0 || n > uint64(st1.Log.Writes) {
		t.Errorf("%d group commits for %d writes", n, st1.Log.Writes)
	}
	nSync, _ := m.hist(otelcontinuum.MetricSyncDuration)
	check("group commits that synced", nSync, n) // fsync on: every group syncs
	if _, ok := m[otelcontinuum.MetricRestartTime]; ok {
		t.Errorf("a restart recorded for the creation of the store")
	}
	if _, ok := m[otelcontinuum.MetricSnapshots]; ok {
		t.Errorf("snapshots recorded before any was due")
	}

	// Spans: three atoms ended, the fourth never did (the crash).
	ended := p1.spans.Ended()
	byName := func(name string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range ended {
			if s.Name() == name {
				out = append(out, s)
			}
		}
		return out
	}
	atoms := byName(otelcontinuum.SpanAtom)
	check("atom spans ended", len(atoms), 3)
	check("spans started", len(p1.spans.Started()), len(ended)+1)
	stepSpan := byName("agent.step")[0]
	check("atom 1's parent is the agent's step", atoms[0].Parent().SpanID(), stepSpan.SpanContext().SpanID())
	check("atom 2 (failed) status", atoms[1].Status().Code, codes.Error)
	want := map[string]string{ // action span -> its atom span's seq and outcome
		"continuum.do search": "1 executed", "continuum.do fetch": "1 executed",
		"continuum.do email": "3 executed", "continuum.do pay": "3 executed",
	}
	seqOf := map[trace.SpanID]string{}
	for _, s := range p1.spans.Started() {
		if s.Name() == otelcontinuum.SpanAtom {
			seqOf[s.SpanContext().SpanID()] = attr(s.Attributes(), otelcontinuum.AttrSeq)
		}
	}
	var charges []string
	for _, s := range ended {
		if !strings.HasPrefix(s.Name(), otelcontinuum.SpanDo) {
			continue
		}
		got := seqOf[s.Parent().SpanID()] + " " + attr(s.Attributes(), otelcontinuum.AttrActionOutcome)
		if s.Name() == "continuum.do charge" {
			charges = append(charges, got)
			continue
		}
		check(s.Name(), got, want[s.Name()])
		if s.Parent().TraceID() != s.SpanContext().TraceID() {
			t.Errorf("%s is in another trace than its atom", s.Name())
		}
	}
	check("charge spans", strings.Join(charges, ", "), "2 executed, 2 cached")
	search := byName("continuum.do search")[0]
	check("exec's context carries the action's span", execSpan.SpanID(), search.SpanContext().SpanID())
	if links := byName("continuum.do fetch")[0].Links(); len(links) != 1 || links[0].SpanContext.SpanID() != stepSpan.SpanContext().SpanID() {
		t.Errorf("fetch, called under the step's span, links %v, want the step", links)
	}
	check("search's key", attr(search.Attributes(), otelcontinuum.AttrKey), ledger.DefaultKey("agent", 1, 0))

	// The second process, after the power loss.
	p2 := newTelemetry(t)
	db2, err := engine.Open("store", options(crashed, p2.obs))
	must(t, err)
	statsReg, err := p2.obs.ObserveStats(db2)
	must(t, err)
	run2, err := db2.Run(ctx, "agent")
	must(t, err)
	a, _ = run2.Begin(ctx)
	_, err = a.Do(ctx, tool("email"), returns("sent again"))
	must(t, err)
	_, err = a.Do(ctx, tool("pay"), returns("paid again"))
	var doubt *ledger.InDoubtError
	if !errors.As(err, &doubt) {
		t.Fatalf("pay after the crash: %v, want in doubt", err)
	}
	inDoubtNow, _ := p2.collect(t).sum(otelcontinuum.MetricLedgerInDoubt)
	check("actions in doubt before the resolve", inDoubtNow, int64(1))
	must(t, a.ResolveInDoubt(ctx, doubt, []byte("paid")))
	byKey := tool("pay")
	byKey.Key = doubt.Key
	_, err = a.Do(ctx, byKey, returns("paid again"))
	must(t, err)
	must(t, a.Commit(ctx, msg("three")))
	for seq := 4; seq <= 8; seq++ {
		a, _ := run2.Begin(ctx)
		must(t, a.Commit(ctx, msg(fmt.Sprint("atom ", seq))))
	}
	// SnapshotEvery is 5: the snapshot store (opened in the background)
	// takes a snapshot of a seq in 5..8.
	for deadline := time.Now().Add(30 * time.Second); db2.Stats().Snapshots == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no background snapshot was written")
		}
	}
	m = p2.collect(t)
	st2 := db2.Stats()
	checkSum(otelcontinuum.MetricLedgerInDoubt, 0)
	checkSum(otelcontinuum.MetricActionCalls, st2.Actions)
	checkSum(otelcontinuum.MetricRuns, 1)
	must(t, statsReg.Unregister())
	must(t, db2.Close())
	st2 = db2.Stats()
	rep, err := p2.obs.Verify(ctx, "store", &engine.VerifyOptions{FS: crashed, Deep: true})
	must(t, err)
	if !rep.OK {
		t.Fatalf("verify: %+v", rep.Failures)
	}

	m = p2.collect(t)
	checkSum(otelcontinuum.MetricAtoms, 6, otelcontinuum.AttrAtomOutcome, "committed")
	check("atom outcomes", len(m.points(otelcontinuum.MetricAtoms)), 1)
	checkSum(otelcontinuum.MetricActions, 2, otelcontinuum.AttrActionOutcome, "cached")
	checkSum(otelcontinuum.MetricActions, 1, otelcontinuum.AttrActionOutcome, "in_doubt")
	checkSum(otelcontinuum.MetricActions, 1, otelcontinuum.AttrActionOutcome, "resolved")
	check("action outcomes", len(m.points(otelcontinuum.MetricActions)), 3)
	n, sum = m.hist(otelcontinuum.MetricRestartTime)
	check("restarts", n, uint64(1))
	check("restart time", sum, st2.Open.Duration.Seconds())
	if st2.Open.Replayed == 0 {
		t.Fatal("the restart replayed nothing: the workload did not leave a tail")
	}
	checkSum(otelcontinuum.MetricReplayed, int64(st2.Open.Replayed))
	checkSum(otelcontinuum.MetricSnapshots, st2.Snapshots)
	n, sum = m.hist(otelcontinuum.MetricSnapshotLag)
	check("snapshot lags", n, uint64(st2.Snapshots))
	if sum < 5 || sum > 8*float64(n) {
		t.Errorf("snapshot lag sum %v over %d snapshots, want the first in 5..8", sum, n)
	}
	sizes = atomSizes(t, crashed)
	n, sum = m.hist(otelcontinuum.MetricAtomSize)
	check("atom sizes", n, uint64(6))
	check("atom bytes", sum, float64(sizes[3]+sizes[4]+sizes[5]+sizes[6]+sizes[7]+sizes[8]))
	n, sum = m.hist(otelcontinuum.MetricGroupSize)
	check("appends in groups", sum, float64(st2.Log.Appends))
	checkSum(otelcontinuum.MetricVerifications, 1, otelcontinuum.AttrVerifyResult, "intact")
	n, _ = m.hist(otelcontinuum.MetricVerifyDuration)
	check("verify durations", n, uint64(1))
	if _, ok := m[otelcontinuum.MetricVerifyFailures]; ok {
		t.Errorf("verify failures recorded for an intact store")
	}

	// Spans: atom 3, interrupted, with its four calls as children.
	ended = p2.spans.Ended()
	var atom3 sdktrace.ReadOnlySpan
	for _, s := range ended {
		if s.Name() == otelcontinuum.SpanAtom && attr(s.Attributes(), otelcontinuum.AttrSeq) == "3" {
			atom3 = s
		}
	}
	if atom3 == nil || attr(atom3.Attributes(), otelcontinuum.AttrInterrupted) != "true" ||
		attr(atom3.Attributes(), otelcontinuum.AttrAtomActions) != "2" {
		t.Fatalf("atom 3's span: %v", atom3)
	}
	var children []string
	for _, s := range ended {
		if s.Parent().SpanID() == atom3.SpanContext().SpanID() {
			children = append(children, s.Name()+"="+attr(s.Attributes(), otelcontinuum.AttrActionOutcome))
			if s.EndTime().After(atom3.EndTime()) {
				t.Errorf("%s ended after its atom", s.Name())
			}
		}
	}
	slices.Sort(children)
	check("atom 3's children", strings.Join(children, " "),
		"continuum.do email=cached continuum.do pay=cached continuum.do pay=in_doubt continuum.resolve pay=resolved")
	for _, s := range ended {
		if s.Name() == "continuum.do pay" && attr(s.Attributes(), otelcontinuum.AttrActionOutcome) == "in_doubt" && s.Status().Code != codes.Error {
			t.Errorf("in-doubt Do's span status %v, want an error", s.Status())
		}
	}
	if n := len(byNameIn(ended, otelcontinuum.SpanVerify)); n != 1 {
		t.Errorf("%d verify spans, want 1", n)
	}
}

func byNameIn(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// attr returns the value of attribute key, as text ("" if absent).
func attr(kv []attribute.KeyValue, key string) string {
	for _, a := range kv {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

// TestWaitRecords: the Observer is an engine.WaitObserver and counts the
// records of waits by kind.
func TestWaitRecords(t *testing.T) {
	tel := newTelemetry(t)
	db, err := engine.Open(filepath.Join(t.TempDir(), "s"), &engine.Options{Observer: tel.obs, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(ctx, "go", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SendEvent(ctx, "r", "other", "s1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SendEvent(ctx, "r", "go", "s2", nil); err != nil {
		t.Fatal(err)
	}
	m := tel.collect(t)
	for kind, want := range map[string]int64{"wait": 1, "event": 2} {
		if got, _ := m.sum(otelcontinuum.MetricWaitRecords, otelcontinuum.AttrWaitRecord, kind); got != want {
			t.Errorf("%s records: %d, want %d", kind, got, want)
		}
	}
}

// TestStreamChunks: the Observer's atoms are engine.StreamObservers; the
// chunks appended to runs' streams and their bytes are counted, those of
// an attempt that failed too, an append refused not at all.
func TestStreamChunks(t *testing.T) {
	tel := newTelemetry(t)
	db, err := engine.Open(filepath.Join(t.TempDir(), "s"), &engine.Options{Observer: tel.obs, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := db.Run(ctx, "r")
	must(t, err)
	a, err := r.Begin(ctx)
	must(t, err)
	for _, c := range []string{"tok", "ens", ""} {
		_, err := a.Append(ctx, "tokens", []byte(c))
		must(t, err)
	}
	_, err = a.Append(ctx, "progress", []byte("50%"))
	must(t, err)
	if _, err := a.Append(ctx, "no/slash", []byte("refused")); !errors.Is(err, engine.ErrInvalidStreamName) {
		t.Fatalf("append to stream %q: %v, want ErrInvalidStreamName", "no/slash", err)
	}
	if _, err := a.Append(ctx, "tokens", make([]byte, engine.MaxChunkSize+1)); !errors.Is(err, engine.ErrTooLarge) {
		t.Fatalf("append of %d bytes: %v, want ErrTooLarge", engine.MaxChunkSize+1, err)
	}
	must(t, a.Fail(ctx, "retry"))
	a, err = r.Begin(ctx)
	must(t, err)
	_, err = a.Append(ctx, "tokens", []byte("tokens"))
	must(t, err)
	must(t, a.Commit(ctx, msg("tokens")))

	m := tel.collect(t)
	for name, want := range map[string]int64{otelcontinuum.MetricStreamChunks: 5, otelcontinuum.MetricStreamPayload: 3 + 3 + 0 + 3 + 6} {
		// One point, without attributes: no stream name, no run.
		if got := m.points(name); len(got) != 1 || got[""] != want {
			t.Errorf("%s: %v, want one point of %d without attributes", name, got, want)
		}
	}
	if got, _ := m.sum(otelcontinuum.MetricAtoms, otelcontinuum.AttrAtomOutcome, "failed"); got != 1 {
		t.Errorf("failed atoms: %d, want 1", got)
	}
}
