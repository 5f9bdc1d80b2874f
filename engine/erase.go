package engine

// Erasing a run (crypto-shredding; docs/DESIGN.md, "Erasing a run"):
// internal/erasure conducts it (Eraser.Erase, EraseRun, Finish); this file
// is the API, eraseRuns (the DB as its Runs and Resumer) and the
// resumption at Open of the erasures a crash interrupted.

import (
	"context"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/internal/retention"
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

// Erase erases the ended (or deleted) run id of an encrypted store: it
// deletes the run if it is not deleted yet, and destroys its content by
// dropping its data key (docs/DESIGN.md, "Erasing a run", says what that
// reaches). It returns once the erasure is complete; Erase of an erased
// run returns its erasure. reason is recorded in the erase record (at
// most MaxDeleteReason bytes; "" records "erased by request").
//
// It fails with ErrKeyring on a plaintext store (delete the run and
// collect with Options.CompactDead instead), ErrRunNotEnded for an active
// run, and ErrRunHasForks while a fork of the run is not erased.
func (db *DB) Erase(ctx context.Context, id, reason string) (DeletedRun, error) {
	if err := db.checkOpen(); err != nil {
		return DeletedRun{}, err
	}
	d, err := db.eraser.Erase(ctx, (*eraseRuns)(db), id, reason, db.bg.stop)
	if err != nil {
		return DeletedRun{}, err
	}
	return deletedRun(id, d), nil
}

// finishErasures finishes, at Open, the erasures a crash interrupted: a
// key marked erasing whose run has an erase record has its erasure
// finished; one whose run has none is live again.
func (db *DB) finishErasures() error {
	if db.keys == nil {
		return nil
	}
	if db.reg == nil {
		// The replay read the whole log: every erasure is known.
		defer db.healErasures()
	}
	return db.eraser.ResumePending((*eraseRuns)(db), db.bg.stop, ErrClosed, db.logger)
}

// keyLive reports whether KEYS holds a data key of run id that is not
// erased.
func (db *DB) keyLive(id string) bool { return db.eraser.Live(id) }

// healErasures finishes in the background the erasures of runs the log
// erases whose key KEYS holds live (a KEYS older than the erasure, restored
// from a copy), once the log's deletions are all known (checkRegistry).
func (db *DB) healErasures() {
	if db.keys == nil {
		return
	}
	db.mu.Lock()
	erased := db.mu.deleted.Erased()
	db.mu.Unlock()
	db.eraser.HealStale((*eraseRuns)(db), erased, db.bg.stop, ErrClosed, db.logger, db.setBackgroundErr, ErrClosed, wal.ErrClosed)
}

// eraseRuns is the DB as the erasure's Runs and Resumer
// (internal/erasure's conduct.go and resume.go), on the background
// goroutine.
type eraseRuns DB

func (h *eraseRuns) Ready(ctx context.Context) error {
	db := (*DB)(h)
	if err := db.waitLedger(ctx); err != nil {
		return err
	}
	if err := db.checkRegistry(); err != nil {
		return err
	}
	db.startDirSyncs()
	return nil
}

func (h *eraseRuns) Lock()                 { h.gc.Lock() }
func (h *eraseRuns) Unlock()               { h.gc.Unlock() }
func (h *eraseRuns) Table() retention.Runs { return (*tableRuns)(h) }

func (h *eraseRuns) Deletion(run string) *retention.Gone {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, _ := h.mu.deleted.Get(run)
	return d
}

func (h *eraseRuns) Finish(ctx context.Context, run string) error {
	return h.eraser.Finish(ctx, gcCore{(*DB)(h)}, run)
}

func (h *eraseRuns) Unclean(id string, err error) {
	h.unclean.Store(true)
	h.logger.Warn("engine: erase: remove the mark of an erasure that failed", "run", id, "err", err)
}
