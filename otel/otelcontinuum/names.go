package otelcontinuum

// The names this package exports under, each defined once. doc.go lists
// every metric with its unit and meaning; a rename is a breaking change for
// every dashboard built on it.

// ScopeName is the instrumentation scope of every meter and tracer this
// package makes.
const ScopeName = "github.com/continuumdb/continuum/otel/otelcontinuum"

// Metrics the Observer records as the engine reports events (and some of
// which ObserveStats reads from DB.Stats under the same name).
const (
	MetricAtoms          = "continuum.atoms"                 // counter {atom}, by AttrAtomOutcome
	MetricActions        = "continuum.actions"               // counter {action}, by AttrActionOutcome
	MetricCommitDuration = "continuum.atom.commit.duration"  // histogram s
	MetricAtomSize       = "continuum.atom.size"             // histogram By
	MetricGroupSize      = "continuum.wal.group_commit.size" // histogram {append}
	MetricSyncDuration   = "continuum.wal.sync.duration"     // histogram s
	MetricRestartTime    = "continuum.restart.duration"      // histogram s
	MetricReplayed       = "continuum.restart.records"       // counter {record}
	MetricSnapshots      = "continuum.snapshots"             // counter {snapshot}
	MetricSnapshotLag    = "continuum.snapshot.lag"          // histogram {atom}
	MetricVerifications  = "continuum.verifications"         // counter {verification}, by AttrVerifyResult
	MetricVerifyDuration = "continuum.verify.duration"       // histogram s
	MetricVerifyFailures = "continuum.verify.failures"       // counter {failure}, by AttrVerifyKind
	MetricVerifyWarnings = "continuum.verify.warnings"       // counter {warning}, by AttrVerifyKind
	MetricWaitRecords    = "continuum.wait.records"          // counter {record}, by AttrWaitRecord
	MetricStreamChunks   = "continuum.stream.chunks"         // counter {chunk}
	MetricStreamPayload  = "continuum.stream.payload"        // counter By
)

// Metrics only ObserveStats reports: figures of DB.Stats that no event
// carries.
const (
	MetricActionCalls     = "continuum.action.calls"          // counter {call}
	MetricRuns            = "continuum.run.count"             // updowncounter {run}
	MetricCheckpoints     = "continuum.checkpoints"           // counter {checkpoint}
	MetricOpenDuration    = "continuum.open.duration"         // gauge s
	MetricWALAppends      = "continuum.wal.appends"           // counter {append}
	MetricWALRecords      = "continuum.wal.records"           // counter {record}
	MetricWALPayload      = "continuum.wal.payload"           // counter By
	MetricWALWritten      = "continuum.wal.written"           // counter By
	MetricWALWrites       = "continuum.wal.writes"            // counter {write}
	MetricWALSyncs        = "continuum.wal.syncs"             // counter {sync}
	MetricWALSyncTime     = "continuum.wal.sync.time"         // counter s
	MetricWALRotations    = "continuum.wal.rotations"         // counter {rotation}
	MetricWALSegments     = "continuum.wal.segment.count"     // updowncounter {segment}
	MetricLedgerEntries   = "continuum.ledger.entry.count"    // updowncounter {entry}
	MetricLedgerInDoubt   = "continuum.ledger.in_doubt.count" // updowncounter {action}
	MetricFramesRebuilt   = "continuum.frame.rebuilds"        // counter {run}
	MetricSnapMismatches  = "continuum.snapshot.mismatches"   // counter {mismatch}
	MetricBackgroundError = "continuum.background.error"      // gauge {error}, 0 or 1
	MetricSnapStoreError  = "continuum.snapshot.store.error"  // gauge {error}, 0 or 1
)

// Attribute keys.
const (
	AttrAtomOutcome   = "continuum.atom.outcome"        // committed | failed
	AttrActionOutcome = "continuum.action.outcome"      // engine.ActionOutcome's String
	AttrVerifyResult  = "continuum.verify.result"       // intact | tampered | error
	AttrVerifyKind    = "continuum.verify.failure.kind" // chain.Kind's String
	AttrWaitRecord    = "continuum.wait.record"         // wait | event | wake (engine.WaitObserver)
	AttrRun           = "continuum.run.id"              // spans
	AttrSeq           = "continuum.atom.seq"            // spans
	AttrInterrupted   = "continuum.atom.interrupted"    // spans
	AttrAtomBytes     = "continuum.atom.bytes"          // spans: the record's bytes
	AttrAtomActions   = "continuum.atom.actions"        // spans: actions the record covers
	AttrFailReason    = "continuum.atom.fail_reason"    // spans
	AttrTool          = "continuum.action.tool"         // spans
	AttrKey           = "continuum.action.key"          // spans: the idempotency key
	AttrIndex         = "continuum.action.index"        // spans
	AttrFingerprint   = "continuum.action.fingerprint"  // spans: hex
	AttrIdempotent    = "continuum.action.idempotent"   // spans
	AttrStoreID       = "continuum.store.id"            // verify span
	AttrVerifyRecords = "continuum.verify.records"      // verify span: log records read
	// AttrVerifyFailureCount is on the verify span: failures reported.
	AttrVerifyFailureCount = "continuum.verify.failure_count"
)

// Span names.
const (
	SpanAtom    = "continuum.atom"
	SpanDo      = "continuum.do"      // followed by " " and the tool
	SpanResolve = "continuum.resolve" // followed by " " and the tool
	SpanVerify  = "continuum.verify"
)
