package engine

// Retention, part three: erasing a run (crypto-shredding; docs/DESIGN.md,
// "Erasing a run", which also says what an erasure does not reach:
// actions with explicit keys, what other runs hold, copies made outside
// the store). Package internal/erasure holds the erasure: its steps,
// their order and what each leaves after a crash, the KEYS changes and
// the erase record, and conducts a run's erasure (EraseRun). This file is
// its glue: the public API, eraseRuns (the run's withdrawal and the
// registry of deleted runs around the steps, as the package's Runs and
// Resumer), the engine's own steps 3 and 4 (the ledger, an engine
// checkpoint, the derived files); erasekey.go holds the DB as the
// package's Store (eraseStore).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/continuumdb/continuum/chain"
	erasing "github.com/continuumdb/continuum/internal/erasure"
	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// ErrRunErased is returned by Run and Fork for the id of an erased run
// (it matches ErrRunDeleted too: an erased run is deleted).
var ErrRunErased = fmt.Errorf("%w and erased", ErrRunDeleted)

// Erasure is the erasure of a deleted run, as its erase record says.
type Erasure struct {
	Seq    uint64     // the erasure's link: the end's seq + 1, or the deletion's + 1
	Head   chain.Hash // the erasure's link
	At     time.Time
	Reason string
}

// deletedRun is d, the deletion of run id, as DeletedRun lists it.
func deletedRun(id string, d *retention.Gone) DeletedRun {
	out := DeletedRun{ID: id, Seq: d.Seq, Final: d.Final, Head: d.Head, At: d.At, Reason: d.Reason}
	if e := d.Erasure; e != nil {
		out.Erasure = &Erasure{Seq: e.Seq, Head: e.Head, At: e.At, Reason: e.Reason}
	}
	return out
}

// Erase erases the ended (or deleted) run id of an encrypted store: it
// deletes the run, if it is not deleted yet, and destroys its content by
// dropping its data key (see the file's comment for what that reaches,
// and the order of the steps). It returns once the erasure is complete:
// the erase record durable, the derived files that held the run's data
// rewritten or removed, and KEYS without the key. Erase of a run erased
// already returns its erasure.
//
// It fails with ErrKeyring on a plaintext store (there is no key to
// shred: delete the run and collect with Options.CompactDead to reclaim
// its records instead), ErrRunNotEnded for an active run, and
// ErrRunHasForks while a fork of the run is not erased (a fork holds its
// parent's state at its fork point, sealed with its own key: erase it
// first). reason is recorded in the erase record (at most
// MaxDeleteReason bytes; "" records "erased by request").
func (db *DB) Erase(ctx context.Context, id, reason string) (DeletedRun, error) {
	if err := db.checkOpen(); err != nil {
		return DeletedRun{}, err
	}
	if db.keys == nil {
		return DeletedRun{}, fmt.Errorf("%w: erase run %q: the store is not encrypted, so no key can be shredded; delete the run and collect with Options.CompactDead to reclaim its records", ErrKeyring, id)
	}
	reason, err := db.eraser.Reason("erase", reason)
	if err != nil {
		return DeletedRun{}, err
	}
	if err := ctx.Err(); err != nil {
		return DeletedRun{}, err
	}
	// On the background goroutine, where engine checkpoints run; not
	// interrupted by ctx once begun: an erasure goes on to its end (a
	// crash in it is finished by the next Open).
	var d DeletedRun
	if qerr := db.eraser.Do(ctx, db.bg.stop, ErrClosed, func() { d, err = db.erase(ctx, id, reason) }); qerr != nil {
		return DeletedRun{}, qerr
	}
	return d, err
}

// erase is Erase on the background goroutine: the erasure's steps are
// internal/erasure's (EraseRun), over eraseRuns.
func (db *DB) erase(ctx context.Context, id, reason string) (DeletedRun, error) {
	if err := db.eraser.EraseRun(context.WithoutCancel(ctx), &eraseRuns{db: db}, id, reason); err != nil {
		return DeletedRun{}, err
	}
	db.mu.Lock()
	d, _ := db.mu.deleted.Get(id)
	db.mu.Unlock()
	if d == nil || d.Erasure == nil {
		return DeletedRun{}, fmt.Errorf("engine: erase run %q: the erasure is not in the registry of deleted runs", id)
	}
	return deletedRun(id, d), nil
}

// forkOfLocked returns a run forked from id that is not erased ("" if
// none): a live one, or a deleted one whose parent the engine knows.
func (db *DB) forkOfLocked(id string) string {
	var forks []string
	for fid, r := range db.mu.runs {
		if r.parent == id {
			forks = append(forks, fid)
		}
	}
	forks = append(forks, db.mu.deleted.ForksOf(id)...)
	if len(forks) == 0 {
		return ""
	}
	return slices.Min(forks)
}

// finishErasure does steps 3 to 5 of the erasure of run id, whose erase
// record is durable.
func (db *DB) finishErasure(ctx context.Context, id string) error {
	// 3. The ledger forgets the run's own actions; a checkpoint writes the
	// store's sealed files without them (and without the run).
	fps, err := db.runFingerprints(ctx, id)
	if err != nil {
		return fmt.Errorf("read the run's actions: %w", err)
	}
	db.ledger.Forget(fps)
	if err := db.checkpoint(false); err != nil {
		return err
	}
	// 4. Its derived files.
	// (Sealed with the run's key, they are unreadable once it goes; they
	// are removed so that they take no space and no tool trips on them.)
	gone := map[string]bool{id: true}
	db.removeDeletedFrames(gone)
	if err := db.dropDeletedSnapshots(ctx, gone); err != nil {
		return err
	}
	// 5. The keys.
	return db.eraser.DropRun(id)
}

// runFingerprints reads the log for the fingerprints of run id's
// default-key actions (erasure.Eraser.Actions): only the records sealed
// with the run's own keys are opened and decoded.
func (db *DB) runFingerprints(ctx context.Context, id string) ([]ledger.Fingerprint, error) {
	cheap := db.decoder(false) // leaves the ledger's records sealed
	cheap.Skip = func(k record.Kind, _ []byte) bool { return k != record.KindIntent && k != record.KindCert }
	full := db.decoder(true)
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, cheap)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return db.eraser.Actions(id, c, func(sealed, r *record.Record) error {
		return full.Decode(sealed.Raw, sealed.Pos, db.segmentFile(sealed.Pos.Segment), r)
	}, func() error {
		if db.closed.Load() || ctx.Err() != nil {
			return errors.Join(ctx.Err(), db.checkOpen())
		}
		return nil
	})
}

// finishErasures finishes, at Open, the erasures a crash interrupted: a
// key marked erasing whose run has an erase record has its erasure
// finished; one whose run has none is live again (the erasure never
// happened).
func (db *DB) finishErasures() error {
	if db.keys == nil {
		return nil
	}
	if db.reg == nil {
		// The replay read the whole log: every erasure is known.
		defer db.healErasures()
	}
	return db.eraser.ResumePending(&eraseRuns{db: db}, db.bg.stop, ErrClosed, db.logger)
}

// keyLive reports whether KEYS holds a data key of run id that is not
// erased.
func (db *DB) keyLive(id string) bool { return db.eraser.Live(id) }

// healErasures finishes, on the background goroutine, the erasures of
// runs whose erase record the log holds while KEYS still holds their key
// live: a KEYS older than the erasure (restored from a copy). Called once
// the deletions the log holds are all known (checkRegistry); it does not
// wait.
func (db *DB) healErasures() {
	if db.keys == nil {
		return
	}
	db.mu.Lock()
	erased := db.mu.deleted.Erased()
	db.mu.Unlock()
	db.eraser.HealStale(&eraseRuns{db: db}, erased, db.bg.stop, ErrClosed, db.logger, db.setBackgroundErr, ErrClosed, wal.ErrClosed)
}

// eraseRuns is the DB as the erasure's Resumer and Runs (internal/erasure's
// resume.go and conduct.go), on the background goroutine; Target keeps
// what one erasure found of its run for Restore and Recorded.
type eraseRuns struct {
	db    *DB
	live  *Run            // the live run Target withdrew, if any
	prior *retention.Gone // the run's deletion, if it was deleted
	final chain.Hash      // the run's last link before the erasure
}

func (h *eraseRuns) Ready(ctx context.Context) error {
	if err := h.db.waitLedger(ctx); err != nil {
		return err
	}
	if err := h.db.checkRegistry(); err != nil {
		return err
	}
	h.db.startDirSyncs()
	return nil
}

func (h *eraseRuns) Lock()   { h.db.gc.Lock() }
func (h *eraseRuns) Unlock() { h.db.gc.Unlock() }

func (h *eraseRuns) Erased(run string) bool {
	h.db.mu.Lock()
	defer h.db.mu.Unlock()
	d, _ := h.db.mu.deleted.Get(run)
	return d != nil && d.Erasure != nil
}

func (h *eraseRuns) Finish(ctx context.Context, run string) error {
	return h.db.finishErasure(ctx, run)
}

func (h *eraseRuns) Track() func() {
	tok := h.db.track()
	return func() { h.db.untrack(tok) }
}

func (h *eraseRuns) Target(id string) (uint64, chain.Hash, bool, error) {
	db := h.db
	if err := db.logFailed(); err != nil {
		return 0, chain.Hash{}, false, fmt.Errorf("engine: erase: the log failed earlier; reopen the store: %w", err)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.mu.closed {
		return 0, chain.Hash{}, false, ErrClosed
	}
	db.allRunsLocked()
	var seq uint64
	if r := db.mu.runs[id]; r != nil {
		if err := deletableLocked(r, "erase"); err != nil {
			return 0, chain.Hash{}, false, err
		}
		r.mu.Lock()
		end, head, _ := r.chainHeadLocked()
		r.mu.Unlock()
		seq, h.final = end+1, head
		h.live = r
	} else if d, gone := db.mu.deleted.Get(id); gone && d != nil {
		if d.Erasure != nil {
			return 0, chain.Hash{}, true, nil
		}
		h.prior, seq, h.final = d, d.Seq+1, d.Head
	} else if gone {
		return 0, chain.Hash{}, false, fmt.Errorf("%w: erase run %q: it is being deleted", ErrRunDeleted, id)
	} else {
		return 0, chain.Hash{}, false, fmt.Errorf("engine: erase run %q: the store has no such run", id)
	}
	if fork := db.forkOfLocked(id); fork != "" {
		h.live = nil
		return 0, chain.Hash{}, false, fmt.Errorf("%w: erase run %q: run %q was forked from it and holds its state at the fork point; erase it first",
			ErrRunHasForks, id, fork)
	}
	if h.live != nil {
		db.withdrawLocked(true, h.live)
	}
	return seq, h.final, false, nil
}

func (h *eraseRuns) Restore(string) {
	if h.live != nil {
		h.db.restoreRuns(h.live)
	}
}

func (h *eraseRuns) Recorded(id string, er erasing.Erased) {
	db := h.db
	e := &retention.Erasure{Seq: er.Seq, Head: er.Head, At: er.At, Reason: er.Reason}
	d := h.prior
	if d == nil {
		d = &retention.Gone{Seq: e.Seq, Final: h.final, Head: e.Head, At: e.At, Reason: e.Reason, Parent: h.live.parent}
	}
	db.mu.Lock()
	db.mu.deleted.Mark(id, d.WithErasure(e))
	db.mu.Unlock()
	if h.live != nil {
		db.withdrawn(record.KindErase, ErrRunErased, h.live)
	}
}

func (h *eraseRuns) Unclean(id string, err error) {
	h.db.unclean.Store(true)
	h.db.logger.Warn("engine: erase: remove the mark of an erasure that failed", "run", id, "err", err)
}
