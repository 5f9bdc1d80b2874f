package otelcontinuum_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/otel/otelcontinuum"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestStatsSameNames: a DB watched by the Observer on one meter provider
// and by ObserveStats on another reports the same values under the names
// they share, and every other Stats figure under its own name.
func TestStatsSameNames(t *testing.T) {
	mem := vfs.NewCrashableMem()
	db, err := engine.Open("store", options(mem, nil))
	must(t, err)
	run, _ := db.Run(ctx, "r")
	for i := range 3 {
		a, _ := run.Begin(ctx)
		_, err := a.Do(ctx, tool(fmt.Sprint("t", i)), returns("x"))
		must(t, err)
		must(t, a.Commit(ctx, msg("m")))
	}
	fs := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}) // a tail to replay
	must(t, db.Close())

	hook := newTelemetry(t)
	statsReader := sdkmetric.NewManualReader()
	store := attribute.String("store", "s1")
	db, err = engine.Open("store", options(fs, hook.obs))
	must(t, err)
	reg, err := otelcontinuum.ObserveStats(db, otelcontinuum.Config{
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(statsReader)),
		Attributes:    []attribute.KeyValue{store},
	})
	must(t, err)
	defer reg.Unregister()
	run, _ = db.Run(ctx, "r")
	for i := range 7 {
		a, _ := run.Begin(ctx)
		_, err := a.Do(ctx, tool("same"), returns("x")) // a new key each atom: executed
		must(t, err)
		if i == 2 {
			must(t, a.Fail(ctx, "retry"))
			a, _ = run.Begin(ctx)
			_, err := a.Do(ctx, tool("same"), returns("x")) // the failed atom's key: cached
			must(t, err)
		}
		must(t, a.Commit(ctx, msg(fmt.Sprint("atom ", i))))
	}
	for deadline := time.Now().Add(30 * time.Second); db.Stats().Snapshots == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no background snapshot was written")
		}
	}
	// Background work (a checkpoint, a snapshot) may move the figures
	// between a read of Stats and the collection: take the three again
	// until Stats is the same on both sides of it.
	var st engine.Stats
	fromStats, fromHook := metrics{}, metrics{}
	for attempt := 0; ; attempt++ {
		st = db.Stats()
		var rm metricdata.ResourceMetrics
		must(t, statsReader.Collect(ctx, &rm))
		clear(fromStats)
		for _, sm := range rm.ScopeMetrics {
			for _, x := range sm.Metrics {
				fromStats[x.Name] = x
			}
		}
		fromHook = hook.collect(t)
		if same(st, db.Stats()) {
			break
		}
		if attempt == 20 {
			t.Fatal("the store never stood still for a collection")
		}
		time.Sleep(10 * time.Millisecond)
	}

	for _, c := range []struct {
		name string
		kv   []string
		want int64
	}{
		{otelcontinuum.MetricAtoms, []string{otelcontinuum.AttrAtomOutcome, "committed"}, 7},
		{otelcontinuum.MetricAtoms, []string{otelcontinuum.AttrAtomOutcome, "failed"}, 1},
		{otelcontinuum.MetricActions, []string{otelcontinuum.AttrActionOutcome, "cached"}, 1},
		{otelcontinuum.MetricSnapshots, nil, st.Snapshots},
		{otelcontinuum.MetricReplayed, nil, int64(st.Open.Replayed)},
	} {
		h, okH := fromHook.sum(c.name, c.kv...)
		s, okS := fromStats.sum(c.name, append([]string{"store", "s1"}, c.kv...)...)
		if !okH || !okS || h != c.want || s != c.want {
			t.Errorf("%s%v: Observer %d (%v), Stats %d (%v), want %d", c.name, c.kv, h, okH, s, okS, c.want)
		}
	}
	if st.Open.Replayed == 0 {
		t.Error("the reopen replayed nothing: the mapping of Open.Replayed is untested")
	}

	flag := func(err error) int64 {
		if err != nil {
			return 1
		}
		return 0
	}
	for name, want := range map[string]int64{
		otelcontinuum.MetricActionCalls:     st.Actions,
		otelcontinuum.MetricRuns:            int64(st.Runs),
		otelcontinuum.MetricCheckpoints:     st.Checkpoints,
		otelcontinuum.MetricWALAppends:      st.Log.Appends,
		otelcontinuum.MetricWALRecords:      st.Log.Records,
		otelcontinuum.MetricWALPayload:      st.Log.Bytes,
		otelcontinuum.MetricWALWritten:      st.Log.WrittenBytes,
		otelcontinuum.MetricWALWrites:       st.Log.Writes,
		otelcontinuum.MetricWALSyncs:        st.Log.Syncs,
		otelcontinuum.MetricWALRotations:    st.Log.Rotations,
		otelcontinuum.MetricWALSegments:     int64(st.Log.Segments),
		otelcontinuum.MetricLedgerEntries:   int64(st.Ledger.Entries),
		otelcontinuum.MetricLedgerInDoubt:   int64(st.Ledger.InDoubt),
		otelcontinuum.MetricFramesRebuilt:   st.FramesRebuilt,
		otelcontinuum.MetricSnapMismatches:  st.SnapshotMismatches,
		otelcontinuum.MetricBackgroundError: flag(st.Background),
		otelcontinuum.MetricSnapStoreError:  flag(st.SnapshotStore),
	} {
		if got, ok := fromStats.sum(name, "store", "s1"); !ok || got != want {
			t.Errorf("%s: %d (point found: %v), Stats says %d", name, got, ok, want)
		}
	}
	if st.Actions != 8 || st.Log.Appends == 0 || st.Ledger.Entries == 0 {
		t.Errorf("the workload left Stats %+v: the mapping is not exercised", st)
	}
	checkFloat := func(name string, want float64) {
		t.Helper()
		var got []float64
		switch d := fromStats[name].Data.(type) {
		case metricdata.Gauge[float64]:
			for _, p := range d.DataPoints {
				got = append(got, p.Value)
			}
		case metricdata.Sum[float64]:
			for _, p := range d.DataPoints {
				got = append(got, p.Value)
			}
		}
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: %v, Stats says %v", name, got, want)
		}
	}
	checkFloat(otelcontinuum.MetricOpenDuration, st.Open.Duration.Seconds())
	checkFloat(otelcontinuum.MetricWALSyncTime, float64(st.Log.SyncNanos)/1e9)
	must(t, reg.Unregister())
	must(t, db.Close())
}

// same reports whether two Stats of a DB hold the same counters.
func same(a, b engine.Stats) bool {
	return a.Atoms == b.Atoms && a.Fails == b.Fails && a.Actions == b.Actions && a.Deduped == b.Deduped &&
		a.Snapshots == b.Snapshots && a.Checkpoints == b.Checkpoints && a.Runs == b.Runs && a.Log == b.Log &&
		a.Ledger == b.Ledger && a.FramesRebuilt == b.FramesRebuilt && a.SnapshotMismatches == b.SnapshotMismatches
}

// TestRecordVerify: a tampered report counts its failures and warnings by
// kind; an error counts as such, with no duration.
func TestRecordVerify(t *testing.T) {
	tel := newTelemetry(t)
	rep := &chain.Report{
		Failures: []chain.Failure{{Kind: chain.KindHashMismatch}, {Kind: chain.KindHashMismatch}, {Kind: chain.KindSeqGap}},
		Warnings: []chain.Failure{{Kind: chain.KindUnanchoredTail}},
		Duration: 3 * time.Millisecond,
	}
	for _, c := range []struct {
		rep  *chain.Report
		err  error
		want string
	}{
		{rep, nil, "tampered"},
		{nil, errors.New("unreadable"), "error"},
		{&chain.Report{OK: true, Duration: time.Millisecond}, nil, "intact"},
	} {
		if got := tel.obs.RecordVerify(ctx, c.rep, c.err); got != c.want {
			t.Errorf("RecordVerify: %q, want %q", got, c.want)
		}
	}
	m := tel.collect(t)
	for _, c := range []struct {
		name string
		kv   []string
		want int64
	}{
		{otelcontinuum.MetricVerifications, []string{otelcontinuum.AttrVerifyResult, "tampered"}, 1},
		{otelcontinuum.MetricVerifications, []string{otelcontinuum.AttrVerifyResult, "error"}, 1},
		{otelcontinuum.MetricVerifications, []string{otelcontinuum.AttrVerifyResult, "intact"}, 1},
		{otelcontinuum.MetricVerifyFailures, []string{otelcontinuum.AttrVerifyKind, chain.KindHashMismatch.String()}, 2},
		{otelcontinuum.MetricVerifyFailures, []string{otelcontinuum.AttrVerifyKind, chain.KindSeqGap.String()}, 1},
		{otelcontinuum.MetricVerifyWarnings, []string{otelcontinuum.AttrVerifyKind, chain.KindUnanchoredTail.String()}, 1},
	} {
		if got, ok := m.sum(c.name, c.kv...); !ok || got != c.want {
			t.Errorf("%s%v: %d (point found: %v), want %d", c.name, c.kv, got, ok, c.want)
		}
	}
	if n, sum := m.hist(otelcontinuum.MetricVerifyDuration); n != 2 || sum != 0.004 {
		t.Errorf("verify durations: %d summing to %v s, want 2 summing to 0.004", n, sum)
	}
}
