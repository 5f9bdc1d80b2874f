package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

// The replication hook: Options.Replicator is given the store's truth as
// it becomes durable here (the log's group commits, and the files that are
// truth but not in the log), and a write is acknowledged only once the
// Replicator accepted it. The engine links no replication library; the
// nested module github.com/continuumdb/continuum/replicate implements
// Replicator on NATS JetStream, and rebuilds a store's directory from what
// it shipped (the restart path then opens it like any store).

// Replicator ships a store to other machines as it is written. A DB calls
// it from one goroutine at a time for Replicate (the log's writer: the
// next group commit waits for it) and from Open and the dictionary trainer
// for ReplicateFile.
//
// Replicate is given the records of one group commit once they are durable
// here, appends[i] holding the records of the group's i-th append (an
// all-or-nothing batch, to be kept whole) in log order; the slices are
// valid only during the call. It returns nil once the replica holds them
// durably (a quorum acknowledged them): only then do the writes of the
// group return. Its error fails those writes, none of which is
// acknowledged, and is final for the DB's log like an fsync error (I8):
// every later write fails with it, because the replica may or may not hold
// the group and no record may follow it. A Replicator that finds another
// writer holds the store returns an error matching ErrFenced.
//
// ReplicateFile is given a file of the store that is truth but not in the
// log, by its slash-separated name in the store's directory (layout's
// StoreName, or DictsDir/DictFileName), with its whole content, before any
// record that needs it is written: at Open every such file the store has,
// and a new dictionary before records use it. The same file may be given
// again (every Open gives all of them); its content never changes. An error
// fails Open, or keeps a new dictionary unused.
type Replicator interface {
	Replicate(appends [][][]byte) error
	ReplicateFile(name string, data []byte) error
}

// PositionedReplicator is a Replicator that is also told where each group
// begins in the store's local log, so that it can record which prefix of
// the log its replica holds (package replicate keeps such a mark, and a
// node that reopens its own copy catches up from it instead of rebuilding
// the store). A DB calls ReplicateAt instead of Replicate, with the same
// appends and the same contract, and with start, the log's durable end
// before the group: everything before start is the records of the earlier
// groups, each of which the Replicator acknowledged, and the group's
// records follow start in the log (start is the position of its first
// record, or of the seal that ends the segment before it). start is a
// valid position for wal.Log.NewReader and wal.Options.ScanFrom.
type PositionedReplicator interface {
	Replicator
	ReplicateAt(start wal.Pos, appends [][][]byte) error
}

// replicateHook is the log's Options.Replicate: the Replicator's, or nil.
// The log calls it on its owner goroutine after the group's fdatasync and
// before it moves its durable end past the group, so End() is then where
// the group begins.
func (db *DB) replicateHook() func([][][]byte) error {
	switch r := db.opts.Replicator.(type) {
	case nil:
		return nil
	case PositionedReplicator:
		return func(appends [][][]byte) error { return r.ReplicateAt(db.log.End(), appends) }
	default:
		return r.Replicate
	}
}

// replicateFiles gives the Replicator STORE and every dictionary of the
// store (Open, once the store is sound and before anything is appended).
func (db *DB) replicateFiles() error {
	r := db.opts.Replicator
	if r == nil {
		return nil
	}
	names := []string{layout.StoreName}
	dicts, err := db.fs.List(db.path(layout.DictsDir))
	if err != nil && !layout.NotExist(err) {
		return fmt.Errorf("engine: replicate: list %s: %w", db.path(layout.DictsDir), layout.UnwrapPathErr(err))
	}
	sort.Strings(dicts)
	for _, n := range dicts {
		if strings.HasSuffix(n, layout.DictSuffix) { // not a temporary file
			names = append(names, layout.DictsDir+"/"+n)
		}
	}
	for _, n := range names {
		name := db.path(strings.Split(n, "/")...)
		b, err := layout.ReadFile(db.fs, name)
		if err != nil {
			return fmt.Errorf("engine: replicate: read %s: %w", name, layout.UnwrapPathErr(err))
		}
		if err := r.ReplicateFile(n, b); err != nil {
			return fmt.Errorf("engine: replicate %s: %w", name, err)
		}
	}
	return nil
}

// replicateDict gives the Replicator a new dictionary file, durable here,
// before any record uses it.
func (db *DB) replicateDict(id uint32, data []byte) error {
	if r := db.opts.Replicator; r != nil {
		if err := r.ReplicateFile(layout.DictsDir+"/"+layout.DictFileName(id), data); err != nil {
			return fmt.Errorf("engine: replicate dictionary %d: %w", id, err)
		}
	}
	return nil
}
