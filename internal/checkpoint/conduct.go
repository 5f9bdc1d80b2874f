package checkpoint

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// Core is the engine as its engine checkpoints and background snapshots
// reach it (the package's doc); R is its run. Each method takes the locks
// it needs and holds none when it returns.
type Core[R any] interface {
	// Store returns what a checkpoint writes with, as of now, or why no
	// checkpoint may be written (the log failed; the store's directories
	// are not durable).
	Store() (Store, error)
	// Snapshots returns the snapshot store to write into, nil when none
	// is usable (the checkpoint goes on without it).
	Snapshots() (*snapshot.Store, error)
	// Runs returns the store's runs, sorted by id.
	Runs() []R
	// Anchor appends r's chain checkpoint at its last seq, after its
	// Commit in flight (Close's checkpoint).
	Anchor(r R) error
	// StoreHead appends the store head of runs' latest chain checkpoints,
	// and waits for its fsync if wait is set.
	StoreHead(runs []R, wait bool) error
	// Mark takes the ledger table of generation gen and the replay
	// position with it (the ledger's journal held back, its relaxed
	// records in flight durable); it fails if the log failed meanwhile
	// (a relaxed certificate without a location in the table: nothing
	// that names the table may be written).
	Mark(gen uint64) (table []byte, floor wal.Pos, err error)
	// CloseTails reports whether Close's checkpoint leaves runs to their
	// tails (Tail.CloseTails): there are many.
	CloseTails() bool
	// Capture takes r's state under its lock: Run, Seq, Head, IndexedSeq,
	// Positions (a copy), Meta, the raw frame when Frame.FrameDue, then
	// Plan. nil: r is gone, or was never created (a checkpoint, full,
	// waits for its creation), or for a snapshot is unchanged.
	Capture(r R, full, snaps, closeTails bool) (*Capture, error)
	// Idle waits for r's Commit in flight (a background snapshot covers
	// its atom) and marks r's queued snapshot as taken.
	Idle(r R)
	// Captured records, under r's lock, what c made durable: its snapshot
	// and positions in the snapshot store (stored), and for a checkpoint
	// (full) its frame file.
	Captured(r R, c *Capture, stored, full bool)
	// WriteFiles writes the files of generation gen that follow the
	// ledger table (INBOX, WAITS), rows being every captured run's row of
	// CHECKPOINT, sorted by id; CHECKPOINT's directory fsync makes them
	// durable.
	WriteFiles(gen uint64, floor wal.Pos, rows []layout.CheckpointRun) error
	// Written records that CHECKPOINT of generation gen, replaying from
	// floor, is durable.
	Written(gen uint64, floor wal.Pos)
	// DropFrames lets go of idle runs' frames past the frame cache, now
	// that a checkpoint wrote their files; it reports whether some stay
	// only because no checkpoint has written them yet.
	DropFrames() (unwritten bool)
	// Fail records err as the sticky error of background work.
	Fail(err error)
}

// Store is what a checkpoint writes with (Core.Store).
type Store struct {
	FS        vfs.FS
	Dir       string // the store's directory
	NoSync    bool
	Part      int // the size of a part of the snapshot batch (NewWriter)
	Comp      *frame.Compressor
	Sealer    *record.Sealer // nil: a plaintext store
	ID        [16]byte       // STORE's
	Dict      *atomic.Uint32 // the dictionary new records are compressed with, read for CHECKPOINT
	Gen       uint64         // the last checkpoint's generation (0: none)
	LedgerGen uint64         // the generation of the ledger table on disk (0: none)
	Logger    *slog.Logger
	// Unclean records that a write failed and was only logged: Close then
	// leaves no clean-close mark.
	Unclean func()
}

func (s Store) path(elem ...string) string { return s.FS.PathJoin(append([]string{s.Dir}, elem...)...) }

// Write writes an engine checkpoint (docs/DESIGN.md): for Close's (final)
// first every run's chain checkpoint and a store head; then the ledger
// table's mark, the frame files and the snapshot batch, the ledger table,
// INBOX and WAITS (Core.WriteFiles), then CHECKPOINT, the commit point;
// then, unless final, a store head. The generation is the last one's
// plus one.
func Write[R any](core Core[R], final bool) error {
	st, err := core.Store()
	if err != nil {
		return err
	}
	// Without a usable snapshot store it goes on; the next Open re-indexes.
	snaps, err := core.Snapshots()
	if err != nil {
		return fmt.Errorf("engine: checkpoint: %w", err)
	}
	if final {
		// Every run anchored, after its Commit in flight, and a store
		// head, before the replay position: Close leaves nothing to replay.
		runs := core.Runs()
		for _, r := range runs {
			if err := core.Anchor(r); err != nil {
				return err
			}
		}
		if err := core.StoreHead(runs, true); err != nil {
			return err
		}
	}
	// The ledger table and the replay position together; every run is
	// captured after, at or past it.
	gen := st.Gen + 1
	table, floor, err := core.Mark(gen)
	if err != nil {
		return err
	}
	runs := core.Runs()
	// Close leaves runs to their tails only when there are many.
	closeTails := final && core.CloseTails()
	type captured struct {
		run R
		c   *Capture
	}
	caps := make([]captured, 0, len(runs))
	w := NewWriter(st.FS, st.path(layout.FramesDir), st.NoSync, snaps, st.Part)
	defer w.Discard()
	for _, r := range runs {
		c, err := capture(core, r, true, w.Snapshots(), closeTails, st)
		if err != nil {
			return err
		}
		if c == nil {
			continue // deleted since the list was taken
		}
		if err := w.Add(c, st.path(layout.FramesDir, layout.FrameFileBase(c.Run))); err != nil {
			return err
		}
		caps = append(caps, captured{r, c})
	}
	stored, err := w.Finish(gen) // the snapshot store holds the batch of gen
	if err != nil {
		return err
	}
	rows := make([]layout.CheckpointRun, 0, len(caps))
	for _, c := range caps {
		core.Captured(c.run, c.c, stored, true)
		rows = append(rows, c.c.Meta)
	}

	if err := WriteLedgerTable(st.FS, st.path(layout.LedgerTableName(gen)), table, st.Sealer, gen, st.NoSync); err != nil {
		return err
	}
	if err := core.WriteFiles(gen, floor, rows); err != nil {
		return err
	}
	cp := layout.Checkpoint{Gen: gen, Replay: floor, LedgerGen: gen, StoreID: st.ID, Dict: st.Dict.Load(), Runs: rows}
	if err := layout.WriteFileAtomic(st.FS, st.path(layout.CheckpointName), cp.Marshal(), st.NoSync); err != nil {
		return err
	}
	core.Written(gen, floor)
	if old := st.LedgerGen; old != 0 && old != gen {
		if err := st.FS.Remove(st.path(layout.LedgerTableName(old))); err != nil && !layout.NotExist(err) {
			st.Unclean()
			st.Logger.Warn("engine: remove old ledger table", "err", err)
		}
	}
	if final {
		return nil // the store head went out first
	}
	if err := core.StoreHead(runs, false); err != nil {
		return err
	}
	core.DropFrames()
	return nil
}

// Snapshot writes one background snapshot of r into the snapshot store,
// with the log positions of its atoms since the last one, after r's
// Commit in flight. A run unchanged since its last snapshot, or no usable
// snapshot store (reported once by the store: StateAt reads the log), is
// not an error.
func Snapshot[R any](core Core[R], r R, comp *frame.Compressor, sealer *record.Sealer) error {
	snaps, _ := core.Snapshots()
	core.Idle(r)
	if snaps == nil {
		return nil
	}
	c, err := capture(core, r, false, true, false, Store{Comp: comp, Sealer: sealer})
	if c == nil || err != nil {
		return err
	}
	if ok, err := c.WriteSnapshot(snaps); !ok {
		return err
	}
	core.Captured(r, c, true, false)
	return nil
}

// capture takes r's state under its lock (Core.Capture), then encodes its
// frame outside it (Encode).
func capture[R any](core Core[R], r R, full, snaps, closeTails bool, st Store) (*Capture, error) {
	c, err := core.Capture(r, full, snaps, closeTails)
	if c == nil || err != nil {
		return nil, err
	}
	if err := c.Encode(full, snaps, st.Comp, st.Sealer); err != nil {
		return nil, err
	}
	return c, nil
}
