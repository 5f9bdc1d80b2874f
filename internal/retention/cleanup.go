package retention

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
)

// RemoveLeftovers removes the leftovers of failed attempts: the temporary
// files (name.tmp) of dir and of subdirs (frames/, dicts/: paths), and,
// when cp is not nil (Open found a valid CHECKPOINT, which names ledger
// table cp.LedgerGen), dir's ledger tables other than that one.
// Without one (none yet, or one Open ignored as damaged) every table is
// kept: the next checkpoint numbers its own above them. A directory that
// does not exist is skipped. The caller holds the store's lock, so no
// writer of it runs. It returns how many files it removed, and every
// failure to list or remove (the store works without, but the space stays
// taken).
func RemoveLeftovers(fs vfs.FS, dir string, subdirs []string, cp *layout.Checkpoint) (int, error) {
	var errs []error
	n := 0
	for _, d := range append([]string{dir}, subdirs...) {
		names, err := fs.List(d)
		if err != nil {
			if layout.NotExist(err) {
				continue
			}
			errs = append(errs, fmt.Errorf("engine: list %s: %w", d, layout.UnwrapPathErr(err)))
			continue
		}
		for _, name := range names {
			stale := layout.IsTempName(name)
			if d == dir {
				if gen, ok := layout.ParseLedgerTableName(name); ok && cp != nil && gen != cp.LedgerGen {
					stale = true
				}
			}
			if !stale {
				continue
			}
			p := fs.PathJoin(d, name)
			if err := fs.Remove(p); err != nil && !layout.NotExist(err) {
				errs = append(errs, fmt.Errorf("engine: remove leftover %s: %w", p, layout.UnwrapPathErr(err)))
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}
