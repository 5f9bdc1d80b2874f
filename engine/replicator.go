package engine

// The replication hook (docs/DESIGN.md, "Write path", replicated mode);
// internal/replication is its plumbing.

import (
	"io"

	"github.com/continuumdb/continuum/internal/replication"
	"github.com/continuumdb/continuum/wal"
)

// Replicator ships a store to other machines as it is written
// (Options.Replicator; the nested module replicate implements it on NATS
// JetStream). A DB calls Replicate from the log's writer, one group
// commit at a time, and ReplicateFile from Open and the dictionary
// trainer.
//
// Replicate is given the records of one group commit once they are
// durable here, appends[i] holding the records of the group's i-th append
// (an all-or-nothing batch, to be kept whole) in log order; the slices
// are valid only during the call. It returns nil once the replica holds
// them durably: only then do the group's writes return. Its error fails
// those writes and is final for the DB's log like an fsync error (I8). A
// Replicator that finds another writer holds the store returns an error
// matching ErrFenced.
//
// ReplicateFile is given a file of the store that is truth but not in the
// log (STORE, a dictionary), by its slash-separated name in the store's
// directory, with its whole content, before any record that needs it: at
// every Open each such file, and a new dictionary before records use it.
// Its content never changes. An error fails Open, or keeps the new
// dictionary unused.
type Replicator interface {
	Replicate(appends [][][]byte) error
	ReplicateFile(name string, data []byte) error
}

// PositionedReplicator is a Replicator told where each group begins in
// the local log: the DB calls ReplicateAt instead of Replicate, with the
// same contract, and start, the log's durable end before the group (every
// earlier group acknowledged; a valid position for wal.Log.NewReader and
// wal.Options.ScanFrom), so that it can record which prefix of the log
// its replica holds.
type PositionedReplicator interface {
	Replicator
	ReplicateAt(start wal.Pos, appends [][][]byte) error
}

// BlobReplicator is a Replicator that also ships the store's blobs
// (package blob; docs/DESIGN.md "Blobs"), which are truth but not in the
// log. Without it a replica holds references to blobs it lacks.
//
// ReplicateBlob is given a committed blob file by its slash-separated
// name in the store's directory ("blobs/<hex>"), its size in bytes, and
// open, which yields its content as a stream (the blob may be far larger
// than memory; open may be called again for a retry, and the caller
// closes what it returns). It returns nil once the replica holds the file
// durably. A blob file's content never changes: a name the replica holds
// whole needs no second copy, and ReplicateBlob may return nil at once
// for it.
//
// The DB calls it from Atom.PutBlob (and the blob a large value of a
// commit or a tool's result becomes) once the blob is durable here and
// before its Ref is handed out: an error fails the put, and the blob,
// which nothing references, stays here until a sweep. It is not called
// again for a put of bytes already stored and shipped. Once it returned
// nil, the blob's name is written to the store's mark of shipped blobs
// (blobs/SHIPPED, fsynced; internal/blobs, "Shipping"). At every Open
// the DB gives it, before it serves, every blob file of the store the
// mark does not name (one a crash kept from the replica between its local
// commit and its mark, or a store's from before it was replicated), and
// no other: an error fails Open. The mark trusts the replica: a store
// handed to a Replicator of another replica must have blobs/SHIPPED
// removed first. A blob a sweep removes here is kept on the replica.
type BlobReplicator interface {
	Replicator
	ReplicateBlob(name string, size int64, open func() (io.ReadCloser, error)) error
}

// replicateHook is the log's Options.Replicate, or nil.
func (db *DB) replicateHook() func([][][]byte) error {
	return replication.Hook(db.opts.Replicator, func() wal.Pos { return db.log.End() })
}

// replicateOpen gives the Replicator, at Open, STORE and every
// dictionary, then, if it is a BlobReplicator, every blob file of the
// store that the mark of shipped blobs does not name (internal/blobs,
// "Shipping").
func (db *DB) replicateOpen() error {
	if err := replication.Files(db.opts.Replicator, db.fs, db.dir); err != nil {
		return err
	}
	_, err := db.blobs.ShipAll()
	return err
}
