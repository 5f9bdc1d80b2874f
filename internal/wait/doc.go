// Package wait is the index of the waits of a store's runs (engine/doc.go,
// "Waits and timers"; docs/DESIGN.md, "Waits and timers"): which runs wait
// for which event or until when, the events no wait took yet, and which
// runs are ready (their wait ended by an event or a timeout, and no atom
// of theirs took it yet). The log holds it all, in three record kinds
// (record/wait.go: wait, event, wake); the index is derived, built once
// from the log (Load) and kept up to date by the engine as it appends
// (Apply), so that the host learns which runs are ready, and which waits
// are due, at the cost of those runs only: a heap of the open waits by
// deadline and a list of the ready ones, in the order they ended.
//
// It knows nothing of runs' locks, frames or the log's files: package
// engine conducts it (engine/waits.go) and reads the log for it (Source).
//
// # The interface
//
// What the engine implements for the index (its adapter over the DB):
//
//	type Source interface {
//		// Scan calls fn with each wait, event and wake record of the log,
//		// in the log's order, and payload, an event's plaintext payload
//		// (opened, in an encrypted store); it stops at fn's first error.
//		Scan(fn func(rec *record.Record, payload []byte) error) error
//	}
//
// What the engine calls, whole. Lock order: the run's lock (or its write
// mark), then the index's own mutex; Source.Scan is called with the
// index's mutex held and takes none of the engine's locks but the log's.
//
//	New(clock) *Index                       // clock: Options.Clock
//	(*Index).Load(src) error                // once, before any other use; sticky error
//	(*Index).Now() int64                    // max(clock, the latest time the log's wait records hold)
//	(*Index).Apply(rec, payload)            // a wait, event or wake record, once durable, in the log's order per run
//	(*Index).Sent(run, sender) (digest, ok) // what a sender sent the run before (SendEvent's idempotence)
//	(*Index).Current(run, committed)        // the run's wait that no atom took
//	(*Index).Due(now, max) []Wait           // open waits past their deadline, earliest first
//	(*Index).Ready(max) []Wait              // ended waits not taken, in the order they ended
//	(*Index).Taken(run, seq)                // an atom at seq committed: the wait before it is taken
//	(*Index).Gone(run)                      // the run ended or was deleted
//	(*Index).Changed() <-chan struct{}      // closed when a wait ends next
//	(*Index).NextDeadline(), Pending(run), Stats()
//
// # Guarantees
//
//   - Apply is a function of the records and their order per run: the
//     index the engine keeps as it appends and the one Load builds from
//     the log after a restart are the same (an event is delivered to the
//     same wait, a timeout ends the same wait).
//   - Apply is idempotent: a wait at or before the run's last wait, an
//     event of a sender already seen, a wake of a wait not open change
//     nothing.
//   - An event matches the run's open wait of its name when it is applied,
//     or is kept, in log order per name, for the next wait of that name;
//     each event ends at most one wait, each wait takes at most one event
//     or one wake.
//   - Due and Ready cost the due and ready waits (and a heap's logarithm),
//     not the store's runs.
//
// # Caveats
//
// The index is in memory whole: each waiting run costs a Wait (about 150
// bytes and its name), each event no wait took its payload, and each
// sender id its digest while the run lives. Load reads the whole log
// (skipping, undecoded, the records of other kinds) on the first use of
// waits after Open; an engine checkpoint of the index, so that a restart
// reads the log's tail only, is not there yet.
package wait

import (
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Source is what the index reads of the store (see the package doc).
type Source interface {
	WaitsFile(gen uint64) (name string, b []byte, err error)
	Scan(from wal.Pos, fn func(rec *record.Record, payload []byte) error) error
	Rebuilding(why string)
}
