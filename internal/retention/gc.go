package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// Health is what the engine reports of its state, from which a
// collection, a deletion and an erasure decide whether they may start.
type Health interface {
	// LogFailed returns the log's first failure (final: the store writes
	// nothing more until it is reopened), or nil.
	LogFailed() error
	// WaitLedger returns once the ledger is loaded, or why it failed to.
	WaitLedger(ctx context.Context) error
	// CheckRegistry returns nil once the deleted runs before CHECKPOINT's
	// replay position are known, or why they cannot be (CHECKPOINT's runs
	// disagree with the log, or it could not be read).
	CheckRegistry() error
	// StartDirSyncs starts the fsyncs of the store's directories, which
	// a record waits for before it is durable.
	StartDirSyncs()
}

// Core is what a collection needs of the engine: the interface package
// engine implements over its DB (the adapter), described whole in the
// package's comment. A collection starts (before GC's lock) only if the
// log has not failed, the ledger is loaded and the deleted runs are known
// (Health).
type Core interface {
	Health
	// Checkpoint writes an engine checkpoint (CHECKPOINT and the ledger
	// table, durable) and returns its replay position. Called on the
	// goroutine that owns the engine's checkpoints.
	Checkpoint() (wal.Pos, error)
	// StoreHead writes a store head of every live run and waits until it
	// is durable, if any live run has a chain checkpoint; it reports
	// whether it wrote one.
	StoreHead() (bool, error)
	// Deleted returns the runs whose delete (or erase) record is
	// durable; the caller owns the map.
	Deleted() map[string]bool
	// DropDerived removes the derived files of the runs (frame files,
	// snapshots); a failure to remove one that the store works without is
	// the engine's to log.
	DropDerived(ctx context.Context, runs map[string]bool) error
	// Forget makes the ledger forget fps in memory (ledger.Ledger.Forget)
	// and returns how many it knew; the next Checkpoint writes the table
	// without them.
	Forget(fps []ledger.Fingerprint) int
	// Closed returns the engine's ErrClosed once the DB is closed, else
	// nil.
	Closed() error
}

// Env is what GC reads the log and writes RETENTION with, set once by
// Start.
type Env struct {
	Log         *wal.Log
	File        func(seg uint64) string // a segment's file name, for errors
	Decoder     func() *record.Decoder  // a new decoder of every record kind
	FS          vfs.FS
	Dir         string // the store's directory, which holds RETENTION
	StoreID     [16]byte
	NoSync      bool
	CompactDead float64 // Options.CompactDead (< 0: only wholly dead segments)
	Logger      *slog.Logger

	// What DropDerived and LedgerRecords use: a new decoder that leaves
	// the ledger's records sealed; the frames directory and a run's frame
	// file in it; the snapshot store (engine's snapindex.Keeper); the
	// flag that keeps a store that failed to remove one from its
	// clean-close mark.
	Sealed    func() *record.Decoder
	Frames    string
	FrameFile func(run string) string
	Snaps     Snapshots
	Unclean   *atomic.Bool
}

// Snapshots is the store's snapshot store over its lifecycle.
type Snapshots interface {
	// Exists reports whether the store has a snapshot store (else none
	// is created for a deletion).
	Exists() bool
	// Usable returns the snapshot store, opened, or nil or an error if it
	// cannot be used.
	Usable(ctx context.Context) (*snapshot.Store, error)
}

// Stats is what one garbage collection did (engine.GCStats, field for
// field).
type Stats struct {
	Segments       int
	Bytes          int64
	Floor          uint64
	Compacted      int
	Emptied        int
	CompactedBytes int64
	Scanned        int64
	Forgotten      int
	Duration       time.Duration
}

// GC is the retention state of one DB: the lock that orders deletions
// and collections, the queue of collections for the goroutine that owns
// the engine's checkpoints, and Open's orphan records. The zero GC is
// ready for Lock and the orphan methods; Start readies the queue.
type GC struct {
	// mu orders deletions, erasures and collections among themselves: a
	// run chosen for deletion stays chosen until its record is written,
	// and a collection sees a fixed set of deleted runs.
	mu sync.Mutex
	// jobs carries GC's requests to the engine's background goroutine;
	// env is set by Start, before that goroutine starts, and only read.
	jobs chan *Job
	env  Env
	// orphans holds, during Open's replay of a log that garbage
	// collection trimmed, the damage of the first record of each run
	// whose creation record was reclaimed; only Open's goroutine uses it.
	orphans map[string]error
}

// Start sets the collection's environment and readies its queue; call it
// once, before the goroutine that reads Jobs starts.
func (g *GC) Start(env Env) {
	g.env = env
	g.jobs = make(chan *Job)
}

// Lock takes the lock that orders deletions, erasures and collections.
func (g *GC) Lock() { g.mu.Lock() }

// Unlock releases it.
func (g *GC) Unlock() { g.mu.Unlock() }

// Job is a collection queued for the goroutine that owns the engine's
// checkpoints.
type Job struct {
	ctx  context.Context
	done chan result
}

type result struct {
	stats Stats
	err   error
}

// Jobs is the queue the engine's background goroutine serves (Job.Run).
func (g *GC) Jobs() <-chan *Job { return g.jobs }

// Request queues a collection and waits for its result. stop is closed
// when the engine closes (then closedErr); a cancelled ctx returns at
// once and the collection goes on to a consistent end, its result
// dropped.
func (g *GC) Request(ctx context.Context, stop <-chan struct{}, closedErr error) (Stats, error) {
	job := &Job{ctx: ctx, done: make(chan result, 1)}
	select {
	case g.jobs <- job:
	case <-stop:
		return Stats{}, closedErr
	case <-ctx.Done():
		return Stats{}, ctx.Err()
	}
	select {
	case res := <-job.done:
		return res.stats, res.err
	case <-ctx.Done():
		return Stats{}, ctx.Err()
	}
}

// Run runs the job's collection over core (on the goroutine that owns the
// engine's checkpoints) and hands its result to Request.
func (j *Job) Run(g *GC, core Core) {
	st, err := g.Collect(j.ctx, core)
	j.done <- result{st, err}
}

// Collect is one collection, steps 1 to 6 of the package's comment. A
// failure leaves the store as a crash at that point would.
func (g *GC) Collect(ctx context.Context, core Core) (Stats, error) {
	start := time.Now()
	st, err := g.collect(ctx, core)
	st.Duration = time.Since(start)
	if err != nil {
		return st, fmt.Errorf("engine: gc: %w", err)
	}
	if st.Segments > 0 || st.Compacted > 0 {
		g.env.Logger.Info("engine: gc: reclaimed dead segments", "segments", st.Segments, "bytes", st.Bytes,
			"compacted", st.Compacted, "emptied", st.Emptied, "compacted_bytes", st.CompactedBytes,
			"floor", st.Floor, "forgotten", st.Forgotten, "duration", st.Duration)
	}
	return st, nil
}

func (g *GC) collect(ctx context.Context, core Core) (Stats, error) {
	var st Stats
	if err := core.LogFailed(); err != nil {
		return st, fmt.Errorf("the log failed earlier; reopen the store: %w", err)
	}
	if err := core.WaitLedger(ctx); err != nil {
		return st, err
	}
	if err := core.CheckRegistry(); err != nil {
		return st, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	env := &g.env
	ret, err := layout.ReadRetention(env.FS, env.Dir, &env.StoreID)
	if err != nil {
		return st, err
	}

	// 1. The replay position passes the delete records; a durable store
	// head after it supersedes every one before.
	floor, err := core.Checkpoint()
	if err != nil {
		return st, err
	}
	headAfter, err := core.StoreHead()
	if err != nil {
		return st, err
	}
	deleted := core.Deleted()
	// CHECKPOINT lists none of them now: their frame files and snapshots
	// are unused.
	if err := core.DropDerived(ctx, deleted); err != nil {
		return st, err
	}

	// 2. The dead records: the prefix, and the segments to compact.
	c, err := record.NewCursor(env.Log, env.File, wal.Pos{}, env.Decoder())
	if err != nil {
		return st, err
	}
	plan, err := PlanLog(ctx, c, floor, deleted, headAfter, env.CompactDead, core.Closed)
	c.Close()
	st.Scanned = plan.Scanned
	if err != nil {
		return st, err
	}
	keep, fps := plan.Keep, plan.FPs
	segs := env.Log.Segments()
	st.Floor = segs[0].ID
	counted := uint64(0) // segments below it are in RETENTION's totals already (a crash before their removal)
	if ret != nil {
		counted = ret.Floor
	}
	var bytes, newBytes int64
	n, newN := 0, 0
	for _, s := range segs {
		if s.ID < keep && s.Sealed {
			bytes += s.Size
			n++
			if s.ID >= counted {
				newBytes += s.Size
				newN++
			}
		}
	}
	if n == 0 && len(plan.Compact) == 0 {
		return st, nil
	}

	// 3. The ledger forgets what goes, and its table on disk too.
	if len(fps) > 0 {
		st.Forgotten = core.Forget(fps)
		if _, err := core.Checkpoint(); err != nil {
			return st, err
		}
	}
	if n == 0 {
		return st, g.compact(ctx, plan, core.Closed, &st)
	}

	// 4. RETENTION explains the log's new first segment ...
	r := layout.Retention{StoreID: env.StoreID, Floor: keep, Segments: uint64(newN), Bytes: uint64(newBytes), Updated: time.Now().UnixNano()}
	if ret != nil {
		r.Segments += ret.Segments
		r.Bytes += ret.Bytes
		r.Floor = max(r.Floor, ret.Floor)
	}
	if err := layout.WriteFileAtomic(env.FS, env.FS.PathJoin(env.Dir, layout.RetentionName), r.Marshal(), env.NoSync); err != nil {
		return st, err
	}
	// 5. ... before the segments go.
	removed, err := env.Log.RemoveBelow(wal.Pos{Segment: keep})
	st.Segments, st.Bytes, st.Floor = removed, bytes, keep
	if err != nil {
		return st, err
	}
	// 6. Compaction.
	return st, g.compact(ctx, plan, core.Closed, &st)
}

// stopped returns why a collection stops early: ctx cancelled, or the
// engine closed.
func stopped(ctx context.Context, closed func() error) error {
	if ctx.Err() == nil && closed() == nil {
		return nil
	}
	return errors.Join(ctx.Err(), closed())
}

// Trimmed reports whether garbage collection removed records from log:
// its first segments (Open checked that RETENTION explains it), or
// records of a compacted segment. A nil log (a replay without one) is not
// trimmed.
func Trimmed(log *wal.Log) bool {
	if log == nil {
		return false
	}
	segs := log.Segments()
	return len(segs) > 0 && (segs[0].ID > 1 || log.AnyCompacted())
}
