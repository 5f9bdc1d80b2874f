package engine

import (
	"bytes"
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

// background runs the work that never sits on the commit path: snapshots
// into Pebble, engine checkpoints, time-triggered chain checkpoints. Its
// errors are sticky (see backgroundErr) and reported by Close and Stats.
func (db *DB) background() {
	defer db.bg.wg.Done()
	tick := time.NewTicker(db.sweepInterval())
	defer tick.Stop()
	// Open Pebble and load the ledger's table once the restart is over: an
	// agent resuming after a crash gets its frame before they compete for
	// the disk and the CPU.
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
				// The inbox, so that the tail's bodies it holds until then
				// are let go; a failure is sticky and returned to every
				// use of the inbox (and to the next engine checkpoint).
				db.msgs.Load()
			}()
			db.bg.wg.Add(1)
			go func() {
				defer db.bg.wg.Done()
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
				// Idle runs whose frames are not written yet hold memory
				// past the frame cache: a checkpoint writes them, and then
				// they can go.
				db.backgroundCheckpoint()
			}
		}
	}
}

// backgroundCheckpoint writes an engine checkpoint once the ledger's
// table is loaded (the checkpoint rewrites it); its error is sticky.
func (db *DB) backgroundCheckpoint() {
	err := db.waitLedger(context.Background())
	if err == nil {
		err = db.checkpoint(false)
	}
	if err != nil {
		db.setBackgroundErr(err)
	}
}

// checkpointWaiting, set only by tests, is called by a checkpoint just
// before it waits for the relaxed-mode records in flight: the window in
// which such a record's failure must still stop the checkpoint.
var checkpointWaiting func()

// pebbleDelay is how long after Open the engine starts opening Pebble if
// nothing needed it before.
const pebbleDelay = 200 * time.Millisecond

// checkpointBatchPart is the size at which an engine checkpoint commits
// the part of its snapshot batch built so far. A batch much larger than
// Pebble's memtable (snapshot.DefaultMemTableSize) is queued whole as a
// flushable batch, and its buffer stays in the heap long after (a
// checkpoint of 10,000 runs' snapshots held 64 MB).
// A variable for the tests that cut the power between parts.
var checkpointBatchPart = 1 << 20

func (db *DB) sweepInterval() time.Duration {
	d := time.Second
	for _, t := range []time.Duration{db.opts.SnapshotInterval, db.opts.CheckpointInterval} {
		if t > 0 && t < d {
			d = t
		}
	}
	return d
}

// sweep applies the time triggers: a snapshot of every run with atoms older
// than SnapshotInterval, a chain checkpoint of every run with atoms older
// than CheckpointInterval.
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
	// A run whose Commit is in flight is snapshotted once its outcome is
	// applied, as when that Commit held the run's lock: the snapshot then
	// covers the atom, and the background snapshots keep the pace of the
	// log's fsyncs. Taken at once instead, runs committing concurrently
	// wrote up to twice as many snapshots, for up to 1.2x the CPU per atom
	// (bench/RESULTS.md).
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

// capture takes r's state. For a snapshot (full=false) it returns nil when
// nothing changed since the last snapshot; for a checkpoint it always
// returns the run's metadata, and a frame if the frame file is stale or,
// when the checkpoint has a snapshot store (snaps), the snapshot is.
// The frame is encoded under the run's lock and compressed outside it,
// only for what needs it compressed (checkpoint.Capture.Encode).
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
	// A fork with no atom of its own whose state was never read has no
	// frame to write: the parent's history is its state (baseFrame), and
	// building it only to write a frame file would make every fork cost a
	// replay of the parent at the next checkpoint.
	unread := r.mu.frame == nil && r.mu.lastSeq == r.base && r.parent != ""
	// A short tail (tailLocked) keeps the frame file where it is.
	tail := full && snaps && r.tailLocked(closeTails)
	// Without a snapshot store the snapshot seq stays where it is, and a
	// checkpoint only brings the frame file up to date: a run that did not
	// move since the last one is not encoded and written again, nor is
	// a run left to its tail: its snapshot is its frame file and the
	// atoms after it, as its state is.
	stale := !tail && ((snaps && r.mu.lastSeq > r.mu.snapSeq) || (full && r.mu.lastSeq > r.mu.frameSeq))
	if stale && r.mu.lastSeq > 0 && !unread {
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
		// Its actions done and those whose exec is running: every action
		// of the atom with an intent or a certificate in the log.
		a.mu.Lock()
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

// maxTailAtoms is how many atoms past its frame file an engine checkpoint
// may leave a run: its row in CHECKPOINT then names the older frame file
// (FrameSeq) and the run's last seq, the checkpoint's batch holds the
// positions of the atoms between them (the atom index, IndexedSeq), and
// the run's first use after the next Open reads the frame file and
// applies those atoms from the log (materializeLocked). A Close of
// 10,000 runs that each moved by an atom writes no frame file, where one
// file per run cost about 1 ms each (issue 34). The frame files are
// derived: leaving them behind changes no crash guarantee, since the
// log holds every atom durably before a checkpoint names it.
var maxTailAtoms uint64 = 16 // a variable for the tests that need every frame file written

// tailLocked reports whether an engine checkpoint with a snapshot batch
// may leave r's frame file behind (checkpoint.Tail.Leave); closeTails:
// Close's checkpoint, with tailRunsForStore runs or more to leave so.
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

// checkpoint writes an engine checkpoint: every run's frame file brought up
// to date, a synced Pebble batch with their snapshots and atom positions,
// the ledger table, and finally CHECKPOINT, which names the log position the
// next Open replays from. final is set by Close.
//
// Crash safety: CHECKPOINT is replaced atomically and is the commit point.
// Frame files and ledger tables written before a crash that CHECKPOINT does
// not yet name are harmless: frame files carry their own seq, and the tail
// replay skips what they already reflect.
func (db *DB) checkpoint(final bool) error {
	if err := db.logFailed(); err != nil {
		return fmt.Errorf("engine: no checkpoint after the log failed: %w", err)
	}
	if err := db.dirsDurable(); err != nil {
		return fmt.Errorf("engine: no checkpoint: %w", err)
	}
	// Without a usable snapshot store the checkpoint goes on without its
	// batch: CHECKPOINT then names a generation the store lacks, and the next
	// Open re-indexes the log into it (checkSnapshotGen).
	snaps, err := db.usableSnapshots(context.Background())
	if err != nil {
		return fmt.Errorf("engine: checkpoint: %w", err)
	}
	if final {
		// Anchor every run that moved, and list the anchors in a store head
		// (so that a deleted run is detected), before the replay position is
		// taken: a clean Close leaves nothing to replay. A Commit or Fail
		// in flight is waited for, so that its atom is anchored and
		// captured too.
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
	// The ledger table and the replay position are taken together, with the
	// ledger's journal writes held back; every run is captured after them,
	// so its state is at or past the position and the replay skips the rest.
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
	// A relaxed certificate whose write failed while the callback waited
	// for it is in the table without a location: the table must not be
	// persisted, nor anything that names it.
	if err := db.logFailed(); err != nil {
		return fmt.Errorf("engine: no checkpoint after the log failed: %w", err)
	}
	db.tailBytes.Store(0)
	runs := db.runList()
	// Close leaves runs to their tails only when there are many: a few
	// frame files cost a few milliseconds, and a run left to its tail
	// waits for the snapshot store to open (7-25 ms) on its first use
	// after the next Open, which a restart of a store with few runs
	// should not.
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

	// The table is shared with the ledger, which searches it in place, so
	// the file gets a copy (the sealed one is a copy).
	tableFile := table
	if db.sealer == nil {
		tableFile = bytes.Clone(table)
	}
	if err := checkpoint.WriteStoreFile(db.fs, db.ledgerTableName(gen), tableFile, db.sealer, record.PlaceLedgerTable, gen, "ledger table", db.opts.NoSync, true); err != nil {
		return err
	}
	// INBOX is captured after every run: it reflects at least what their
	// rows do, and the tail replay changes nothing it already reflects.
	inbox, err := db.msgs.Capture(gen, floor)
	if err != nil {
		return fmt.Errorf("engine: checkpoint: inbox: %w", err)
	}
	// Its rename is made durable by CHECKPOINT's directory fsync, just
	// after: until then a crash leaves the old INBOX (of the old
	// CHECKPOINT) or the new one (of the next, which Open then does not
	// use and rebuilds from the log).
	if err := checkpoint.WriteStoreFile(db.fs, db.path(layout.InboxName), inbox.Marshal(), db.sealer, record.PlaceInbox, gen, "inbox", db.opts.NoSync, false); err != nil {
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
// seq. It does not wait for the fsync: the checkpoint is an anchor for
// verification, and the next commit's fsync (or Close) makes it durable.
func (db *DB) writeChainCheckpointLocked(r *Run) {
	seq, head, final := r.chainHeadLocked()
	if seq == 0 || seq == r.mu.ckptSeq {
		return
	}
	c := chain.Checkpoint{StoreID: db.StoreID(), RunID: r.id, Seq: seq, Head: head, Final: final}
	rec, err := checkpoint.ChainRecord(db.signer, c)
	if err != nil {
		db.setBackgroundErr(fmt.Errorf("engine: sign checkpoint of run %q at %d: %w", r.id, c.Seq, err))
		return
	}
	db.log.AppendAsync(rec)
	db.noteAppended(len(rec))
	r.mu.ckptSeq, r.mu.ckptHead, r.mu.ckptTime = c.Seq, c.Head, time.Now()
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
	if len(h.Runs) == 0 {
		return nil
	}
	rec, err := checkpoint.StoreHeadRecord(db.signer, h)
	if err != nil {
		return fmt.Errorf("engine: sign store head: %w", err)
	}
	w := db.log.AppendAsync(rec)
	if !wait {
		return nil
	}
	if _, err := w.Wait(context.Background()); err != nil {
		return fmt.Errorf("engine: store head: %w", err)
	}
	return nil
}
