// Package otelcontinuum exports a CONTINUUM store's metrics and traces
// through OpenTelemetry. It lives in its own module,
// github.com/continuumdb/continuum/otel, so that a program linking the
// engine links OpenTelemetry only if it imports this package: the engine
// reports its events through engine.Options.Observer, an interface of its
// own with no dependency, and this package implements it.
//
// # Usage
//
//	obs, err := otelcontinuum.NewObserver(otelcontinuum.Config{
//		MeterProvider:  mp, // nil: the global providers
//		TracerProvider: tp,
//	})
//	db, err := engine.Open(dir, &engine.Options{Observer: obs})
//	reg, err := obs.ObserveStats(db) // the figures of db.Stats() no event carries
//	defer reg.Unregister()
//
// Example_prometheus serves them to Prometheus. A DB opened without the
// Observer can still be watched: ObserveStats(db, cfg) maps db.Stats() to
// the same names (the table below).
//
// # Metrics
//
// The Observer records, as the engine reports them (instrument, unit,
// meaning):
//
//	continuum.atoms                  counter {atom}      atoms that ended, by continuum.atom.outcome:
//	                                                     committed (durable), failed (Atom.Fail)
//	continuum.actions                counter {action}    Do and Resolve calls that reached the ledger, by
//	                                                     continuum.action.outcome: executed (exec ran, its
//	                                                     result certified), cached (a certificate answered,
//	                                                     exec not called), in_doubt (ledger.ErrInDoubt),
//	                                                     failed (exec's error or the store's), resolved,
//	                                                     resolved_failed (the Resolve family)
//	continuum.atom.commit.duration   histogram s         wall time of Commit: encode, append, wait for the
//	                                                     group commit's fsync, apply
//	continuum.atom.size              histogram By        a committed atom's log record as stored (compressed)
//	continuum.wal.group_commit.size  histogram {append}  appends one group commit made durable together
//	continuum.wal.sync.duration      histogram s         a group commit's fdatasync time: what each of its
//	                                                     appends waited for once written (none with NoSync)
//	continuum.restart.duration       histogram s         wall time of Open of an existing store
//	continuum.restart.records        counter {record}    log records Open replayed (the tail since the last
//	                                                     engine checkpoint)
//	continuum.snapshots              counter {snapshot}  background snapshots written
//	continuum.snapshot.lag           histogram {atom}    atoms of the run that no snapshot covered just
//	                                                     before a new one landed (its head minus the seq of
//	                                                     its previous snapshot)
//	continuum.verifications          counter             verifications (Observer.Verify, RecordVerify), by
//	                                 {verification}      continuum.verify.result: intact, tampered, error
//	continuum.verify.duration        histogram s         wall time of a verification that made a report
//	continuum.verify.failures        counter {failure}   failures reported, by continuum.verify.failure.kind
//	continuum.verify.warnings        counter {warning}   warnings reported, by continuum.verify.failure.kind
//	continuum.wait.records           counter {record}    records of runs' waits made durable (the Observer
//	                                                     is an engine.WaitObserver), by continuum.wait.record:
//	                                                     wait (a run waits), event (an event sent), wake (a
//	                                                     timeout or a cancel)
//	continuum.stream.chunks          counter {chunk}     chunks atoms appended to their runs' streams (the
//	                                                     Observer's atoms are engine.StreamObservers):
//	                                                     counted as Atom.Append enqueues them, before the
//	                                                     group commit that makes them durable
//	continuum.stream.payload         counter By          the data bytes of those chunks (without framing
//	                                                     or seal)
//
// Durations are in seconds with buckets from 50 µs to 10 s; sizes in
// powers of two from 64 B to 1 MiB. Names follow OpenTelemetry's naming
// conventions: the system's name as the namespace, counters of things
// pluralized and without _total, up-down counters as .count, units in the
// unit, not the name. Prometheus, through its exporter, shows
// continuum.atoms as continuum_atoms_total and continuum.atom.commit.duration
// as continuum_atom_commit_duration_seconds.
//
// # Stats mapped to the same names
//
// ObserveStats registers observable instruments that read db.Stats() once
// per collection, counting since db's Open. Where a figure of Stats is one
// the Observer records, it has the Observer's name and attributes:
//
//	Stats field              metric                                              Observer
//	Atoms                    continuum.atoms{continuum.atom.outcome=committed}   same
//	Fails                    continuum.atoms{continuum.atom.outcome=failed}      same
//	Deduped                  continuum.actions{continuum.action.outcome=cached}  same
//	Snapshots                continuum.snapshots                                 same
//	Open.Replayed            continuum.restart.records (an existing store only)  same
//	Actions                  continuum.action.calls          counter {call}: Do calls that reached the ledger,
//	                                                          any outcome (the Observer's continuum.actions
//	                                                          without resolved and resolved_failed, summed)
//	Runs                     continuum.run.count             updowncounter {run}
//	Checkpoints              continuum.checkpoints           counter {checkpoint}: engine checkpoints
//	Open.Duration            continuum.open.duration         gauge s: the DB's Open (a creation too)
//	Log.Appends              continuum.wal.appends           counter {append}
//	Log.Records              continuum.wal.records           counter {record}
//	Log.Bytes                continuum.wal.payload           counter By: payload made durable
//	Log.WrittenBytes         continuum.wal.written           counter By: framing, padding and seals too
//	Log.Writes               continuum.wal.writes            counter {write}
//	Log.Syncs                continuum.wal.syncs             counter {sync}: fdatasyncs, seals included
//	Log.SyncNanos            continuum.wal.sync.time         counter s
//	Log.Rotations            continuum.wal.rotations         counter {rotation}
//	Log.Segments             continuum.wal.segment.count     updowncounter {segment}
//	Ledger.Entries           continuum.ledger.entry.count    updowncounter {entry}
//	Ledger.InDoubt           continuum.ledger.in_doubt.count updowncounter {action}: in doubt now
//	FramesRebuilt            continuum.frame.rebuilds        counter {run}
//	SnapshotMismatches       continuum.snapshot.mismatches   counter {mismatch}
//	Background               continuum.background.error      gauge {error}: 1 when set, else 0
//	SnapshotStore            continuum.snapshot.store.error  gauge {error}: 1 when set, else 0
//
// The histograms have no Stats counterpart (Stats holds sums, not
// distributions), except that the count of continuum.wal.group_commit.size
// and its sum match Log.Writes (at most) and Log.Appends. Two instruments
// of one name on one meter conflict: with the Observer installed, call
// Observer.ObserveStats, which registers the rows without "same" only; the
// function ObserveStats registers them all.
//
// Config.Attributes are added to every measurement, the Stats ones too:
// give each store its own when a process has several open.
//
// # Traces
//
// Each atom is a span, continuum.atom, started when Begin returns (a
// child of the span in Begin's context, if any) and ended when Commit or
// Fail returns successfully; a failed atom's span has an error status.
// Each Do and Resolve call of the atom is a child span of it,
// "continuum.do TOOL" or "continuum.resolve TOOL", from the call's
// arrival at the ledger to its return, with the tool, the idempotency key,
// the call's index, the action's fingerprint and the outcome; a call that
// returns an error (in doubt included) has an error status. Verify is a
// span of its own, continuum.verify.
//
// Context propagation: the atom's span is the parent of its actions'
// spans whatever context Do is called with, because an action belongs to
// its atom; when Do's context carries a span of its own (the agent's), the
// action's span links to it. Do calls exec with its context carrying the
// action's span, so an instrumented client that exec uses (HTTP, gRPC, a
// model API) traces under the action, and (with a propagator set) the
// request carries that trace context to the downstream beside the
// idempotency key.
//
// # Caveats
//
//   - An atom that neither commits nor fails (the process stops, the
//     agent abandons it, the DB closes first) leaves its span unended,
//     and an unended span is never exported. After a restart the atom's
//     seq begins again as a new span with continuum.atom.interrupted set;
//     its first span, and the trace of the process that died, are lost
//     with the process.
//   - A Commit that returns an error leaves the atom running: its span
//     goes on until the atom commits or fails.
//   - The Observer runs synchronously on the engine's paths, its
//     GroupCommitted on the log's writer goroutine: a slow exporter
//     must not sit behind the meter's synchronous instruments (the SDK's
//     are not; exporting happens on the reader's schedule).
//   - Counters count from the Observer's creation; the Stats mapping's from
//     the DB's Open. A process restart resets both, as Prometheus expects
//     of a counter.
//   - The span attributes hold the tool and the idempotency key of each
//     action, never its args or result (they may hold secrets; the ledger
//     redacts args by Action.Redact before it stores them, the span does
//     not see them at all).
package otelcontinuum
