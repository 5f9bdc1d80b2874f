package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/checkpoint"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

func (db *DB) snapshotPolicy() snapshot.Policy {
	return snapshot.Policy{Every: db.opts.SnapshotEvery, Interval: db.opts.SnapshotInterval}
}

// background runs the work off the commit path: snapshots, engine
// checkpoints, timed chain checkpoints; its errors are sticky.
func (db *DB) background() {
	defer db.bg.wg.Done()
	tick := time.NewTicker(checkpoint.SweepInterval(db.opts.SnapshotInterval, db.opts.CheckpointInterval))
	defer tick.Stop()
	// Pebble and the ledger's table wait for the restart to be over.
	lazy := time.NewTimer(pebbleDelay)
	defer lazy.Stop()
	for {
		select {
		case <-db.bg.stop:
			return
		case <-lazy.C:
			db.startDirSyncs()
			db.startLedger()
			db.snaps.Start()
			db.bg.wg.Add(1)
			go func() {
				defer db.bg.wg.Done()
				db.msgs.Load() // lets go of the tail's bodies; its error is sticky
			}()
			db.bg.wg.Add(1)
			go func() {
				defer db.bg.wg.Done()
				if registryCheckHold != nil {
					registryCheckHold(db)
				}
				if err := db.checkRegistry(); err != nil && !errors.Is(err, wal.ErrClosed) && !errors.Is(err, ErrClosed) {
					db.setBackgroundErr(err)
					return
				}
				db.healStreamsMarker() // streams.go
			}()
		case r := <-db.bg.snapJobs:
			db.runSnapshot(r)
		case <-db.bg.ckptReq:
			db.backgroundCheckpoint()
		case job := <-db.gc.Jobs():
			job.Run(&db.gc, gcCore{db})
		case job := <-db.eraser.Jobs():
			job() // an erasure (erase.go)
		case <-tick.C:
			db.sweep()
			if db.dropIdleFrames() && time.Since(db.bg.ckptAt) >= frameCheckpointGap {
				db.backgroundCheckpoint() // idle unwritten frames past the frame cache
			}
		}
	}
}

// backgroundCheckpoint writes an engine checkpoint once the ledger's
// table is loaded; its error is sticky.
func (db *DB) backgroundCheckpoint() {
	err := db.waitLedger(context.Background())
	if err == nil {
		err = db.checkpoint(false)
	}
	if err != nil {
		db.setBackgroundErr(err)
	}
}

// checkpointWaiting (tests) is called as a checkpoint waits for the
// relaxed-mode records in flight, whose failure must stop it.
var checkpointWaiting func()

// pebbleDelay is how long after Open Pebble opens if nothing needed it.
const pebbleDelay = 200 * time.Millisecond

// checkpointBatchPart is the size of a part of a checkpoint's snapshot
// batch (checkpoint.NewWriter); a variable for the power-cut tests.
var checkpointBatchPart = 1 << 20

// sweep applies the time triggers: snapshots past SnapshotInterval,
// chain checkpoints past CheckpointInterval.
func (db *DB) sweep() {
	for _, r := range db.runList() {
		r.mu.Lock()
		if r.mu.lastSeq > r.mu.snapSeq && !r.mu.snapQueued && r.snapshotDueLocked(int(r.mu.lastSeq-r.mu.snapSeq)) {
			select {
			case db.bg.snapJobs <- r:
				r.mu.snapQueued = true
			default:
			}
		}
		if ci := db.opts.CheckpointInterval; ci > 0 && r.mu.lastSeq > r.mu.ckptSeq && time.Since(r.mu.ckptTime) >= ci {
			db.writeChainCheckpointLocked(r)
		}
		r.mu.Unlock()
	}
}

// runSnapshot writes one snapshot of r into Pebble, with the log positions
// of its atoms since the last one.
func (db *DB) runSnapshot(r *Run) {
	snaps, _ := db.usableSnapshots(context.Background())
	// After a Commit in flight: the snapshot covers its atom
	// (docs/DESIGN.md, write path).
	if r.lockIdle(context.Background()) != nil {
		return // not reached: the context never ends
	}
	r.mu.snapQueued = false
	r.mu.Unlock()
	if snaps == nil {
		return // out of use, reported once (Stats.SnapshotStore); StateAt reads the log
	}
	c, err := r.capture(db, false, true, false)
	if err != nil {
		db.setBackgroundErr(err)
		return
	}
	if c == nil {
		return
	}
	if ok, err := c.WriteSnapshot(snaps); !ok {
		if err != nil {
			db.setBackgroundErr(err)
		}
		return
	}
	db.observeSnapshot(r, c)
	r.captured(c)
	db.counters.snapshots.Add(1)
}

// capturedRun is a run's state taken for a snapshot or checkpoint
// (internal/checkpoint's Capture) and the run it is of.
type capturedRun struct {
	checkpoint.Capture
	run *Run
}

// capture takes r's state: nil for a snapshot (full=false) of an
// unchanged run; the frame is encoded under r's lock, compressed outside.
func (r *Run) capture(db *DB, full, snaps, closeTails bool) (*capturedRun, error) {
	r.mu.Lock()
	c, err := r.captureLocked(full, snaps, closeTails)
	r.mu.Unlock()
	if c == nil || err != nil {
		return c, err
	}
	if err := c.Encode(full, snaps, db.comp, db.sealer); err != nil {
		return nil, err
	}
	return c, nil
}

func (r *Run) captureLocked(full, snaps, closeTails bool) (*capturedRun, error) {
	if r.mu.gone != nil {
		return nil, nil // deleted since it was queued or listed: nothing of it is written
	}
	if !full && r.mu.lastSeq == r.mu.snapSeq {
		return nil, nil
	}
	c := &capturedRun{run: r, Capture: checkpoint.Capture{Run: r.id, Seq: r.mu.lastSeq, Head: r.mu.head, IndexedSeq: r.mu.indexedSeq}}
	f := checkpoint.Frame{LastSeq: r.mu.lastSeq, SnapSeq: r.mu.snapSeq, FrameSeq: r.mu.frameSeq,
		Unread: r.mu.frame == nil && r.mu.lastSeq == r.base && r.parent != "", Tail: full && snaps && r.tailLocked(closeTails)}
	if f.FrameDue(full, snaps) {
		if err := r.materializeLocked(); err != nil {
			return nil, err
		}
		c.Frame = frame.AppendFrame(nil, r.mu.frame)
		c.FrameBytes = int64(len(c.Frame))
	}
	c.Positions = append([]wal.Pos(nil), r.mu.positions...)
	c.Meta = layout.CheckpointRun{
		ID: r.id, Nonce: r.nonce, Created: r.createdAt.UnixNano(), LastSeq: r.mu.lastSeq, Head: r.mu.head,
		FrameSeq: r.mu.frameSeq, IndexedSeq: r.mu.lastSeq, SnapSeq: r.mu.snapSeq, CkptSeq: r.mu.ckptSeq, CkptHead: r.mu.ckptHead,
	}
	if e := r.mu.end; e != nil {
		c.Meta.Status, c.Meta.Ended, c.Meta.EndHead, c.Meta.Result = uint8(e.status), e.at.UnixNano(), e.head, e.rowResult()
	}
	c.Meta.Parent, c.Meta.ForkedAt, c.Meta.BaseHead = r.parent, r.base, r.baseHead
	c.Plan(full, r.base, r.mu.snapSeq, r.mu.windowFirst)
	if r.mu.interruptedSeq != 0 {
		c.Meta.Inflight = append([]layout.InflightAction(nil), r.mu.inflight...)
	} else if a := r.mu.atom; a != nil {
		a.mu.Lock() // its actions with an intent or a certificate in the log
		c.Meta.Inflight = append(c.Meta.Inflight, a.mu.started...)
		for _, act := range a.mu.actions {
			if !slices.ContainsFunc(a.mu.started, func(s layout.InflightAction) bool { return s.FP == act.fp }) {
				c.Meta.Inflight = append(c.Meta.Inflight, layout.InflightAction{Index: act.index, FP: act.fp})
			}
		}
		a.mu.Unlock()
	}
	return c, nil
}

// maxTailAtoms is how many atoms past its frame file a checkpoint may
// leave a run (checkpoint.Tail); a variable for the tests.
var maxTailAtoms uint64 = 16

// tailLocked reports whether a checkpoint may leave r's frame file behind
// (checkpoint.Tail.Leave).
func (r *Run) tailLocked(closeTails bool) bool {
	return checkpoint.Tail{Fork: r.parent != "", LastSeq: r.mu.lastSeq, FrameSeq: r.mu.frameSeq,
		Indexed: r.mu.indexedSeq + uint64(len(r.mu.positions)), Resident: r.mu.frame != nil, Pending: len(r.mu.pending) > 0,
		MaxAtoms: maxTailAtoms, CloseTails: closeTails}.Leave()
}

// captured records that c is durable in Pebble (for a checkpoint, also in
// the run's frame file).
func (r *Run) captured(c *capturedRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := checkpoint.Index{SnapSeq: r.mu.snapSeq, SnapTime: r.mu.snapTime, WindowFirst: r.mu.windowFirst, DeltaBytes: r.mu.deltaBytes,
		SnapFrameBytes: r.mu.snapFrameBytes, IndexedSeq: r.mu.indexedSeq, Positions: r.mu.positions}
	c.Captured(&x, time.Now())
	r.mu.snapSeq, r.mu.snapTime, r.mu.windowFirst, r.mu.deltaBytes = x.SnapSeq, x.SnapTime, x.WindowFirst, x.DeltaBytes
	r.mu.snapFrameBytes, r.mu.indexedSeq, r.mu.positions = x.SnapFrameBytes, x.IndexedSeq, x.Positions
}

// checkpoint writes an engine checkpoint (docs/DESIGN.md): frame files,
// the snapshot batch, the ledger table, INBOX, WAITS, then CHECKPOINT, the
// commit point. final is set by Close.
func (db *DB) checkpoint(final bool) error {
	if err := db.logFailed(); err != nil {
		return fmt.Errorf("engine: no checkpoint after the log failed: %w", err)
	}
	if err := db.dirsDurable(); err != nil {
		return fmt.Errorf("engine: no checkpoint: %w", err)
	}
	// Without a usable snapshot store it goes on; the next Open re-indexes.
	snaps, err := db.usableSnapshots(context.Background())
	if err != nil {
		return fmt.Errorf("engine: checkpoint: %w", err)
	}
	if final {
		// Every run anchored, after its Commit in flight, and a store
		// head, before the replay position: Close leaves nothing to replay.
		runs := db.runList()
		for _, r := range runs {
			if err := r.lockIdle(context.Background()); err != nil {
				return err
			}
			db.writeChainCheckpointLocked(r)
			r.mu.Unlock()
		}
		if err := db.writeStoreHead(runs, true); err != nil {
			return err
		}
	}
	// The ledger table and the replay position together (the ledger's
	// journal held back); every run is captured after, at or past it.
	var floor wal.Pos
	gen := db.bg.gen + 1
	table := db.ledger.CheckpointAt(nil, func() ledger.TableOrigin {
		if checkpointWaiting != nil {
			checkpointWaiting()
		}
		db.relaxed.Wait()
		floor = db.replayFloor()
		return ledger.TableOrigin{Gen: gen, Pos: floor}
	})
	// A relaxed certificate whose write failed meanwhile has no location
	// in the table: nothing that names the table may be written.
	if err := db.logFailed(); err != nil {
		return fmt.Errorf("engine: no checkpoint after the log failed: %w", err)
	}
	db.tailBytes.Store(0)
	runs := db.runList()
	// Close leaves runs to their tails only when there are many.
	closeTails := final && db.tailRuns(tailRunsForStore) >= tailRunsForStore
	caps := make([]*capturedRun, 0, len(runs))
	w := checkpoint.NewWriter(db.fs, db.path(layout.FramesDir), db.opts.NoSync, snaps, checkpointBatchPart)
	defer w.Discard()
	for _, r := range runs {
		if r.waitCreated(context.Background()) != nil {
			continue
		}
		c, err := r.capture(db, true, w.Snapshots(), closeTails)
		if err != nil {
			return err
		}
		if c == nil {
			continue // deleted since the list was taken
		}
		if err := w.Add(&c.Capture, db.frameFileName(r.id)); err != nil {
			return err
		}
		caps = append(caps, c)
	}
	stored, err := w.Finish(gen) // the snapshot store holds the batch of gen
	if err != nil {
		return err
	}
	for _, c := range caps {
		if stored {
			c.run.captured(c)
		}
		c.run.mu.Lock()
		if c.Meta.FrameSeq > c.run.mu.frameSeq {
			c.run.mu.frameSeq = c.Meta.FrameSeq
		}
		c.run.notedFrameFileLocked(c)
		c.run.mu.Unlock()
	}

	if err := checkpoint.WriteLedgerTable(db.fs, db.ledgerTableName(gen), table, db.sealer, gen, db.opts.NoSync); err != nil {
		return err
	}
	// INBOX after every run, made durable by CHECKPOINT's directory fsync.
	inbox, err := db.msgs.Capture(gen, floor)
	if err != nil {
		return fmt.Errorf("engine: checkpoint: inbox: %w", err)
	}
	if err := checkpoint.WriteStoreFile(db.fs, db.path(layout.InboxName), inbox.Marshal(), db.sealer, record.PlaceInbox, gen, "inbox", db.opts.NoSync, false); err != nil {
		return err
	}
	// WAITS likewise, after every run's row (waitcore.go).
	if err := db.writeWaitsFile(gen, floor, caps); err != nil {
		return err
	}
	cp := layout.Checkpoint{Gen: gen, Replay: floor, LedgerGen: gen, StoreID: db.storeID,
		Dict: db.curDict.Load()}
	for _, c := range caps {
		cp.Runs = append(cp.Runs, c.Meta)
	}
	if err := layout.WriteFileAtomic(db.fs, db.path(layout.CheckpointName), cp.Marshal(), db.opts.NoSync); err != nil {
		return err
	}
	old := db.bg.ledgerGn
	db.bg.gen, db.bg.ledgerGn, db.bg.replay = gen, gen, floor
	db.msgs.Written(gen, floor)
	if old != 0 && old != gen {
		if err := db.fs.Remove(db.ledgerTableName(old)); err != nil && !layout.NotExist(err) {
			db.unclean.Store(true)
			db.logger.Warn("engine: remove old ledger table", "err", err)
		}
	}
	db.counters.checkpoints.Add(1)
	db.bg.ckptAt = time.Now()

	if final {
		return nil // the store head went out first
	}
	if err := db.writeStoreHead(runs, false); err != nil {
		return err
	}
	db.dropIdleFrames()
	return nil
}

// writeChainCheckpointLocked appends a chain checkpoint of r at its last
// seq, without waiting for its fsync (the next commit's makes it durable).
func (db *DB) writeChainCheckpointLocked(r *Run) {
	seq, head, final := r.chainHeadLocked()
	if seq == 0 || seq == r.mu.ckptSeq {
		return
	}
	n, err := checkpoint.AppendChain(db.log, db.signer, chain.Checkpoint{StoreID: db.StoreID(), RunID: r.id, Seq: seq, Head: head, Final: final})
	if err != nil {
		db.setBackgroundErr(err)
		return
	}
	db.noteAppended(n)
	r.mu.ckptSeq, r.mu.ckptHead, r.mu.ckptTime = seq, head, time.Now()
}

func (db *DB) writeStoreHead(runs []*Run, wait bool) error {
	h := chain.StoreHead{StoreID: db.StoreID()}
	for _, r := range runs {
		r.mu.Lock()
		if r.mu.ckptSeq > 0 {
			h.Runs = append(h.Runs, chain.RunHead{RunID: r.id, Seq: r.mu.ckptSeq, Head: r.mu.ckptHead})
		}
		r.mu.Unlock()
	}
	return checkpoint.AppendStoreHead(db.log, db.signer, h, wait)
}
