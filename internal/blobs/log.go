package blobs

// Reading blobs back under a run's sealers, and the log's references a
// sweep keeps: the engine's Core reads the log through References.

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Open opens the blob ref names, as run reads it, under the first of
// the run's readers (its data keys, then its ancestors') that opens it: a blob missing under every sealer
// matches blob.ErrNotFound, one damaged under one of them blob.ErrCorrupt
// (the first error that is not ErrNotFound wins). A run with no sealer
// left (erased) matches blob.ErrNotFound. The caller closes it.
func (s *Set) Open(run string, ref blob.Ref) (io.ReadCloser, error) {
	var first error
	st := s.store
	for _, sl := range s.readers(run) {
		br, err := st.Open(ref, sl)
		if err == nil {
			return br, nil
		}
		if first == nil || (errors.Is(first, blob.ErrNotFound) && !errors.Is(err, blob.ErrNotFound)) {
			first = err
		}
	}
	if first == nil {
		first = fmt.Errorf("%w: run %q has no data key left to read %v (erased)", blob.ErrNotFound, run, ref)
	}
	return nil, fmt.Errorf("engine: run %q: %w", run, first)
}

// LogReferences calls fn with every blob reference the records of log
// hold (decoded by dec, the ledger's records too; file names segments),
// but those of the runs dead returns, called once the log's cursor is
// open. It checks ctx every 1024 records.
func LogReferences(ctx context.Context, log *wal.Log, file func(seg uint64) string, dec *record.Decoder, dead func() map[string]bool, fn func(run string, ref blob.Ref)) error {
	cur, err := record.NewCursor(log, file, wal.Pos{}, dec)
	if err != nil {
		return fmt.Errorf("engine: sweep blobs: %w", err)
	}
	defer cur.Close()
	skip := dead()
	n := 0
	for cur.Next() {
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rec := cur.Record()
		if skip[rec.Run] {
			continue
		}
		if err := offline.RecordBlobRefs(dec, rec, file(rec.Pos.Segment), fn); err != nil {
			return fmt.Errorf("engine: sweep blobs: %w", err)
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("engine: sweep blobs: %w", err)
	}
	return nil
}

// Dead returns the runs of deleted (changed in place) whose records keep
// no blob alive: every deleted run but the ancestors of a live run (a
// fork's state holds its ancestors' references). parents are the live
// runs' parents ("": none); parentOf names any run's parent.
func Dead(deleted map[string]bool, parents []string, parentOf func(id string) string) map[string]bool {
	for _, p := range parents {
		for id := p; id != "" && deleted[id]; id = parentOf(id) {
			delete(deleted, id)
		}
	}
	return deleted
}
