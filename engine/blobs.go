package engine

// Blobs: large values outside the log (issue 41; package blob holds the
// format, this file conducts). A value of a delta above
// Options.BlobThreshold (a memory value, a tool output, a message's
// content or part text), and a certified result of Do above it, is written
// to the store's blob directory before the record that holds it, which
// holds in its place the blob's reference value (blob.Value: its hash,
// size and media type, chained with the record). Atom.PutBlob writes one
// from a stream. Run.OpenBlob reads one as a stream, checked chunk by
// chunk against the hash.
//
// In an encrypted store a run's blobs are sealed with its data key and
// named by a MAC under a key derived from it (record.BlobSealer): erasing
// the run makes them unreadable, and the next GC removes them.
//
// Crash safety: a blob is durable under its name (file fsync, rename,
// directory fsync: blob.Writer.Commit) before the record that references
// it is appended, so no durable record references a missing blob. A
// blob's liveness is the log's: GC's sweep keeps every blob a record in
// the log references (atoms' deltas, certificates' results) and every
// blob an atom in flight wrote and has not yet committed or failed; a
// crash between a blob's write and its record leaves an unreferenced blob,
// which the next sweep removes.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// blobState is what the engine keeps of blobs: the names of the blobs
// atoms in flight wrote or kept (a sweep keeps them), the writes in
// progress, and the lock that orders a sweep's removals against writers'
// commits.
//
// A sweep (SweepBlobs) must not remove a blob that a record appended
// after its scan of the log references. Every such blob is pending (held
// by an atom in flight) from before its record is appended until the atom
// is published: so a sweep keeps every name pending when it begins, every
// name released while it runs (released), and every name pending when it
// removes. Writers hold commit (read) around the creation of their
// temporary file, and from the blob's Commit (its rename) to its
// registration; a sweep holds it (write) from its last look at pending to
// its last removal: no blob or temporary file appears between the two
// unseen.
// Streaming a blob in holds no lock: a slow upload never stalls a sweep,
// nor, through one waiting, other writers.
type blobState struct {
	mu sync.Mutex
	// pending counts, per blob file name, the atoms in flight that wrote
	// or kept the blob; atoms lists the names each such atom holds;
	// writing counts the writers between Create and their registration
	// (their temporary files are not a crash's); released, while a sweep
	// runs (non-nil), the names released since it began. Guarded by mu.
	pending  map[string]int
	atoms    map[*Atom][]string
	writing  int
	released map[string]bool
	// commit orders writers' commits and registrations (RLock) against a
	// sweep's removals (Lock); taken before mu.
	commit sync.RWMutex
	// sweep serializes sweeps.
	sweep sync.Mutex
}

// blobStore is the store's blob directory.
func (db *DB) blobStore() *blob.Store { return blob.Open(db.fs, db.path(blob.Dir)) }

// blobSealer returns the sealer run's new blobs are written with: nil in a
// plaintext store.
func (db *DB) blobSealer(run string) (blob.Sealer, error) {
	if db.sealer == nil {
		return nil, nil
	}
	s := db.sealer.BlobSealers(run)
	if len(s) == 0 {
		return nil, fmt.Errorf("engine: run %q has no data key for its blobs (erased?)", run)
	}
	return s[0], nil
}

// blobReaders returns the sealers a blob referenced by run may be under:
// each data key of the run, then those of the runs it was forked from (a
// fork's frame holds its ancestors' references). One nil sealer in a
// plaintext store.
func (db *DB) blobReaders(run string) []blob.Sealer {
	if db.sealer == nil {
		return []blob.Sealer{nil}
	}
	var out []blob.Sealer
	seen := map[string]bool{}
	for id := run; id != "" && !seen[id]; {
		seen[id] = true
		for _, s := range db.sealer.BlobSealers(id) {
			out = append(out, s)
		}
		db.mu.Lock()
		p := db.runLocked(id)
		db.mu.Unlock()
		if p == nil {
			break
		}
		id = p.parent
	}
	return out
}

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
	db := r.db
	if err := db.checkOpen(); err != nil {
		return nil, err
	}
	var first error
	for _, s := range db.blobReaders(r.id) {
		br, err := db.blobStore().Open(ref, s)
		if err == nil {
			return br, nil
		}
		if first == nil || (errors.Is(first, blob.ErrNotFound) && !errors.Is(err, blob.ErrNotFound)) {
			first = err
		}
	}
	if first == nil {
		first = fmt.Errorf("%w: run %q has no data key left to read %v (erased)", blob.ErrNotFound, r.id, ref)
	}
	return nil, fmt.Errorf("engine: run %q: %w", r.id, first)
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
// unknown), in chunks (never whole in memory), durably, and returns its
// Ref: put blob.Value(ref) in the atom's delta (a memory value, a tool
// output, a message text) to reference it. The blob is kept while the
// atom is in flight and afterwards as long as a record references it; an
// atom that fails or never commits leaves it to the next GC. The same
// bytes under the same key are stored once.
func (a *Atom) PutBlob(ctx context.Context, media string, src io.Reader) (blob.Ref, error) {
	db := a.run.db
	if err := db.checkOpen(); err != nil {
		return blob.Ref{}, err
	}
	return db.writeBlob(ctx, a, media, src)
}

// blobCopyBuf is the read size of writeBlob: one chunk.
const blobCopyBuf = blob.ChunkSize

// writeBlob writes src as a blob of a's run and registers it as pending
// for a until a commits or fails.
func (db *DB) writeBlob(ctx context.Context, a *Atom, media string, src io.Reader) (blob.Ref, error) {
	r := a.run
	s, err := db.blobSealer(r.id)
	if err != nil {
		return blob.Ref{}, err
	}
	bs := &db.blobs
	// Counted as writing before its temporary file exists, under commit,
	// so that a sweep that removes temporary files sees none of a write
	// in progress.
	bs.commit.RLock()
	bs.mu.Lock()
	bs.writing++
	bs.mu.Unlock()
	defer func() {
		bs.mu.Lock()
		bs.writing--
		bs.mu.Unlock()
	}()
	w, err := db.blobStore().Create(s, media)
	bs.commit.RUnlock()
	if err != nil {
		return blob.Ref{}, fmt.Errorf("engine: run %q seq %d: %w", r.id, a.seq, err)
	}
	buf := make([]byte, 64<<10)
	for {
		if err := ctx.Err(); err != nil {
			_ = w.Abort()
			return blob.Ref{}, err
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				_ = w.Abort()
				return blob.Ref{}, fmt.Errorf("engine: run %q seq %d: %w", r.id, a.seq, err)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			_ = w.Abort()
			return blob.Ref{}, fmt.Errorf("engine: run %q seq %d: read the blob's source: %w", r.id, a.seq, rerr)
		}
	}
	bs.commit.RLock()
	defer bs.commit.RUnlock()
	ref, err := w.Commit()
	if err != nil {
		return blob.Ref{}, fmt.Errorf("engine: run %q seq %d: %w", r.id, a.seq, err)
	}
	db.holdBlob(a, blob.Name(ref.Hash, s))
	return ref, nil
}

// releaseBlobs forgets the pending blobs of a, which committed (its
// record holds their references) or failed.
func (db *DB) releaseBlobs(a *Atom) {
	bs := &db.blobs
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for _, n := range bs.atoms[a] {
		if bs.pending[n]--; bs.pending[n] <= 0 {
			delete(bs.pending, n)
		}
		if bs.released != nil {
			bs.released[n] = true
		}
	}
	delete(bs.atoms, a)
}

// keepBlob reports whether the blob ref names exists (its header and
// trailer agreeing with ref) for a's run, and if so holds it for a as
// PutBlob's are held (pending until a commits or fails): a reference
// copied from elsewhere in the state may be the last one left to a blob
// once another run's deletion is collected, and a sweep between this
// check and a's record must not remove it.
func (db *DB) keepBlob(a *Atom, ref blob.Ref) bool {
	bs := &db.blobs
	bs.commit.RLock()
	defer bs.commit.RUnlock()
	for _, s := range db.blobReaders(a.run.id) {
		br, err := db.blobStore().Open(ref, s)
		if err != nil {
			continue
		}
		_ = br.Close()
		db.holdBlob(a, blob.Name(ref.Hash, s))
		return true
	}
	return false
}

// holdBlob registers the blob file name as pending for a.
func (db *DB) holdBlob(a *Atom, name string) {
	bs := &db.blobs
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.pending == nil {
		bs.pending, bs.atoms = map[string]int{}, map[*Atom][]string{}
	}
	bs.pending[name]++
	bs.atoms[a] = append(bs.atoms[a], name)
}

// blobValue is the value v becomes in a record of a's: a reference value
// kept as it is if it names a blob of the run (from PutBlob or Do), else,
// if v is above Options.BlobThreshold or merely starts as a reference
// value does (so that it reads back as the bytes it was), the reference
// value of a new blob of v's bytes.
func (db *DB) blobValue(ctx context.Context, a *Atom, v []byte) (string, bool, error) {
	t := db.opts.BlobThreshold
	prefixed := blob.HasValuePrefix(v)
	if !prefixed && (t <= 0 || len(v) <= t) {
		return "", false, nil
	}
	if prefixed {
		if ref, ok := blob.ParseValueBytes(v); ok && db.keepBlob(a, ref) {
			return "", false, nil
		}
	}
	ref, err := db.writeBlob(ctx, a, "", bytes.NewReader(v))
	if err != nil {
		return "", false, err
	}
	return blob.Value(ref), true, nil
}

// blobDelta is the capability's prepare hook: d with its large values in
// blobs (blobValue).
func (db *DB) blobDelta(a *Atom, d *frame.Delta) (*frame.Delta, error) {
	return d.MapValues(func(v []byte) (string, bool, error) {
		return db.blobValue(context.Background(), a, v)
	})
}

// blobResult is the result exec returned as Do certifies it: in a blob
// when blobValue says so.
func (db *DB) blobResult(ctx context.Context, a *Atom, res []byte) ([]byte, error) {
	v, ok, err := db.blobValue(ctx, a, res)
	if err != nil || !ok {
		return res, err
	}
	return []byte(v), nil
}

// SweepBlobs removes the blobs no record of the log references and no
// atom in flight holds, and the temporary files of blob writes a crash
// interrupted that are not in progress now; GC calls it after its
// collection. It returns how many files it removed and their bytes.
func (db *DB) SweepBlobs(ctx context.Context) (files int, bytes int64, err error) {
	if err := db.checkOpen(); err != nil {
		return 0, 0, err
	}
	bs := &db.blobs
	bs.sweep.Lock()
	defer bs.sweep.Unlock()
	live := map[string]bool{}
	bs.mu.Lock()
	for n := range bs.pending {
		live[n] = true
	}
	bs.released = map[string]bool{}
	bs.mu.Unlock()
	defer func() {
		bs.mu.Lock()
		bs.released = nil
		bs.mu.Unlock()
	}()
	if err := db.liveBlobs(ctx, live); err != nil {
		return 0, 0, err
	}
	bs.commit.Lock()
	defer bs.commit.Unlock()
	bs.mu.Lock()
	for n := range bs.pending {
		live[n] = true
	}
	for n := range bs.released {
		live[n] = true
	}
	// With no write in progress every temporary file is a crash's or an
	// aborted write's; with one, they wait for a later sweep.
	temps := bs.writing == 0
	bs.mu.Unlock()
	return db.blobStore().Sweep(func(name string) bool { return live[name] }, temps)
}

// liveBlobs adds to live the names of the blobs the records of the log
// reference, under the sealer of each record's run.
func (db *DB) liveBlobs(ctx context.Context, live map[string]bool) error {
	dec := db.decoder(true)
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		return fmt.Errorf("engine: sweep blobs: %w", err)
	}
	defer c.Close()
	names := map[string][]blob.Sealer{}
	sealers := func(run string) []blob.Sealer {
		s, ok := names[run]
		if !ok {
			s = db.blobReaders(run)
			names[run] = s
		}
		return s
	}
	dead := db.deadForBlobs()
	n := 0
	for c.Next() {
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rec := c.Record()
		if dead[rec.Run] {
			continue
		}
		err := offline.RecordBlobRefs(dec, rec, db.segmentFile(rec.Pos.Segment), func(run string, ref blob.Ref) {
			for _, s := range sealers(run) {
				live[blob.Name(ref.Hash, s)] = true
			}
		})
		if err != nil {
			return fmt.Errorf("engine: sweep blobs: %w", err)
		}
	}
	if err := c.Err(); err != nil {
		return fmt.Errorf("engine: sweep blobs: %w", err)
	}
	return nil
}

// deadForBlobs returns the deleted runs whose records keep no blob alive:
// every deleted run but the ancestors of a run not deleted (a fork's state
// holds its ancestors' references).
func (db *DB) deadForBlobs() map[string]bool {
	dead := gcCore{db}.Deleted()
	live := db.runList()
	db.mu.Lock()
	defer db.mu.Unlock()
	parentOf := func(id string) string {
		if r := db.runLocked(id); r != nil {
			return r.parent
		}
		if d, ok := db.mu.deleted.Get(id); ok {
			return d.Parent
		}
		return ""
	}
	for _, r := range live {
		for id := r.parent; id != "" && dead[id]; id = parentOf(id) {
			delete(dead, id)
		}
	}
	return dead
}
