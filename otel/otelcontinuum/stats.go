package otelcontinuum

import (
	"context"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/engine"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// StatsSource is what ObserveStats reads: an *engine.DB.
type StatsSource interface {
	Stats() engine.Stats
}

// ObserveStats registers observable instruments that read db.Stats() once
// per collection: every figure of doc.go's Stats table, those the
// Observer also records under the Observer's names and attributes
// (continuum.atoms, continuum.actions with outcome cached,
// continuum.snapshots, continuum.restart.records). It is for a DB opened
// without the Observer: with one, use Observer.ObserveStats, which leaves
// those out (two instruments of one name on one meter conflict). The
// counters count since db's Open. Unregister the registration before
// closing db.
func ObserveStats(db StatsSource, cfg Config) (metric.Registration, error) {
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	o := &Observer{meter: mp.Meter(ScopeName), attrs: append([]attribute.KeyValue(nil), cfg.Attributes...)}
	return o.observeStats(db, true)
}

// ObserveStats registers, on the Observer's meter, observable instruments
// for the figures of db.Stats() that the Observer does not record (doc.go's
// Stats table, the rows without an Observer name). Unregister the
// registration before closing db.
func (o *Observer) ObserveStats(db StatsSource) (metric.Registration, error) {
	return o.observeStats(db, false)
}

// observeStats registers the Stats instruments, with the ones that
// overlap the Observer's when overlap is set.
func (o *Observer) observeStats(db StatsSource, overlap bool) (metric.Registration, error) {
	m := o.meter
	var errs []error
	var insts []metric.Observable
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		insts = append(insts, c)
		return c
	}
	updown := func(name, unit, desc string) metric.Int64ObservableUpDownCounter {
		c, err := m.Int64ObservableUpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		insts = append(insts, c)
		return c
	}
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		insts = append(insts, g)
		return g
	}
	fgauge := func(name, unit, desc string) metric.Float64ObservableGauge {
		g, err := m.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		insts = append(insts, g)
		return g
	}
	fcounter := func(name, unit, desc string) metric.Float64ObservableCounter {
		c, err := m.Float64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		insts = append(insts, c)
		return c
	}

	// The overlap: the Observer's names, descriptions and attributes.
	var atoms, actions, snapshots, replayed metric.Int64ObservableCounter
	if overlap {
		atoms = counter(MetricAtoms, "{atom}", "Atoms that ended, by outcome: committed (durable) or failed (Atom.Fail).")
		actions = counter(MetricActions, "{action}", "Do and Resolve calls that reached the ledger, by outcome.")
		snapshots = counter(MetricSnapshots, "{snapshot}", "Background snapshots written to the snapshot store.")
		replayed = counter(MetricReplayed, "{record}", "Log records Open replayed (the tail since the last engine checkpoint).")
	}
	calls := counter(MetricActionCalls, "{call}", "Do calls that reached the ledger, whatever their outcome (Stats.Actions).")
	runs := updown(MetricRuns, "{run}", "Runs of the store (Stats.Runs).")
	checkpoints := counter(MetricCheckpoints, "{checkpoint}", "Engine checkpoints (CHECKPOINT) written since Open.")
	openDur := fgauge(MetricOpenDuration, "s", "Wall time of the DB's Open (Stats.Open.Duration).")
	appends := counter(MetricWALAppends, "{append}", "Appends the log accepted (a batch counts once).")
	records := counter(MetricWALRecords, "{record}", "Records the log made durable.")
	payload := counter(MetricWALPayload, "By", "Payload bytes the log made durable.")
	written := counter(MetricWALWritten, "By", "Bytes the log wrote: records framed, padding, seals.")
	writes := counter(MetricWALWrites, "{write}", "Writes of the log's group commits.")
	syncs := counter(MetricWALSyncs, "{sync}", "fdatasyncs of log segments, seals included.")
	syncTime := fcounter(MetricWALSyncTime, "s", "Time spent in those fdatasyncs.")
	rotations := counter(MetricWALRotations, "{rotation}", "Log segments sealed and replaced.")
	segments := updown(MetricWALSegments, "{segment}", "Log segment files.")
	entries := updown(MetricLedgerEntries, "{entry}", "Fingerprints the ledger holds a durable record of.")
	inDoubt := updown(MetricLedgerInDoubt, "{action}", "Actions in doubt now: an intent without certificate that no call is running.")
	rebuilds := counter(MetricFramesRebuilt, "{run}", "Runs whose frame file was missing, damaged or stale and was rebuilt from the log.")
	mismatches := counter(MetricSnapMismatches, "{mismatch}", "Snapshot store values that disagreed with the log.")
	bgErr := gauge(MetricBackgroundError, "{error}", "1 when background work failed (Stats.Background), else 0.")
	snapErr := gauge(MetricSnapStoreError, "{error}", "1 when the snapshot store is out of use (Stats.SnapshotStore), else 0.")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelcontinuum: making Stats instruments: %w", err)
	}

	base := o.with()
	committed := o.with(attribute.String(AttrAtomOutcome, "committed"))
	failed := o.with(attribute.String(AttrAtomOutcome, "failed"))
	cached := o.with(attribute.String(AttrActionOutcome, engine.ActionCached.String()))
	flag := func(err error) int64 {
		if err != nil {
			return 1
		}
		return 0
	}
	reg, err := m.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		st := db.Stats()
		if overlap {
			ob.ObserveInt64(atoms, st.Atoms, committed)
			ob.ObserveInt64(atoms, st.Fails, failed)
			ob.ObserveInt64(actions, st.Deduped, cached)
			ob.ObserveInt64(snapshots, st.Snapshots, base)
			if !st.Open.Created {
				ob.ObserveInt64(replayed, int64(st.Open.Replayed), base)
			}
		}
		ob.ObserveInt64(calls, st.Actions, base)
		ob.ObserveInt64(runs, int64(st.Runs), base)
		ob.ObserveInt64(checkpoints, st.Checkpoints, base)
		ob.ObserveFloat64(openDur, st.Open.Duration.Seconds(), base)
		ob.ObserveInt64(appends, st.Log.Appends, base)
		ob.ObserveInt64(records, st.Log.Records, base)
		ob.ObserveInt64(payload, st.Log.Bytes, base)
		ob.ObserveInt64(written, st.Log.WrittenBytes, base)
		ob.ObserveInt64(writes, st.Log.Writes, base)
		ob.ObserveInt64(syncs, st.Log.Syncs, base)
		ob.ObserveFloat64(syncTime, float64(st.Log.SyncNanos)/1e9, base)
		ob.ObserveInt64(rotations, st.Log.Rotations, base)
		ob.ObserveInt64(segments, int64(st.Log.Segments), base)
		ob.ObserveInt64(entries, int64(st.Ledger.Entries), base)
		ob.ObserveInt64(inDoubt, int64(st.Ledger.InDoubt), base)
		ob.ObserveInt64(rebuilds, st.FramesRebuilt, base)
		ob.ObserveInt64(mismatches, st.SnapshotMismatches, base)
		ob.ObserveInt64(bgErr, flag(st.Background), base)
		ob.ObserveInt64(snapErr, flag(st.SnapshotStore), base)
		return nil
	}, insts...)
	if err != nil {
		return nil, fmt.Errorf("otelcontinuum: registering the Stats callback: %w", err)
	}
	return reg, nil
}
