package replication

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

// Replicator is engine.Replicator's method set.
type Replicator interface {
	Replicate(appends [][][]byte) error
	ReplicateFile(name string, data []byte) error
}

// Positioned is engine.PositionedReplicator's method set.
type Positioned interface {
	Replicator
	ReplicateAt(start wal.Pos, appends [][][]byte) error
}

// Hook is the log's Options.Replicate for r, or nil when r is nil; end is
// the log's durable end.
func Hook(r Replicator, end func() wal.Pos) func([][][]byte) error {
	switch r := r.(type) {
	case nil:
		return nil
	case Positioned:
		return func(appends [][][]byte) error { return r.ReplicateAt(end(), appends) }
	default:
		return r.Replicate
	}
}

// Files gives r STORE and every dictionary of the store in dir.
func Files(r Replicator, fs vfs.FS, dir string) error {
	if r == nil {
		return nil
	}
	names := []string{layout.StoreName}
	dictDir := fs.PathJoin(dir, layout.DictsDir)
	dicts, err := fs.List(dictDir)
	if err != nil && !layout.NotExist(err) {
		return fmt.Errorf("engine: replicate: list %s: %w", dictDir, layout.UnwrapPathErr(err))
	}
	sort.Strings(dicts)
	for _, n := range dicts {
		if strings.HasSuffix(n, layout.DictSuffix) { // not a temporary file
			names = append(names, layout.DictsDir+"/"+n)
		}
	}
	for _, n := range names {
		name := fs.PathJoin(append([]string{dir}, strings.Split(n, "/")...)...)
		b, err := layout.ReadFile(fs, name)
		if err != nil {
			return fmt.Errorf("engine: replicate: read %s: %w", name, layout.UnwrapPathErr(err))
		}
		if err := r.ReplicateFile(n, b); err != nil {
			return fmt.Errorf("engine: replicate %s: %w", name, err)
		}
	}
	return nil
}

// Dict gives r the dictionary file of id, durable here, before any record
// uses it.
func Dict(r Replicator, id uint32, data []byte) error {
	if r == nil {
		return nil
	}
	if err := r.ReplicateFile(layout.DictsDir+"/"+layout.DictFileName(id), data); err != nil {
		return fmt.Errorf("engine: replicate dictionary %d: %w", id, err)
	}
	return nil
}

// BlobReplicator is engine.BlobReplicator's method set.
type BlobReplicator interface {
	ReplicateBlob(name string, size int64, open func() (io.ReadCloser, error)) error
}

// Blobs reports whether r ships blobs (a BlobReplicator).
func Blobs(r Replicator) bool {
	_, ok := r.(BlobReplicator)
	return ok
}

// Blob gives r, if it is a BlobReplicator, the blob file name (a name in
// the store's blob directory blobDir, dir/blobs) of the store in dir: by
// its slash-separated name in the store's directory, its size, and a
// function that opens it for a stream of its bytes (it may be called
// again, for a retry).
func Blob(r Replicator, fs vfs.FS, dir, name string) error {
	br, ok := r.(BlobReplicator)
	if !ok {
		return nil
	}
	p := fs.PathJoin(dir, blob.Dir, name)
	st, err := fs.Stat(p)
	if err != nil {
		return fmt.Errorf("engine: replicate blob %s: %w", p, layout.UnwrapPathErr(err))
	}
	open := func() (io.ReadCloser, error) {
		f, err := fs.Open(p)
		if err != nil {
			return nil, fmt.Errorf("engine: replicate blob %s: %w", p, layout.UnwrapPathErr(err))
		}
		return f, nil
	}
	if err := br.ReplicateBlob(blob.Dir+"/"+name, st.Size(), open); err != nil {
		return fmt.Errorf("engine: replicate blob %s: %w", p, err)
	}
	return nil
}
