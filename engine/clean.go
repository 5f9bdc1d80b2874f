package engine

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/durable"
	"github.com/continuumdb/continuum/layout"
)

// The clean-close mark (layout.CleanName) spares the first write after a
// restart the directories' fsyncs (startDirSyncs), the look for leftovers
// and the fdatasync of the newest segment; docs/DESIGN.md ("Crash safety,
// operation by operation") says why that is safe.

// takeCleanMark removes the mark Open found before its first write, and
// notes that the directories need no fsync unless mkdirs created one.
func (db *DB) takeCleanMark() error {
	name := db.path(layout.CleanName)
	if !db.cleanMark {
		return nil
	}
	if err := db.fs.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("engine: open: remove the clean-close mark %s: %w", name, layout.UnwrapPathErr(err))
	}
	if !db.madeDirs {
		db.openInfo.CleanStart = true
		db.dirsOnce.Do(func() { close(db.dirsSynced) })
	}
	return nil
}

// hasCleanMark reports whether the store has its clean-close mark (a Stat:
// errorfs's Remove reports no missing file; any error counts as no mark).
func (db *DB) hasCleanMark() bool {
	_, err := db.fs.Stat(db.path(layout.CleanName))
	return err == nil
}

// markClean creates the mark at the end of a Close whose every step
// succeeded, once the directory fsyncs are settled (settleDirSyncs), if
// no write or fsync failed and the store's entries are all durable.
func (db *DB) markClean() {
	if db.opts.NoSync || db.dirsErr != nil {
		return // NoSync, fsyncs that failed, or never started (ErrClosed)
	}
	if db.unclean.Load() || db.log.Stats().SpareFailures > 0 {
		return // a write or sync that failed and was only logged
	}
	f, err := durable.Create(db.fs, db.path(layout.CleanName), vfs.WriteCategoryUnspecified)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		db.logger.Warn("engine: close: the clean-close mark could not be created; the next Open fsyncs the store's directories", "file", db.path(layout.CleanName), "err", err)
	}
}

// Close writes a final engine checkpoint (so that the next Open replays
// nothing), closes Pebble and the log, and releases the lock. Atoms still
// running are abandoned: they never happened, and their actions stay in
// the ledger. Close is idempotent; it returns the first error of
// background work, if any.
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
	// The final checkpoint needs the ledger table loaded (it rewrites it).
	// A store written nothing since an Open that replayed nothing keeps
	// its CHECKPOINT, still exact.
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
	db.waitsClose() // waitcore.go: WAITS unmapped
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
