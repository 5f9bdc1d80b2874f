package engine

// Blobs: large values outside the log (docs/DESIGN.md, "Blobs: large
// values outside the log"). Package blob holds the format and the files,
// internal/blobs the bookkeeping; this file is the public methods and
// blobCore, the DB as internal/blobs' Core.

import (
	"bytes"
	"context"
	"io"

	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/internal/blobs"
	"github.com/continuumdb/continuum/internal/replication"
)

// OpenBlob opens the blob ref names, as run id sees it (under its keys, or
// its ancestors' in an encrypted store), for reading: every chunk is
// checked against ref's hash before a byte of it is returned. A blob that
// is missing matches blob.ErrNotFound; one that is damaged, blob.ErrCorrupt.
// The caller closes it.
func (db *DB) OpenBlob(ctx context.Context, id string, ref blob.Ref) (io.ReadCloser, error) {
	r, err := db.existingRun(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.OpenBlob(ctx, ref)
}

// OpenBlob is DB.OpenBlob of r.
func (r *Run) OpenBlob(ctx context.Context, ref blob.Ref) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := r.db.checkOpen(); err != nil {
		return nil, err
	}
	return r.db.blobs.Open(r.id, ref)
}

// OpenValue opens a value of r's state (a memory value, a tool output, a
// message text) as a stream: the blob it refers to if it is a reference
// value (blob.Value), else its own bytes.
func (r *Run) OpenValue(ctx context.Context, v []byte) (io.ReadCloser, error) {
	if ref, ok := blob.ParseValueBytes(v); ok {
		return r.OpenBlob(ctx, ref)
	}
	return io.NopCloser(bytes.NewReader(v)), nil
}

// PutBlob writes what src yields as a blob of media type media ("" when
// unknown), in chunks, durably, and returns its Ref: put blob.Value(ref)
// in the atom's delta to reference it. The blob is kept while the atom is
// in flight and afterwards while a record references it; the same bytes
// under the same key are stored once.
func (a *Atom) PutBlob(ctx context.Context, media string, src io.Reader) (blob.Ref, error) {
	db := a.run.db
	if err := db.checkOpen(); err != nil {
		return blob.Ref{}, err
	}
	return db.blobs.Write(ctx, a.blobHolder(), media, src)
}

// SweepBlobs removes the blobs no record of the log references and no
// atom in flight holds, and the temporary files of blob writes a crash
// interrupted; GC calls it after its collection. It returns how many files
// it removed and their bytes.
func (db *DB) SweepBlobs(ctx context.Context) (files int, bytes int64, err error) {
	if err := db.checkOpen(); err != nil {
		return 0, 0, err
	}
	return db.blobs.Sweep(ctx)
}

func (a *Atom) blobHolder() blobs.Holder { return blobs.Holder{Key: a, Run: a.run.id, Seq: a.seq} }

// newBlobs makes the DB's blobs.Set: blobCore, the store's blob directory,
// and the Replicator's ReplicateBlob if it ships blobs.
func newBlobs(db *DB) *blobs.Set {
	cfg := blobs.Config{FS: db.fs, Dir: db.path(blob.Dir), Threshold: db.opts.BlobThreshold}
	if rep := db.opts.Replicator; replication.Blobs(rep) {
		cfg.Ship = func(name string) error { return replication.Blob(rep, db.fs, db.dir, name) }
	}
	return blobs.New(blobCore{db}, cfg)
}

// blobCore is the DB as internal/blobs' Core.
type blobCore struct{ db *DB }

func (c blobCore) Sealers(run string) ([]blob.Sealer, bool) {
	if c.db.sealer == nil {
		return nil, false
	}
	var out []blob.Sealer
	for _, s := range c.db.sealer.BlobSealers(run) {
		out = append(out, s)
	}
	return out, true
}

func (c blobCore) Parent(run string) (string, bool) {
	c.db.mu.Lock()
	defer c.db.mu.Unlock()
	if r := c.db.runLocked(run); r != nil {
		return r.parent, true
	}
	return "", false
}

func (c blobCore) References(ctx context.Context, fn func(run string, ref blob.Ref)) error {
	db := c.db
	return blobs.LogReferences(ctx, db.log, db.segmentFile, db.decoder(true), db.deadForBlobs, fn)
}

// deadForBlobs is blobs.Dead of the store's deleted runs.
func (db *DB) deadForBlobs() map[string]bool {
	dead := gcCore{db}.Deleted()
	live := db.runList()
	db.mu.Lock()
	defer db.mu.Unlock()
	parents := make([]string, len(live))
	for i, r := range live {
		parents[i] = r.parent
	}
	return blobs.Dead(dead, parents, func(id string) string {
		if r := db.runLocked(id); r != nil {
			return r.parent
		}
		if d, ok := db.mu.deleted.Get(id); ok {
			return d.Parent
		}
		return ""
	})
}
