package replicate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/nats-io/nats.go/jetstream"
)

// putBlobs puts a blob of each size in its own atom of run, committing its
// reference under key "b<size>", and returns the bytes by key.
func putBlobs(t *testing.T, run *engine.Run, rng *rand.Rand, sizes ...int) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, n := range sizes {
		data := make([]byte, n)
		rng.Read(data)
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := a.PutBlob(ctx, "application/octet-stream", bytes.NewReader(data))
		if err != nil {
			t.Fatalf("PutBlob of %d bytes: %v", n, err)
		}
		k := fmt.Sprint("b", n)
		if err := a.Commit(ctx, new(frame.Delta).Set(k, []byte(blob.Value(ref)))); err != nil {
			t.Fatal(err)
		}
		out[k] = data
	}
	return out
}

// checkBlobs reads every blob of want back through run's state.
func checkBlobs(t *testing.T, run *engine.Run, want map[string][]byte) {
	t.Helper()
	st := run.State()
	for k, data := range want {
		rc, err := run.OpenValue(ctx, st.Memory[k])
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: read %d bytes (%v), want the %d put", k, len(got), err, len(data))
		}
	}
}

// TestBlobsRestored: blobs of 0, 1 and more than one chunk's bytes, put
// and referenced on node a, are in the store's blob bucket when PutBlob
// returns; a restore on node b writes them back byte for byte and the
// restored store verifies clean; a blob the bucket refuses fails PutBlob
// and nothing references it.
func TestBlobsRestored(t *testing.T) {
	c := newCluster(t, true)
	seed := rand.Int63()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))

	ra, dba, _ := open(t, c, "bl", "a", 0, false)
	run, err := dba.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	want := putBlobs(t, run, rng, 0, 1, blob.ChunkSize+blob.ChunkSize/2)
	// A second put of bytes already shipped is stored and shipped once.
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.PutBlob(ctx, "", bytes.NewReader(want["b1"])); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("x", []byte("y"))); err != nil {
		t.Fatal(err)
	}
	obs, err := ra.js.ObjectStore(ctx, blobBucket("bl"))
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(ctx)
	if err != nil || len(infos) != 3 {
		t.Fatalf("the blob bucket holds %d objects (%v), want 3", len(infos), err)
	}
	if err := dba.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ra.Close(); err != nil {
		t.Fatal(err)
	}

	rb, dbb, dirb := open(t, c, "bl", "b", 1, false)
	if got := rb.Restored(); got.Path != PathRestored || got.Blobs != 3 {
		t.Fatalf("node b: %+v, want a restore with 3 blobs", got)
	}
	runb, err := dbb.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	checkBlobs(t, runb, want)

	// A bucket that refuses an object (over its byte limit) fails
	// PutBlob, and the object it leaves is deleted.
	cfg := jetstream.ObjectStoreConfig{Bucket: blobBucket("bl"), Storage: jetstream.FileStorage, Replicas: 3, MaxBytes: 4 << 20}
	if _, err := rb.js.UpdateObjectStore(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 5<<20)
	rng.Read(big)
	ab, err := runb.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err = ab.PutBlob(ctx, "", bytes.NewReader(big))
	if err == nil || !strings.Contains(err.Error(), "replicate") {
		t.Fatalf("PutBlob into a full bucket: %v, want an error saying replicate", err)
	}
	t.Logf("PutBlob into a full bucket failed after %v: %v", time.Since(t0), err)
	err = retry(ctx, time.Minute, func(ctx context.Context) error { // a busy cluster may time a lookup out
		_, err := obs.GetInfo(ctx, blob.Dir+"/"+blob.Name(blob.Hash(big), nil))
		return err
	})
	if !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Fatalf("the failed put's object: %v, want it deleted", err)
	}
	if err := ab.Commit(ctx, new(frame.Delta).Set("after", []byte("the failed put"))); err != nil {
		t.Fatal(err)
	}
	closeAndVerify(t, dbb, rb, dirb, "verify of the restored store")

	// An object that is not the blob its name says (a failed put's
	// leftover whose delete failed) is skipped by a restore.
	if _, err := rb.js.UpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: blobBucket("bl"), Storage: jetstream.FileStorage, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutString(ctx, blob.Dir+"/"+strings.Repeat("ab", 32), "not a blob"); err != nil {
		t.Fatal(err)
	}

	// Restored again elsewhere: the same blobs, verify clean.
	rc, dbc, dirc := open(t, c, "bl", "c", 2, false)
	if got := rc.Restored(); got.Blobs != 3 || got.BlobsDamaged != 1 {
		t.Fatalf("node c: %+v, want a restore with 3 blobs, 1 damaged", got)
	}
	runc, err := dbc.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	checkBlobs(t, runc, want)
	closeAndVerify(t, dbc, rc, dirc, "verify of the second restored store")
}

// TestBlobJunkObject: an object a failed put left (its metadata, with the
// blob's name and size and digest, but not its chunks), whose delete
// failed too, is not taken for the blob: the next ReplicateBlob of that
// name, from a new Replicator (Open ships the blob again once the mark of
// shipped blobs is gone), checks the object and puts the blob again. The
// engine's mark makes the Open after ship nothing.
func TestBlobJunkObject(t *testing.T) {
	c := newCluster(t, true)
	seed := rand.Int63()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))

	ra, dba, dir := open(t, c, "junk", "a", 0, false)
	run, err := dba.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	want := putBlobs(t, run, rng, blob.ChunkSize+blob.ChunkSize/2)
	if err := dba.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ra.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(filepath.Join(dir, blob.Dir))
	if err != nil {
		t.Fatal(err)
	}
	var name string
	for _, e := range names {
		if len(e.Name()) == 64 {
			name = blob.Dir + "/" + e.Name()
		}
	}
	local, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil || name == "" {
		t.Fatalf("the blob file %q: %v", name, err)
	}

	// The junk: the object's chunks purged, its metadata left.
	js, err := jetstream.New(c.connect("app", 1))
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(ctx, blobBucket("junk"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := obs.GetInfo(ctx, name)
	if err != nil || int64(info.Size) != int64(len(local)) {
		t.Fatalf("the object: %+v %v, want %d bytes", info, err, len(local))
	}
	st, err := js.Stream(ctx, fmt.Sprintf(objStreamName, blobBucket("junk")))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(fmt.Sprintf(objChunkSubject, blobBucket("junk"), info.NUID))); err != nil {
		t.Fatal(err)
	}

	// Open with the mark: nothing shipped, the junk untouched.
	ra, dba = openAt(t, c, "junk", "a", 0, false, dir)
	if err := dba.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ra.Close(); err != nil {
		t.Fatal(err)
	}
	if again, err := obs.GetInfo(ctx, name); err != nil || again.NUID != info.NUID {
		t.Fatalf("an Open whose blobs are all marked touched the object: %+v %v", again, err)
	}

	// Without the mark: shipped again, the junk found and replaced.
	if err := os.Remove(filepath.Join(dir, blob.Dir, "SHIPPED")); err != nil {
		t.Fatal(err)
	}
	ra, dba = openAt(t, c, "junk", "a", 0, false, dir)
	if again, err := obs.GetInfo(ctx, name); err != nil || again.NUID == info.NUID {
		t.Fatalf("the junk object is still there after Open shipped its blob: %+v %v", again, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := obs.Get(rctx, name)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res)
	res.Close()
	if err != nil || !bytes.Equal(got, local) {
		t.Fatalf("the object read back: %d bytes (%v), want the file's %d", len(got), err, len(local))
	}
	run, err = dba.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	checkBlobs(t, run, want)
	closeAndVerify(t, dba, ra, dir, "verify after the junk object was replaced")
}
