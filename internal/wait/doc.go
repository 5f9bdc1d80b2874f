// Package wait is the index of the waits of a store's runs (engine/doc.go,
// "Waits and timers"; docs/DESIGN.md, "Waits and timers"): which runs wait
// for which event or until when, the events no wait took yet, and which
// runs are ready (their wait ended by an event or a timeout, and no atom
// of theirs took it yet). The log holds it all, in three record kinds
// (record/wait.go: wait, event, wake); the index is derived: the engine
// checkpoint saves it as WAITS (layout/waits.go, Capture), the first use
// after Open loads it (Load: WAITS and the log's records after its
// replay position, or the whole log), and the engine keeps it up to date
// as it appends (Apply), so that the host learns which runs are ready,
// and which waits are due, at the cost of those runs only.
//
// The index is a table and an overlay (file.go), as an sstable under a
// memtable. The table is WAITS version 2 read in place (mapped read only
// when the Source can, Mapper: a read that faults, the file cut short
// under the mapping, is damage, fault.go; in an encrypted store, sealed per block,
// read from the file block by block, TableOpener, each block opened on
// its first read and kept among the last 16; else its bytes held once): its deadline
// section (the open waits with a deadline, by deadline then run), its
// runs (sorted by id, an offset each into their entries) and its ready
// section (in the order the waits ended). The overlay is what changed
// since: the entry of each run a record, Taken or Gone touched (copied
// from the table's on first touch; the table's is then dead, one bit per
// table run says so), a heap of its open waits by deadline, a list of
// its ended ones not taken. Every query asks the overlay, then the
// table (a binary search by run; Due walks the deadline section from its
// start merged with the heap; Ready the ready section, then the list).
// Capture merges both into the next table, which replaces the old one.
//
// It knows nothing of runs' locks or frames: Waits (waits.go) conducts
// it for the engine's API (engine/waits.go, a few lines a method): the
// load on first use, the records of waits written under their run's
// write mark, the due timeouts fired in batches, the list of ready runs,
// the wake-ups of ReadyChanged, the check of WAITS against the log. It
// reaches the engine through Core and Run (engine/waitcore.go's waitCore
// and waitRun), which hand it the store's files, keys and decoder
// (LogSource, the Source over them; WriteFile writes WAITS at each
// checkpoint, sealed per block when the store seals; RecordSource is one
// over records in memory, for verify and the tests), the runs' write
// marks and the log's appends.
//
// # The interface
//
// What the engine hands the index (LogSource implements Source over the
// store's files):
//
//	type Source interface {
//		// WaitsFile returns WAITS's name and bytes, opened when the store
//		// seals it, as written by the checkpoint of generation gen. A
//		// missing file is an error matching fs.ErrNotExist.
//		WaitsFile(gen uint64) (name string, b []byte, err error)
//		// Scan calls fn with each wait, event and wake record of the log
//		// from position from, in the log's order, with its Pos, and
//		// payload, an event's plaintext payload (opened, in an encrypted
//		// store; nil if its run was erased); it stops at fn's first error.
//		Scan(from wal.Pos, fn func(rec *record.Record, payload []byte) error) error
//		// Rebuilding is told why WAITS is not used, before the index is
//		// built from the whole log instead.
//		Rebuilding(why string)
//	}
//
// A Source may also map WAITS (Mapper: MapWaitsFile, the bytes and how
// to unmap them), so that the table is no part of the heap, or open it
// as a table itself (TableOpener: OpenWaitsTable, an encrypted store's
// WAITS sealed per block, read with pread; ErrNotTable for a file of
// another form, read through WaitsFile or MapWaitsFile).
//
// What Waits needs of the engine, bound once (Waits.Bind, with the clock
// and the engine's sentinels, Errors):
//
//	type Core interface {
//		// Open returns the store's error once it is closed, else nil.
//		Open() error
//		// Run returns run id (nil: the store has none), and whether it
//		// was deleted; Waits returns Errors.NoRun or Errors.Deleted then.
//		Run(id string) (r Run, deleted bool, err error)
//		// Append writes the records durably, in one batch, and returns
//		// their positions; the checkpoint's replay position stays below
//		// them until done is called, once the index applied them.
//		Append(ctx context.Context, raws [][]byte) (poss []wal.Pos, done func(), err error)
//		// Link is the chain's link of a record (chain.Hasher.Link).
//		Link(run string, seq uint64, head chain.Hash, payload []byte) chain.Hash
//		// Source is the store's files, keys and decoder: the index's
//		// load, WAITS's path and sealer, an event's sealing, the log's
//		// reads of the check.
//		Source() LogSource
//		// Recorded is told of each record written and applied (the
//		// observer); the index is loaded.
//		Recorded(k record.Kind, run string, seq uint64)
//		// Checking reports whether the check of WAITS against the log
//		// is set up and has not ended; CheckLog runs it, once (it calls
//		// Waits.CheckFile), and returns its error.
//		Checking() bool
//		CheckLog() error
//	}
//
//	type Run interface {
//		ID() string
//		// Hold waits until no atom of the run writes (err: ctx's), then
//		// takes the run's write mark and returns the seq and head of its
//		// newest atom in the log (a branch's, if newer); refused, with
//		// nothing held, says why it takes no record: it ended, is ending
//		// or is broken, or (declare) an atom or a branch of it runs.
//		Hold(ctx context.Context, declare bool) (seq uint64, head chain.Hash, refused, err error)
//		// Release gives back what Hold took.
//		Release()
//		// Last returns the run's last seq and whether it ended.
//		Last() (seq uint64, ended bool)
//	}
//
// What the engine calls of Waits: Bind, Index, Loaded, Use, Load, Close,
// Gone, Taken, WriteFile, CheckFile, Trusted, and one method per API
// call: Declare (Run.Wait, Sleep), Current, Cancel, Ended (WaitEnded),
// Outcome (Atom.WaitOutcome), Send (SendEvent), Ready (it fires the due
// timeouts first, in batches of 1,024 wake records, one fsync each),
// ReadyChanged, NextDeadline, Stats. And of the index, whole (Waits
// calls most of it). Its Run's Hold reads the run's state into a Holding
// and takes its refusal from Errors.Refused (the rules and their
// errors are this package's); WriteFile's Row of CHECKPOINT's rows is
// CheckpointRows. Lock order: the run's lock (or its write mark),
// then the index's own mutex; the Source's methods and Capture's
// row are called with the index's mutex held and take none of the
// engine's locks but the log's.
//
//	New(clock) *Index                       // clock: Options.Clock
//	(*Index).From(gen, replay)              // at Open: CHECKPOINT's generation (0: none) and replay position
//	(*Index).FromCheckpoint(cp, replay)     // From of CHECKPOINT cp (nil: none, the whole log)
//	(*Index).Load(src) error                // once, before any other use but Gone; sticky error
//	(*Index).Rebuilt() string               // why WAITS was not used ("": it was, or there was none)
//	(*Index).Capture(gen, replay, row)      // the engine checkpoint's WAITS (bytes), after every run's row; it becomes the table
//	(*Index).Installed(gen)                 // WAITS of gen is durable: read it from its file (mapped, or block by block) from now on
//	(*Index).WriteFile(fs, path, sealer, gen, replay, row, noSync, install) // Capture, sealed per block if sealer, written, Installed
//	(*Index).Err() error                    // sticky: the load's, or a rebuild's after damage met late
//	(*Index).Close()                        // at the DB's Close: the table let go of (unmapped)
//	(*Index).Now() int64                    // max(clock, the latest time the log's wait records hold)
//	(*Index).Apply(rec, payload)            // a wait, event or wake record, once durable, in the log's order per run
//	(*Index).Sent(run, sender) (digest, ok) // what a sender sent the run before (SendEvent's idempotence)
//	(*Index).Current(run, committed)        // the run's wait that no atom took
//	(*Index).Due(now, max) []Wait           // open waits past their deadline, earliest first
//	(*Index).Ready(max) []Wait              // ended waits not taken, in the order they ended
//	(*Index).Taken(run, seq)                // an atom at seq committed: the wait before it is taken
//	(*Index).Gone(run)                      // the run ended or was deleted (before Load: done after it)
//	(*Index).Changed() <-chan struct{}      // closed when a wait ends next
//	(*Index).NextDeadline(), Pending(run), Stats()
//	NewRecord(link, kind, run, seq, head, fields) *record.Record // a wait, event or wake record to write
//	// what to write, under the run's write mark (its newest seq and head, the clock's now):
//	(*Index).DeclareRecords(link, run, seq, head, now, fields) (Wait, []*record.Record, error) // Run.Wait, Sleep; ErrOtherWait
//	(*Index).WakeRecords(link, run, seq, head, now, reason, ifDue) (Wait, []*record.Record, error) // CancelWait, a timeout; ErrNoWait
//	(*Index).EventRecords(link, run, seq, head, now, fields, digest, seal) (recs, duplicate, delivered, error) // SendEvent; ErrMismatch
//
// # Guarantees
//
//   - Apply is a function of the records and their order per run: the
//     index the engine keeps as it appends and the one Load builds after
//     a restart, from WAITS and the tail or from the whole log, are the
//     same (an event is delivered to the same wait, a timeout ends the
//     same wait), but for what Capture dropped (waits an atom took, runs
//     that ended) and the order in the ready list of waits of different
//     runs that ended at once.
//   - Apply is idempotent: a wait at or before the run's last wait, an
//     event of a sender already seen, a wake of a wait not open change
//     nothing.
//   - Load over WAITS applies each run's records after the run's mark
//     only: WAITS, captured at any moment after its replay position,
//     reflects a prefix of each run's records (the engine applies them in
//     the log's order per run, and untracks a write, so that a checkpoint
//     may take a replay position past it, only once it is applied), and
//     the mark is the position of the prefix's last record. A run WAITS
//     does not hold had nothing the tail's records before its mark could
//     change but waits an atom took (Capture dropped them; applied again,
//     they are stale, as Current, Ready and the engine's checks see).
//   - WAITS is used only if it names the checkpoint From named and its
//     header and checksums are sound; each 4 KiB block is checked when
//     first read, each entry when decoded (bounds, each event's digest
//     its sender id's, no time past the file's latest, its sections
//     agreeing with it). Damage met at the load, or by any later query,
//     is never answered: the index is rebuilt from the whole log there
//     and then (Rebuilt says why) and the query answered from it.
//   - The table and the overlay answer as one index that applied every
//     record, Taken and Gone (TestTableOverlay).
//   - An event matches the run's open wait of its name when it is applied,
//     or is kept, in log order per name, for the next wait of that name;
//     each event ends at most one wait, each wait takes at most one event
//     or one wake.
//   - Load costs WAITS's header, its checksums and the log's tail; Due
//     and Ready cost the due and ready waits (each decoded once, a
//     heap's logarithm, and the table's waits the overlay ended since it
//     was written, passed once), not the store's runs.
//
// # Caveats
//
// The overlay is in memory whole: each run it holds costs its entry (112
// bytes and a map slot; see docs/DESIGN.md, "The index and its cost"),
// each event no wait took its payload, and each sender id its digest,
// until the next Capture writes them into the table. A waiting run only
// in the table costs one bit of heap; the table is the page cache's when
// mapped, the heap's when read; an encrypted store's, sealed per block,
// costs the heap its cache of 16 opened 4 KiB blocks, whatever the
// runs, and each read that misses the cache a block's opening (a WAITS
// sealed whole before 2026-12 is opened whole into one buffer, until the
// next checkpoint writes it per block). A lookup by run (Current,
// Sent, Taken on each atom's commit) is a binary search over the table.
// Capture, at each engine checkpoint, reads the whole table. A rebuild
// after damage met late runs under the index's mutex and reads the
// whole log; the runs Gone since the table are dropped again, those
// that ended before it are left to the engine's checks, as after any
// rebuild. A forged but self-consistent entry is answered until the
// engine's check a moment after Open compares the table with the log
// (CheckTable; Distrust then rebuilds the index); until then the engine
// writes no record of waits on the table's word.
package wait

import (
	"context"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Source is what the index reads of the store (see the package doc).
type Source interface {
	WaitsFile(gen uint64) (name string, b []byte, err error)
	Scan(from wal.Pos, fn func(rec *record.Record, payload []byte) error) error
	Rebuilding(why string)
}

// Core is what Waits needs of the engine beside its runs (see the
// package doc).
type Core interface {
	Open() error
	Run(id string) (r Run, deleted bool, err error)
	Append(ctx context.Context, raws [][]byte) (poss []wal.Pos, done func(), err error)
	Link(run string, seq uint64, head chain.Hash, payload []byte) chain.Hash
	Source() LogSource
	Recorded(k record.Kind, run string, seq uint64)
	Checking() bool
	CheckLog() error
}

// Run is one of the store's runs as Waits writes its records (see the
// package doc).
type Run interface {
	ID() string
	Hold(ctx context.Context, declare bool) (seq uint64, head chain.Hash, refused, err error)
	Release()
	Last() (seq uint64, ended bool)
}
