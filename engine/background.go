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
	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

func (db *DB) snapshotPolicy() snapshot.Policy {
	return snapshot.Policy{Every: db.opts.SnapshotEvery, Interval: db.opts.SnapshotInterval}
}

// background is the goroutine of the work off the commit path
// (checkpoint.Background): snapshots, engine checkpoints, timed chain
// checkpoints, collections, erasures; its errors are sticky.
func (db *DB) background() {
	defer db.bg.wg.Done()
	checkpoint.Background(bgCore{db}, checkpoint.Schedule[*Run, *retention.Job]{Stop: db.bg.stop, Lazy: pebbleDelay, Start: db.startDeferred,
		Snapshots: db.bg.snapJobs, Checkpoints: db.bg.ckptReq, Ready: func() error { return db.waitLedger(context.Background()) },
		Collections: db.gc.Jobs(), Collect: func(job *retention.Job) { job.Run(&db.gc, gcCore{db}) }, Jobs: db.eraser.Jobs(),
		Tick: checkpoint.SweepInterval(db.opts.SnapshotInterval, db.opts.CheckpointInterval), Sweep: db.sweep, Comp: db.comp, Sealer: db.sealer})
}

// startDeferred starts what waits for the restart to be over: Pebble, the
// ledger's table, the inbox's load, the check of the registry.
func (db *DB) startDeferred() {
	db.startDirSyncs()
	db.startLedger()
	db.snaps.Start()
	db.bg.wg.Add(2)
	go func() {
		defer db.bg.wg.Done()
		db.msgs.Load() // lets go of the tail's bodies; its error is sticky
	}()
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
// chain checkpoints past CheckpointInterval; an engine checkpoint is due
// when idle frames past the frame cache wait for one.
func (db *DB) sweep() (due bool) {
	for _, r := range db.runList() {
		r.mu.Lock()
		r.queueSnapshotLocked()
		if r.mu.book.AnchorLate(r.mu.lastSeq, db.opts.CheckpointInterval) {
			db.writeChainCheckpointLocked(r)
		}
		r.mu.Unlock()
	}
	return db.dropIdleFrames() && time.Since(db.bg.ckptAt) >= frameCheckpointGap
}

// checkpoint writes an engine checkpoint (checkpoint.Write); final is set
// by Close.
func (db *DB) checkpoint(final bool) error { return checkpoint.Write(bgCore{db}, final) }

// bgCore is the engine as the background work reaches it: internal/
// checkpoint's Core, internal/snapindex's Host (snapstore.go) and
// internal/dicttrain's (dict.go).
type bgCore struct{ db *DB }

func (k bgCore) Store() (checkpoint.Store, error) {
	db := k.db
	if err := db.logFailed(); err != nil {
		return checkpoint.Store{}, fmt.Errorf("engine: no checkpoint after the log failed: %w", err)
	}
	if err := db.dirsDurable(); err != nil {
		return checkpoint.Store{}, fmt.Errorf("engine: no checkpoint: %w", err)
	}
	return checkpoint.Store{FS: db.fs, Dir: db.dir, NoSync: db.opts.NoSync, Part: checkpointBatchPart, Comp: db.comp,
		Sealer: db.sealer, ID: db.storeID, Dict: &db.curDict, Gen: db.bg.gen, LedgerGen: db.bg.ledgerGn,
		Logger: db.logger, Unclean: func() { db.unclean.Store(true) }}, nil
}

func (k bgCore) Snapshots() (*snapshot.Store, error) {
	return k.db.usableSnapshots(context.Background())
}

func (k bgCore) Runs() []*Run { return k.db.runList() }

func (k bgCore) Anchor(r *Run) error {
	if err := r.lockIdle(context.Background()); err != nil {
		return err
	}
	k.db.writeChainCheckpointLocked(r)
	r.mu.Unlock()
	return nil
}

func (k bgCore) StoreHead(runs []*Run, wait bool) error {
	_, err := k.db.writeStoreHead(runs, wait)
	return err
}

func (k bgCore) Mark(gen uint64) ([]byte, wal.Pos, error) {
	db := k.db
	var floor wal.Pos
	table := db.ledger.CheckpointAt(nil, func() ledger.TableOrigin {
		if checkpointWaiting != nil {
			checkpointWaiting()
		}
		db.relaxed.Wait()
		floor = db.replayFloor()
		return ledger.TableOrigin{Gen: gen, Pos: floor}
	})
	if err := db.logFailed(); err != nil {
		return nil, floor, fmt.Errorf("engine: no checkpoint after the log failed: %w", err)
	}
	db.tailBytes.Store(0)
	return table, floor, nil
}

// CloseTails counts the runs only Close leaves to their tails, up to
// tailRunsForStore (snapstore.go).
func (k bgCore) CloseTails() bool {
	n := 0
	for _, r := range k.db.runList() {
		r.mu.Lock()
		if r.mu.gone == nil && r.tailLocked(true) && !r.tailLocked(false) {
			n++
		}
		r.mu.Unlock()
		if n >= tailRunsForStore {
			break
		}
	}
	return n >= tailRunsForStore
}

func (k bgCore) Capture(r *Run, full, snaps, closeTails bool) (*checkpoint.Capture, error) {
	if full && r.waitCreated(context.Background()) != nil {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.gone != nil || !full && r.mu.lastSeq == r.mu.book.SnapSeq {
		return nil, nil // deleted since it was queued or listed (nothing of it is written), or unchanged
	}
	c := &checkpoint.Capture{Run: r.id, Seq: r.mu.lastSeq, Head: r.mu.head}
	unread := r.mu.frame == nil && r.mu.lastSeq == r.base && r.parent != ""
	if r.mu.book.Frame(r.mu.lastSeq, unread, full && snaps && r.tailLocked(closeTails)).FrameDue(full, snaps) {
		if err := r.materializeLocked(); err != nil {
			return nil, err
		}
		var start, end int
		c.Frame, start, end = frame.AppendFrameMessages(nil, r.mu.frame)
		c.Cuts = []int{start, end}
		c.FrameBytes = int64(len(c.Frame))
	}
	c.Meta = layout.CheckpointRun{ID: r.id, Nonce: r.nonce, Created: r.createdAt.UnixNano(), LastSeq: r.mu.lastSeq, Head: r.mu.head}
	if e := r.mu.end; e != nil {
		c.Meta.Status, c.Meta.Ended, c.Meta.EndHead, c.Meta.Result = e.Status, e.At.UnixNano(), e.Head, e.RowResult()
	}
	c.Meta.Parent, c.Meta.ForkedAt, c.Meta.BaseHead = r.parent, r.base, r.baseHead
	r.mu.book.Capture(c, full, r.base)
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

func (k bgCore) Idle(r *Run) {
	if r.lockIdle(context.Background()) != nil {
		return // not reached: the context never ends
	}
	r.mu.book.SnapQueued = false
	r.mu.Unlock()
}

func (k bgCore) Captured(r *Run, c *checkpoint.Capture, stored, full bool) {
	if !full {
		k.db.observeSnapshot(r, c)
	}
	r.mu.Lock()
	r.mu.book.Captured(c, stored, full, time.Now())
	r.mu.Unlock()
	if !full {
		k.db.counters.snapshots.Add(1)
	}
}

// WriteFiles writes INBOX (internal/mailbox) and WAITS (waitcore.go).
func (k bgCore) WriteFiles(gen uint64, floor wal.Pos, rows []layout.CheckpointRun) error {
	db := k.db
	inbox, err := db.msgs.Capture(gen, floor)
	if err != nil {
		return fmt.Errorf("engine: checkpoint: inbox: %w", err)
	}
	if err := checkpoint.WriteStoreFile(db.fs, db.path(layout.InboxName), inbox.Marshal(), db.sealer, record.PlaceInbox, gen, "inbox", db.opts.NoSync, false); err != nil {
		return err
	}
	return db.writeWaitsFile(gen, floor, rows)
}

func (k bgCore) Written(gen uint64, floor wal.Pos) {
	db := k.db
	db.bg.gen, db.bg.ledgerGn, db.bg.replay = gen, gen, floor
	db.msgs.Written(gen, floor)
	db.counters.checkpoints.Add(1)
	db.bg.ckptAt = time.Now()
}

func (k bgCore) DropFrames() bool { return k.db.dropIdleFrames() }
func (k bgCore) Fail(err error)   { k.db.setBackgroundErr(err) }

// maxTailAtoms is how many atoms past its frame file a checkpoint may
// leave a run (checkpoint.Tail); a variable for the tests.
var maxTailAtoms uint64 = 16

// tailLocked reports whether a checkpoint may leave r's frame file behind
// (checkpoint.Tail.Leave).
func (r *Run) tailLocked(closeTails bool) bool {
	return checkpoint.Tail{Fork: r.parent != "", LastSeq: r.mu.lastSeq, FrameSeq: r.mu.book.FrameSeq,
		Indexed: r.mu.book.IndexedSeq + uint64(len(r.mu.book.Positions)), Resident: r.mu.frame != nil, Pending: len(r.mu.pending) > 0,
		MaxAtoms: maxTailAtoms, CloseTails: closeTails}.Leave()
}

// writeChainCheckpointLocked appends a chain checkpoint of r at its last
// seq, without waiting for its fsync (the next commit's makes it durable).
func (db *DB) writeChainCheckpointLocked(r *Run) {
	seq, head, final := r.chainHeadLocked()
	if !r.mu.book.AnchorDue(seq) {
		return
	}
	n, err := checkpoint.AppendChain(db.log, db.signer, chain.Checkpoint{StoreID: db.StoreID(), RunID: r.id, Seq: seq, Head: head, Final: final})
	if err != nil {
		db.setBackgroundErr(err)
		return
	}
	db.noteAppended(n)
	r.mu.book.Anchored(seq, head, time.Now())
}

// writeStoreHead appends a store head of the chain checkpoints of runs,
// durable if wait; none has one: nothing is written (wrote false).
func (db *DB) writeStoreHead(runs []*Run, wait bool) (wrote bool, err error) {
	h := chain.StoreHead{StoreID: db.StoreID()}
	for _, r := range runs {
		r.mu.Lock()
		if rh, ok := r.mu.book.RunHead(r.id); ok {
			h.Runs = append(h.Runs, rh)
		}
		r.mu.Unlock()
	}
	return len(h.Runs) > 0, checkpoint.AppendStoreHead(db.log, db.signer, h, wait)
}
