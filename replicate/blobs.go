package replicate

// Blobs (engine.BlobReplicator): each blob file of the store is an object
// of a JetStream Object Store bucket named after the store's stream, under
// its name in the store's directory ("blobs/<hex>"). A blob file's content
// never changes, so an object of its name and size is never put again.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/layout"
	"github.com/nats-io/nats.go/jetstream"
)

// blobBucket is the Object Store bucket of a store's blobs: its stream's
// name.
func blobBucket(store string) string { return streamName(store) }

// blobObject checks an object's or a blob file's name: "blobs/" and a
// committed blob file's name (64 lowercase hex digits), never a path out
// of the store.
func blobObject(name string) bool {
	h, ok := strings.CutPrefix(name, blob.Dir+"/")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// blobStoreLocked returns the store's blob bucket, created with the
// stream's replicas on file storage if it is missing (under blobMu).
func (r *Replicator) blobStoreLocked(ctx context.Context) (jetstream.ObjectStore, error) {
	if r.blobs != nil {
		return r.blobs, nil
	}
	bucket := blobBucket(r.cfg.Store)
	var obs jetstream.ObjectStore
	err := retry(ctx, r.cfg.Timeout, func(ctx context.Context) (err error) {
		obs, err = r.js.ObjectStore(ctx, bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			obs, err = r.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
				Bucket: bucket, Description: "CONTINUUM store " + r.cfg.Store + ": its blobs",
				Storage: jetstream.FileStorage, Replicas: r.cfg.Replicas,
			})
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("replicate: blob bucket %s: %w", bucket, err)
	}
	var st jetstream.ObjectStoreStatus
	err = retry(ctx, r.cfg.Timeout, func(ctx context.Context) (err error) {
		st, err = obs.Status(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("replicate: blob bucket %s: %w", bucket, err)
	}
	if st.Replicas() < MinReplicas || st.Storage() != jetstream.FileStorage {
		return nil, fmt.Errorf("%w: blob bucket %s has %d replicas on %s storage (at least %d on file needed)",
			ErrUnsafeStream, bucket, st.Replicas(), st.Storage(), MinReplicas)
	}
	r.blobs, r.blobHeld = obs, map[string]int64{}
	return obs, nil
}

// ReplicateBlob puts the blob file name of size bytes (engine.
// BlobReplicator) into the store's blob bucket, streamed from open, unless
// the bucket holds it whole (blobWholeLocked). It returns once the
// object is acknowledged whole (its chunks and then its metadata, each
// stored by the bucket's replicas), retrying until Config.Timeout. A
// fenced writer's call fails with ErrFenced.
func (r *Replicator) ReplicateBlob(name string, size int64, open func() (io.ReadCloser, error)) error {
	if !blobObject(name) {
		return fmt.Errorf("replicate: %q is not a blob file of the store", name)
	}
	if err := r.fencedErr(); err != nil {
		return err
	}
	r.blobMu.Lock()
	defer r.blobMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
	defer cancel()
	obs, err := r.blobStoreLocked(ctx)
	if err != nil {
		return err
	}
	if n, ok := r.blobHeld[name]; ok && n == size {
		return nil
	}
	whole, err := r.blobWholeLocked(ctx, obs, name, size)
	if err != nil {
		return err
	}
	if whole {
		r.blobHeld[name] = size
		return nil
	}
	for {
		err = func() error {
			f, err := open()
			if err != nil {
				return err
			}
			defer f.Close()
			info, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name}, f)
			if err == nil && int64(info.Size) != size {
				err = fmt.Errorf("the object holds %d bytes, the file %d", info.Size, size)
			}
			return err
		}()
		if err == nil {
			r.blobHeld[name] = size
			return nil
		}
		if !retryable(err) || storeFailed(err) || ctx.Err() != nil {
			// A Put that failed after its metadata landed (a chunk
			// refused) leaves an object whose chunks are purged: it goes,
			// so that neither a later writer's check nor a restore
			// takes it for the blob.
			// Retried as any API call (a busy cluster times one out); a
			// leftover is still never trusted (blobWholeLocked).
			derr := retry(context.Background(), r.cfg.Timeout, func(ctx context.Context) error {
				if err := obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
					return err
				}
				return nil
			})
			if derr != nil {
				r.cfg.Logger.Warn("replicate: a failed blob put's object could not be deleted", "store", r.cfg.Store, "blob", name, "err", derr)
			}
			return fmt.Errorf("replicate: store %s: put %s into bucket %s: %w", r.cfg.Store, name, blobBucket(r.cfg.Store), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// blobWholeLocked reports whether the bucket holds object name whole, of
// size bytes: its metadata (looked up by name: no listing of the bucket)
// gives that size, every chunk it counts is stored, and its chunks read
// back through the digest the metadata keeps (nats.go checks it at the
// end of the read). A failed put can leave metadata without its chunks
// (nats.go publishes it before every chunk is acknowledged) if deleting
// it failed too: that object is put again, never trusted by its name and
// size. Errors other than a missing object or a mismatch are the
// lookup's, after retries.
func (r *Replicator) blobWholeLocked(ctx context.Context, obs jetstream.ObjectStore, name string, size int64) (bool, error) {
	bucket := blobBucket(r.cfg.Store)
	var info *jetstream.ObjectInfo
	err := retry(ctx, r.cfg.Timeout, func(ctx context.Context) (err error) {
		info, err = obs.GetInfo(ctx, name)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			info, err = nil, nil
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("replicate: store %s: look up %s in bucket %s: %w", r.cfg.Store, name, bucket, err)
	}
	if info == nil || info.Deleted || int64(info.Size) != size || info.NUID == "" {
		return false, nil
	}
	// Every chunk the metadata counts is stored: a read of an object
	// missing some would wait for them until the timeout.
	subj := fmt.Sprintf(objChunkSubject, bucket, info.NUID)
	var stored uint64
	err = retry(ctx, r.cfg.Timeout, func(ctx context.Context) error {
		st, err := r.js.Stream(ctx, fmt.Sprintf(objStreamName, bucket))
		if err != nil {
			return err
		}
		si, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
		if err != nil {
			return err
		}
		stored = si.State.Subjects[subj]
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("replicate: store %s: count the chunks of %s in bucket %s: %w", r.cfg.Store, name, bucket, err)
	}
	if stored != uint64(info.Chunks) {
		r.cfg.Logger.Warn("replicate: a blob object lacks chunks: put again", "store", r.cfg.Store, "blob", name, "chunks", info.Chunks, "stored", stored)
		return false, nil
	}
	// One read, within the put's time (Config.Timeout), as a put is: a
	// large object outlasts an API call's attempt.
	var n int64
	res, err := obs.Get(ctx, name)
	if err == nil {
		n, err = io.Copy(io.Discard, res)
		res.Close()
	}
	if errors.Is(err, jetstream.ErrDigestMismatch) || (err == nil && n != size) {
		r.cfg.Logger.Warn("replicate: a blob object is not what its metadata says: put again", "store", r.cfg.Store, "blob", name, "err", err, "bytes", n)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("replicate: store %s: read %s back from bucket %s: %w", r.cfg.Store, name, bucket, err)
	}
	return true, nil
}

// The names nats.go gives an Object Store bucket's stream and an object's
// chunk subject (its objNameTmpl and objChunksPreTmpl).
const (
	objStreamName   = "OBJ_%s"
	objChunkSubject = "$O.%s.C.%s"
)

// fetchBlobs writes every object of the store's blob bucket that dir's
// blobs/ lacks into it (a restore, or a copy caught up from the stream:
// its blobs may be behind too): each through a temporary file, fsynced,
// checked against the hash its name is, then renamed; blobs/ fsynced
// after. A crash leaves whole blobs and temporary files a sweep removes.
// A bucket that does not exist is a store that never shipped a blob.
func (r *Replicator) fetchBlobs(ctx context.Context, dir string) error {
	bucket := blobBucket(r.cfg.Store)
	var obs jetstream.ObjectStore
	err := retry(ctx, r.cfg.Timeout, func(ctx context.Context) (err error) {
		obs, err = r.js.ObjectStore(ctx, bucket)
		return err
	})
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("replicate: blob bucket %s: %w", bucket, err)
	}
	var infos []*jetstream.ObjectInfo
	err = retry(ctx, r.cfg.Timeout, func(ctx context.Context) (err error) {
		infos, err = obs.List(ctx)
		if errors.Is(err, jetstream.ErrNoObjectsFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("replicate: list blob bucket %s: %w", bucket, err)
	}
	if len(infos) == 0 {
		return nil
	}
	bdir := filepath.Join(dir, blob.Dir)
	if _, err := os.Stat(bdir); err != nil {
		if err := os.MkdirAll(bdir, 0o700); err != nil {
			return fmt.Errorf("replicate: restore blobs: %w", err)
		}
		if err := layout.SyncDir(vfs.Default, dir); err != nil {
			return fmt.Errorf("replicate: restore blobs: %w", err)
		}
	}
	st := blob.Open(vfs.Default, bdir)
	n := 0
	for _, in := range infos {
		if !blobObject(in.Name) {
			return fmt.Errorf("replicate: blob bucket %s holds %q, not a blob file of the store", bucket, in.Name)
		}
		fname := strings.TrimPrefix(in.Name, blob.Dir+"/")
		if _, err := os.Stat(filepath.Join(bdir, fname)); err == nil {
			continue // a blob file's content never changes; the engine checks it as it reads
		}
		if err := r.fetchBlob(ctx, obs, st, bdir, fname); err != nil {
			var ce *damagedBlobError
			if !errors.As(err, &ce) {
				return err
			}
			// An object whose bytes are not the blob its name says (one
			// a failed put left, whose delete failed too) is no blob a
			// record references: a put's Ref is handed out only once its
			// object is whole. Skipped; Verify of the store finds any
			// referenced blob missing.
			r.cfg.Logger.Warn("replicate: a damaged blob object is skipped", "store", r.cfg.Store, "blob", in.Name, "err", err)
			r.restored.BlobsDamaged++
			continue
		}
		n++
		r.restored.Blobs++
	}
	if n > 0 {
		if err := layout.SyncDir(vfs.Default, bdir); err != nil {
			return fmt.Errorf("replicate: restore blobs: %w", err)
		}
	}
	return nil
}

// fetchBlob writes object blobs/fname into bdir: a temporary file, fsynced,
// checked, renamed.
func (r *Replicator) fetchBlob(ctx context.Context, obs jetstream.ObjectStore, st *blob.Store, bdir, fname string) error {
	name := blob.Dir + "/" + fname
	tmp := filepath.Join(bdir, "tmp-restore-"+fname[:16]) // a temporary file a sweep removes
	err := retry(ctx, r.cfg.Timeout, func(ctx context.Context) error {
		res, err := obs.Get(ctx, name)
		if err != nil {
			return err
		}
		defer res.Close()
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		// The object's reader checks its digest at its end.
		_, err = io.Copy(f, res)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err == nil {
		if verr := st.VerifyAs(filepath.Base(tmp), fname); verr != nil {
			err = &damagedBlobError{verr}
		}
	} else if errors.Is(err, jetstream.ErrDigestMismatch) {
		err = &damagedBlobError{err}
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replicate: restore blob %s from bucket %s: %w", name, blobBucket(r.cfg.Store), err)
	}
	if err := os.Rename(tmp, filepath.Join(bdir, fname)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replicate: restore blob %s: %w", name, err)
	}
	return nil
}

// damagedBlobError is an object whose bytes are not those of the blob its
// name says.
type damagedBlobError struct{ err error }

func (e *damagedBlobError) Error() string { return "damaged: " + e.err.Error() }
func (e *damagedBlobError) Unwrap() error { return e.err }

// errCodeStoreFailed is JetStream's "store failed" (JSStreamStoreFailedF:
// a limit of the bucket's stream, as maximum bytes exceeded), a 503 that no
// retry mends.
const errCodeStoreFailed jetstream.ErrorCode = 10077

func storeFailed(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeStoreFailed
}
