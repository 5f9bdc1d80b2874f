package snapshot

import (
	"context"
	"errors"
)

// Space held by replaced snapshots.
//
// The engine keeps few snapshots of a run (the newest, and the first of
// every window of seqs: see the engine's retention policy), so nearly every
// snapshot it writes is deleted, by a later batch, once a newer one exists.
// A snapshot flushed to a table before its deletion stays on disk until a
// compaction drops it, and Pebble's own compaction picker, which runs on
// table counts and level sizes (its tombstone statistics are off: see
// Open), leaves most of them there: in a store of 16 runs of 500 atoms
// half of the snapshot store's bytes were snapshots already deleted.
//
// So the store counts the bytes of the snapshots it deletes or replaces
// (Commit reads each one anyway, to keep the count exact) and of the
// chunks it deletes with them (chunkstore.go), and after a
// synced Commit, once they reach half of the space Pebble's files take (and
// at least minDeadBytes), it compacts the snapshot keyspace in the
// background. The count over-estimates what lies on disk (a snapshot
// deleted before a flush never reached a table), which only makes a
// compaction come sooner; each compaction rewrites at most the files it
// finds, which are at most twice the bytes deleted since the last one, so
// compaction costs at most about twice the bytes of snapshots written.
const minDeadBytes = 1 << 20

// maybeCompact starts a background compaction of the snapshot keyspace
// when the bytes deleted since the last one reach half of Pebble's files.
// The caller holds commitMu and has acquired s.
func (s *Store) maybeCompact() {
	dead := s.deadBytes.Load()
	if s.readOnly || dead < minDeadBytes || uint64(dead)*2 < s.db.Metrics().DiskSpaceUsage() {
		return
	}
	if !s.compacting.CompareAndSwap(false, true) {
		return
	}
	s.deadBytes.Add(-dead)
	go s.compact(dead)
}

// minCloseDeadBytes is the least Close compacts (compactAtClose).
const minCloseDeadBytes = 64 << 10

// compactAtClose compacts the snapshot and chunk keyspaces before Close
// lets Pebble go, when the bytes deleted since the last compaction are at
// least minCloseDeadBytes and a quarter of Pebble's files. Most of what an
// engine writes here is dead by its Close: every background snapshot is
// replaced by the next, and the final checkpoint drops the newest of each
// run in favour of its frame file; left to the threshold of maybeCompact,
// they stayed on disk at rest (in a store of 16 runs of 300 atoms, two
// thirds of Pebble's files). The compaction rewrites at most four times
// the bytes deleted since the last one, so Close pays at most that for
// what the process wrote. It is bounded by half of CloseTimeout; one that
// does not finish in time runs on inside Pebble, whose Close waits for it
// (Close as a whole stays within about CloseTimeout). Its error is
// counted, not returned: the data is whole either way. The caller holds
// s.mu exclusively, with the store neither down nor failed.
func (s *Store) compactAtClose() {
	dead := s.deadBytes.Load()
	if s.readOnly || dead < minCloseDeadBytes || uint64(dead)*4 < s.db.Metrics().DiskSpaceUsage() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), CloseTimeout/2)
	defer cancel()
	s.deadBytes.Add(-dead)
	s.compactions.Add(1)
	if err := s.compactSpaces(ctx, s.chunksDead.Swap(false)); err != nil {
		s.backgroundErrors.Add(1)
		s.logger.Debug("snapshot: compaction of replaced snapshots at Close", "dir", s.dir, "err", err)
	}
}

// compactSpaces compacts the snapshot keyspace, and the chunk keyspace if
// chunks says chunks were deleted. A panic of Pebble's is its error.
func (s *Store) compactSpaces(ctx context.Context, chunks bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = pebbleFailure(r)
		}
	}()
	spaces := []byte{spaceSnapshot}
	if chunks {
		spaces = append(spaces, spaceChunk)
	}
	for _, space := range spaces {
		if err = s.db.Compact(ctx, []byte{space}, []byte{space + 1}, false); err != nil {
			return err
		}
	}
	return nil
}

// compact compacts the snapshot keyspace, holding s shared throughout, so
// that Pebble stays open under it; Close and a failure cancel it first (a
// compaction Pebble has started still runs to its end, which Pebble's own
// Close waits for). Its failure is the store's: Pebble reports a failed
// compaction as a background error (which fails the store), and any other
// error is counted. One that Close cancels gives its dead bytes back to
// the count, for Close's own (compactAtClose).
func (s *Store) compact(dead int64) {
	defer s.compacting.Store(false)
	if err := s.acquire(); err != nil {
		return
	}
	defer s.mu.RUnlock()
	s.compactions.Add(1)
	// The snapshot keyspace, then the chunk keyspace if chunks were
	// deleted since the last compaction.
	chunks := s.chunksDead.Swap(false)
	err := s.compactSpaces(s.stop, chunks)
	if errors.Is(err, context.Canceled) {
		s.deadBytes.Add(dead)
		if chunks {
			s.chunksDead.Store(true)
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.backgroundErrors.Add(1)
		s.logger.Debug("snapshot: compaction of replaced snapshots", "dir", s.dir, "err", err)
	}
}
