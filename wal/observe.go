package wal

import "time"

// What the writer reports about each group commit to Options.OnGroupCommit:
// the figures a metrics exporter turns into batch-size and fsync-time
// histograms. Stats holds the same figures summed since Open.

// GroupCommit describes one group commit: the appends the owner goroutine
// took from the queue and made durable together (a group a segment
// rotation cut in two is reported as two, one per segment written).
type GroupCommit struct {
	Appends int   // appends completed (an AppendBatch counts once)
	Records int   // records they held
	Bytes   int64 // payload bytes of those records
	// Syncs is the number of fdatasyncs the group's writes took (0 with
	// NoSync; more than 1 for a group larger than the log lets stand
	// written but not durable), and SyncDuration their total time: what
	// every append of the group waited for once its bytes were written.
	// The fdatasync that seals a full segment is not counted here (Stats
	// counts it).
	Syncs        int
	SyncDuration time.Duration
}

// syncMark is what the sync counters were before a group's first write.
type syncMark struct{ syncs, nanos int64 }

// markSyncs returns the sync counters before a flush, when a callback is
// set (owner only: only the owner goroutine syncs the active segment, so
// the counters' growth until reportGroup is this group's).
func (l *Log) markSyncs() syncMark {
	if l.onGroupCommit == nil {
		return syncMark{}
	}
	return syncMark{l.stats.syncs.Load(), l.stats.syncNanos.Load()}
}

// reportGroup calls Options.OnGroupCommit for a flush of appends appends,
// recs records and bytes payload bytes that is durable.
func (l *Log) reportGroup(m syncMark, appends int, recs, bytes int64) {
	if l.onGroupCommit == nil {
		return
	}
	l.onGroupCommit(GroupCommit{
		Appends: appends, Records: int(recs), Bytes: bytes,
		Syncs:        int(l.stats.syncs.Load() - m.syncs),
		SyncDuration: time.Duration(l.stats.syncNanos.Load() - m.nanos),
	})
}
