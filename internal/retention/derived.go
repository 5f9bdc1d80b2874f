package retention

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// DropDerived removes the frame files of runs (a failure logged, and the
// store left without its clean-close mark: RemoveFrames) and their
// snapshots, if the store has a usable snapshot store (DropSnapshots),
// over Start's Env. It is retention.Core's and erasure's DropDerived,
// which the engine forwards here.
func (g *GC) DropDerived(ctx context.Context, runs map[string]bool) error {
	env := &g.env
	if RemoveFrames(env.FS, env.Frames, runs, env.FrameFile, env.NoSync, env.Logger) {
		env.Unclean.Store(true)
	}
	if !env.Snaps.Exists() {
		return nil // never created: no snapshot to delete (and none is created for it)
	}
	if snaps, err := env.Snaps.Usable(ctx); err == nil && snaps != nil {
		return DropSnapshots(snaps, runs, env.NoSync)
	}
	return nil
}

// LedgerRecords opens a cursor over the whole log that yields its intents
// and certificates still sealed (only their headers decoded: Env.Sealed),
// and open, which decodes one of them whole (Env.Decoder); the caller
// closes the cursor. It is erasure's Finisher.LedgerRecords.
func (g *GC) LedgerRecords() (*record.Cursor, func(sealed, into *record.Record) error, error) {
	env := &g.env
	cheap := env.Sealed()
	cheap.Skip = func(k record.Kind, _ []byte) bool { return k != record.KindIntent && k != record.KindCert }
	full := env.Decoder()
	cur, err := record.NewCursor(env.Log, env.File, wal.Pos{}, cheap)
	return cur, func(sealed, r *record.Record) error {
		return full.Decode(sealed.Raw, sealed.Pos, env.File(sealed.Pos.Segment), r)
	}, err
}

// RemoveFrames removes the frame files of runs (file names a run's frame
// file in dir) and, when it removed one, fsyncs dir unless noSync. They
// are derived and nothing reads them once their runs are deleted, so a
// failure is logged (logger), not returned: it reports whether one
// happened, and the store then leaves no clean-close mark.
func RemoveFrames(fs vfs.FS, dir string, runs map[string]bool, file func(run string) string, noSync bool, logger *slog.Logger) (failed bool) {
	ids := make([]string, 0, len(runs))
	for id := range runs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	removed := 0
	for _, id := range ids {
		err := fs.Remove(file(id))
		switch {
		case err == nil:
			removed++
		case !layout.NotExist(err):
			failed = true
			logger.Warn("engine: gc: remove the frame file of a deleted run", "run", id, "err", err)
		}
	}
	if removed > 0 && !noSync {
		if err := layout.SyncDir(fs, dir); err != nil {
			failed = true
			logger.Warn("engine: gc: sync the frames directory", "err", err)
		}
	}
	return failed
}

// DropSnapshots deletes the snapshots of runs from snaps in one batch,
// durable unless noSync. Their atom-index entries stay (the snapshot
// store has no way to delete them yet; verify ignores them once the run
// is reclaimed).
func DropSnapshots(snaps *snapshot.Store, runs map[string]bool, noSync bool) error {
	b := snaps.NewBatch()
	defer b.Discard()
	for id := range runs {
		seqs, err := snaps.Snapshots(id)
		if err != nil {
			return fmt.Errorf("snapshots of deleted run %q: %w", id, err)
		}
		for _, seq := range seqs {
			if err := b.DeleteSnapshot(id, seq); err != nil {
				return err
			}
		}
	}
	if b.Len() == 0 {
		return nil
	}
	if err := b.Commit(!noSync); err != nil {
		return fmt.Errorf("delete the snapshots of deleted runs: %w", err)
	}
	return nil
}
