package engine

// Leftovers of failed attempts. A write that failed (a full disk, an I/O
// error) or a process that died in the middle of one leaves a temporary
// file (name.tmp) and, for an engine checkpoint that failed after writing
// its ledger table, a table no CHECKPOINT names. They hold disk space that
// a store short of it needs back, so a writable Open removes them: it
// holds the lock, so no writer of this store is running.

import (
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/layout"
)

// removeLeftovers removes the temporary files of the store's directory,
// frames/ and dicts/, and, when Open found a valid CHECKPOINT (cp), the
// ledger tables other than the one it names. Without one (none yet, or
// one Open ignored as damaged) every table is kept: the next checkpoint
// numbers its own above them. The log's own leftovers are the log's
// (wal.Open). It returns how many files it removed. A failure to remove is
// returned: the store works without, but the space stays taken.
func (db *DB) removeLeftovers(cp *layout.Checkpoint) (int, error) {
	var errs []error
	n := 0
	for _, dir := range []string{db.dir, db.path(layout.FramesDir), db.path(layout.DictsDir)} {
		names, err := db.fs.List(dir)
		if err != nil {
			if layout.NotExist(err) {
				continue
			}
			errs = append(errs, fmt.Errorf("engine: list %s: %w", dir, layout.UnwrapPathErr(err)))
			continue
		}
		for _, name := range names {
			stale := layout.IsTempName(name)
			if dir == db.dir {
				if gen, ok := layout.ParseLedgerTableName(name); ok && cp != nil && gen != cp.LedgerGen {
					stale = true
				}
			}
			if !stale {
				continue
			}
			p := db.fs.PathJoin(dir, name)
			if err := db.fs.Remove(p); err != nil && !layout.NotExist(err) {
				errs = append(errs, fmt.Errorf("engine: remove leftover %s: %w", p, layout.UnwrapPathErr(err)))
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}
