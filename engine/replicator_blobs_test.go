package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
)

// blobReplica is a memReplica that also ships blobs (a BlobReplicator):
// it keeps each blob file's bytes, read through open, and counts its
// calls by name.
type blobReplica struct {
	memReplica
	blobs    map[string][]byte
	calls    map[string]int
	blobFail error
}

func (m *blobReplica) ReplicateBlob(name string, size int64, open func() (io.ReadCloser, error)) error {
	f, err := open()
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	if int64(len(b)) != size {
		return fmt.Errorf("%s: read %d bytes, size %d", name, len(b), size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls == nil {
		m.calls = map[string]int{}
	}
	if m.blobs == nil {
		m.blobs = map[string][]byte{}
	}
	m.calls[name]++
	if m.blobFail != nil {
		return m.blobFail
	}
	m.blobs[name] = b
	m.order = append(m.order, "blob "+name)
	return nil
}

// TestReplicatorShipsBlobs: PutBlob ships each new blob once, with the
// file's bytes, before it returns the Ref (and so before any record that
// references it); a put of the same bytes ships nothing; a failed ship
// fails the put and leaves nothing referencing the blob; Open ships every
// blob file; a store rebuilt from the replica reads every blob back and
// verifies clean.
func TestReplicatorShipsBlobs(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	rep := &blobReplica{}
	opts := &Options{FS: fs, NoSync: true, DictSamples: -1, BlobThreshold: 1 << 10, Replicator: rep}
	db, err := Open("s", opts)
	if err != nil {
		t.Fatal(err)
	}
	run, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	contents := map[string][]byte{}
	for i, n := range []int{0, 1, 3 << 19} {
		data := blobBytes(uint64(i), n)
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := a.PutBlob(ctx, "", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		name := blob.Dir + "/" + blob.Name(ref.Hash, nil)
		local, err := layout.ReadFile(fs, "s/"+name)
		if err != nil {
			t.Fatal(err)
		}
		// Shipped by the time the Ref is handed out, with the file's bytes.
		rep.mu.Lock()
		got, calls := rep.blobs[name], rep.calls[name]
		rep.mu.Unlock()
		if calls != 1 || !bytes.Equal(got, local) {
			t.Fatalf("blob of %d bytes: %d calls, replica holds %d bytes, local file %d", n, calls, len(got), len(local))
		}
		// The same bytes again, in the same atom: stored and shipped once.
		if _, err := a.PutBlob(ctx, "", bytes.NewReader(data)); err != nil || rep.calls[name] != 1 {
			t.Fatalf("a put of the same bytes: %v, %d calls", err, rep.calls[name])
		}
		if err := a.Commit(ctx, new(frame.Delta).Set(fmt.Sprint("k", i), []byte(blob.Value(ref)))); err != nil {
			t.Fatal(err)
		}
		contents[fmt.Sprint("k", i)] = data
	}
	// Each blob came before the record that references it: blob, append,
	// blob, append, ...
	rep.mu.Lock()
	var seen []string
	for _, o := range rep.order {
		if !strings.HasPrefix(o, "file ") {
			seen = append(seen, strings.Fields(o)[0])
		}
	}
	rep.mu.Unlock()
	for len(seen) > 0 && seen[0] == "append" { // the run's creation
		seen = seen[1:]
	}
	if strings.Join(seen, ",") != "blob,append,blob,append,blob,append" {
		t.Fatalf("the replica was given %v, want each blob before the record that references it", seen)
	}

	// A failing replica fails the put; nothing references its blob.
	boom := errors.New("replica down")
	rep.mu.Lock()
	rep.blobFail = boom
	rep.mu.Unlock()
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lost := blobBytes(99, 5000)
	if _, err := a.PutBlob(ctx, "", bytes.NewReader(lost)); !errors.Is(err, boom) || !strings.Contains(err.Error(), "replicate blob") {
		t.Fatalf("PutBlob with a failing replica: %v, want %v, saying replicate blob", err, boom)
	}
	// A large value of a commit goes the same way: the commit fails.
	if err := a.Commit(ctx, new(frame.Delta).Set("big", blobBytes(98, 4000))); !errors.Is(err, boom) {
		t.Fatalf("Commit of a large value with a failing replica: %v, want %v", err, boom)
	}
	rep.mu.Lock()
	rep.blobFail = nil
	rep.mu.Unlock()
	if err := a.Commit(ctx, new(frame.Delta).Set("small", []byte("no reference"))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.SweepBlobs(ctx); err != nil {
		t.Fatal(err)
	}
	lostName := blob.Dir + "/" + blob.Name(blob.Hash(lost), nil)
	if _, err := fs.Stat("s/" + lostName); err == nil {
		t.Fatal("the blob whose ship failed is still here after its atom ended and a sweep")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	verifyDeep(t, fs, nil)

	// Open ships the blob files the mark of shipped blobs lacks: one a
	// crash kept from the replica (committed here, never shipped), not
	// the three the replica acknowledged.
	orphan := func(s string) blob.Ref {
		t.Helper()
		w, err := blob.Open(fs, "s/"+blob.Dir).Create(nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		ref, err := w.Commit()
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	o := orphan("written, never shipped")
	rep.calls = nil
	db, err = Open("s", opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if len(rep.calls) != 1 || rep.calls[blob.Dir+"/"+blob.Name(o.Hash, nil)] != 1 {
		t.Fatalf("Open shipped %v, want the one blob file never shipped", rep.calls)
	}
	rep.calls = nil
	db, err = Open("s", opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if len(rep.calls) != 0 {
		t.Fatalf("Open of a store whose blobs are all marked shipped %v", rep.calls)
	}
	orphan("another, never shipped")
	rep.mu.Lock()
	rep.blobFail = boom
	rep.mu.Unlock()
	if _, err := Open("s", opts); !errors.Is(err, boom) {
		t.Fatalf("Open with a replica that refuses blobs: %v, want %v", err, boom)
	}
	rep.blobFail = nil

	// A store rebuilt from the replica alone: every blob back, verify clean.
	fs2 := vfs.NewMem()
	rep.rebuild(t, fs2, "s")
	if err := fs2.MkdirAll("s/"+blob.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range rep.blobs {
		if err := layout.WriteFileAtomic(fs2, "s/"+name, bytes.Clone(b), false); err != nil {
			t.Fatal(err)
		}
	}
	verifyDeep(t, fs2, nil)
	db2, err := Open("s", &Options{FS: fs2, NoSync: true, DictSamples: -1, BlobThreshold: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	r2, err := db2.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range contents {
		if got := readValue(t, r2, r2.State().Memory[k]); !bytes.Equal(got, want) {
			t.Fatalf("%s read back %d bytes, want %d", k, len(got), len(want))
		}
	}
}
