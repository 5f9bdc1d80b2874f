// Package replication is the plumbing of the engine's replication hook
// (engine.Options.Replicator, docs/DESIGN.md "Write path", replicated
// mode): the log's Options.Replicate built from a Replicator (positioned
// or not), the store's files that are truth but not in the log given to
// it at Open, and a new dictionary given to it before records use it.
// The engine links no replication library; the nested module replicate
// implements the Replicator. This package knows nothing of the DB:
// engine/replicator.go declares the public interfaces and calls it.
//
// # The interface
//
// What the engine hands it: its Replicator (engine.Replicator and
// engine.PositionedReplicator have the method sets of Replicator and
// Positioned), the log's durable end, the store's filesystem and
// directory. What the engine calls, whole:
//
//	Hook(r, end) func([][][]byte) error // wal.Options.Replicate; nil for a nil r
//	Files(r, fs, dir) error             // Open: STORE and every dictionary, in name order
//	Dict(r, id, data) error             // a new dictionary, durable here, before records use it
//	Blobs(r) bool                       // r ships blobs (a BlobReplicator)
//	Blob(r, fs, dir, name) error        // a committed blob file, streamed, if r ships blobs
//
// # Guarantees
//
//   - Hook calls ReplicateAt of a Positioned with end(), read when the
//     group is handed over: the log calls the hook after the group's
//     fdatasync and before it moves its durable end past the group, so
//     end() is where the group begins.
//   - Files gives STORE, then each dictionary file (a name ending in
//     layout.DictSuffix; temporary files are not given) by its
//     slash-separated name in the store's directory, in name order; a
//     store without a dictionary directory gives STORE alone. Errors name
//     the file.
//   - Blob gives a BlobReplicator "blobs/<name>", the file's size and a
//     function that opens it (a stream: a blob may exceed memory; it may
//     be called again for a retry). Errors name the file.
//   - A nil Replicator is no replication: Hook returns nil, Files and
//     Dict do nothing.
//
// # Caveats
//
// Files reads each file whole into memory (STORE and dictionaries are
// small: at most layout's and dicttrain's bounds).
package replication
