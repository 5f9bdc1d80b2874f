package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/layout"
)

// The clean-close mark (layout.CleanName; docs/DESIGN.md, "Crash safety,
// operation by operation").

// takeCleanMark removes the mark Open found, before its first write.
func (db *DB) takeCleanMark() error {
	if !db.cleanMark {
		return nil
	}
	if err := layout.RemoveCleanMark(db.fs, db.dir); err != nil {
		return fmt.Errorf("engine: open: %w", err)
	}
	if !db.madeDirs {
		db.openInfo.CleanStart = true
		db.dirSync.Skip()
	}
	return nil
}

func (db *DB) hasCleanMark() bool { return layout.HasCleanMark(db.fs, db.dir) }

// markClean creates the mark at the end of a Close whose every step,
// write and fsync succeeded.
func (db *DB) markClean() {
	if db.opts.NoSync || db.dirSync.Err() != nil {
		return // NoSync, fsyncs that failed, or never started (ErrClosed)
	}
	if db.unclean.Load() || db.log.Stats().SpareFailures > 0 {
		return // a write or sync that failed and was only logged
	}
	if err := layout.CreateCleanMark(db.fs, db.dir); err != nil {
		db.logger.Warn("engine: close: the clean-close mark could not be created; the next Open fsyncs the store's directories", "err", err)
	}
}

// Close writes a final checkpoint, closes the store and releases its lock;
// atoms still running never happened (their actions stay in the ledger).
// Idempotent; it returns background work's first error, if any.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.mu.closed {
		db.mu.Unlock()
		return nil
	}
	db.mu.closed = true
	db.closed.Store(true)
	db.mu.Unlock()

	close(db.bg.stop)
	db.bg.wg.Wait()
	db.dict.Wait()

	var errs []error
	if err := db.backgroundErr(); err != nil {
		errs = append(errs, err)
	}
	// The final checkpoint rewrites the ledger table, loaded; a store
	// unchanged since Open keeps its CHECKPOINT.
	if db.unchanged() {
		db.logger.Debug("engine: close: nothing written since open; CHECKPOINT kept")
	} else if err := db.waitLedger(context.Background()); err != nil {
		errs = append(errs, err)
	} else {
		db.skipAbsentSnapshots()
		if err := db.checkpoint(true); err != nil {
			errs = append(errs, err)
		}
	}
	if err := db.closeSnapshots(); err != nil {
		errs = append(errs, fmt.Errorf("engine: close snapshots: %w", err))
	}
	if err := db.log.Close(); err != nil {
		errs = append(errs, fmt.Errorf("engine: close log: %w", err))
	}
	db.waits.Close() // internal/wait: WAITS unmapped
	// If the fsyncs started, their error, if any, failed the checkpoint.
	db.settleDirSyncs()
	if len(errs) == 0 {
		db.markClean()
	}
	if err := db.lock.Close(); err != nil {
		errs = append(errs, fmt.Errorf("engine: release lock: %w", err))
	}
	return errors.Join(errs...)
}
