package snapshot

// The store's side of chunked snapshots: reassembling a plain frame from
// its chunks, pinning the chunks a batch being built reuses, and deleting
// the chunks no snapshot of their run references any more.

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

func (s *Store) pin(key string) {
	s.pins.Lock()
	if s.pins.m == nil {
		s.pins.m = map[string]int{}
	}
	s.pins.m[key]++
	s.pins.Unlock()
}

func (s *Store) unpinLocked(key string) {
	if n := s.pins.m[key]; n > 1 {
		s.pins.m[key] = n - 1
	} else {
		delete(s.pins.m, key)
	}
}

// chunkCandidates are chunks of one run that a batch's deletions or
// replacements may leave unreferenced. unsafe is set when one of the
// snapshots deleted could not be read: nothing of the run is collected then
// (a chunk kept too long costs space; one deleted too soon, a snapshot).
type chunkCandidates struct {
	hashes map[[ChunkHashLen]byte]struct{}
	unsafe bool
}

func candidatesOf(gone map[string]*chunkCandidates, run string) (map[string]*chunkCandidates, *chunkCandidates) {
	if gone == nil {
		gone = map[string]*chunkCandidates{}
	}
	c := gone[run]
	if c == nil {
		c = &chunkCandidates{hashes: map[[ChunkHashLen]byte]struct{}{}}
		gone[run] = c
	}
	return gone, c
}

// noteGone adds the chunks of the chunked value val, stored under key, to
// gone.
func noteGone(gone map[string]*chunkCandidates, key, val []byte) map[string]*chunkCandidates {
	snap, refs, err := DecodeChunkedSnapshot(key, val)
	if err != nil {
		run, _, perr := parseRunKey(spaceSnapshot, key)
		if perr != nil {
			return gone // not a key of any run's range
		}
		gone, c := candidatesOf(gone, run)
		c.unsafe = true
		return gone
	}
	return noteRefs(gone, snap.RunID, refs)
}

func noteRefs(gone map[string]*chunkCandidates, run string, refs []ChunkRef) map[string]*chunkCandidates {
	gone, c := candidatesOf(gone, run)
	for _, r := range refs {
		c.hashes[r.Hash] = struct{}{}
	}
	return gone
}

// collectChunks adds to pb the deletion of every chunk in gone that no
// snapshot of its run references once pb is applied: neither one this
// batch puts nor one stored that it neither deletes nor replaces. It
// returns the stored bytes of the chunks deleted. The caller holds
// commitMu and s.pins, and has acquired s.
//
// Cost: for each run with a candidate left once the batch's own snapshots
// are taken out, one scan of the run's snapshot values (their chunk
// references, about 20 bytes per 64 KiB of frame, and the values of any
// version 1 snapshots), stopping once no candidate is left, and one Get
// per chunk deleted. The engine keeps few snapshots per run (the latest and
// the first of each window of 1,000 seqs: 201 for a run of 200,000 atoms,
// whose references are about 3 KB each for a 10 MB frame), and deletes one
// or two per snapshot it takes, so this reads well under a megabyte of
// references per snapshot of a long run, and nothing for a short one.
func (b *Batch) collectChunks(pb *pebble.Batch, gone map[string]*chunkCandidates) (int64, error) {
	s := b.s
	var dead int64
	for run, c := range gone {
		if c.unsafe {
			continue
		}
		if rc := b.runs[run]; rc != nil {
			for _, refs := range rc.puts {
				for _, r := range refs {
					delete(c.hashes, r.Hash)
				}
			}
		}
		if len(c.hashes) == 0 {
			continue
		}
		ok, err := b.dropReferenced(run, c)
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		var key []byte
		rc := b.runs[run]
		for h := range c.hashes {
			key = AppendChunkKey(key[:0], run, h)
			if rc != nil {
				if _, ok := rc.written[h]; ok {
					// Written by this batch for a snapshot it then put
					// again: the delete, later in pb, wins.
					if err := pb.Delete(key, nil); err != nil {
						return 0, fmt.Errorf("snapshot: run %q: deleting chunk %x: %w", run, h[:], err)
					}
					continue
				}
			}
			if s.pins.m[string(key)] > 0 {
				continue
			}
			v, closer, err := s.db.Get(key)
			if errors.Is(err, pebble.ErrNotFound) {
				continue
			}
			if err != nil {
				return 0, s.readErr(pebbleErr(fmt.Sprintf("run %q: chunk %x", run, h[:]), err))
			}
			dead += int64(len(key) + len(v))
			closer.Close()
			if err := pb.Delete(key, nil); err != nil {
				return 0, fmt.Errorf("snapshot: run %q: deleting chunk %x: %w", run, h[:], err)
			}
		}
	}
	return dead, nil
}

// dropReferenced removes from c the chunks that a stored snapshot of run
// which this batch neither deletes nor replaces references. It reports
// false when a value could not be read (nothing of the run is collected).
func (b *Batch) dropReferenced(run string, c *chunkCandidates) (bool, error) {
	s := b.s
	lo, hi := runBounds(spaceSnapshot, run)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return false, s.readErr(pebbleErr(fmt.Sprintf("run %q: listing snapshots", run), err))
	}
	ok := true
	for valid := it.First(); valid && len(c.hashes) > 0; valid = it.Next() {
		k := it.Key()
		if _, del := b.delKeys[string(k)]; del {
			continue
		}
		if _, put := b.snapKeys[string(k)]; put {
			continue // replaced: its new references were taken out already
		}
		v, err := it.ValueAndErr()
		if err != nil {
			ok = false
			break
		}
		if valueVersion(v) != ChunkedValueVersion {
			continue // version 1 (or damage, which version 1's decoder reports): no chunks
		}
		_, refs, err := DecodeChunkedSnapshot(k, v)
		if err != nil {
			ok = false
			break
		}
		for _, r := range refs {
			delete(c.hashes, r.Hash)
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return false, s.readErr(pebbleErr(fmt.Sprintf("run %q: listing snapshots", run), err))
	}
	return ok, nil
}

// resolveChunks reads the chunks refs of snap (decoded from a version 2
// value) into snap.Frame. A chunk missing, damaged or not hashing to its
// key is an error wrapping ErrCorrupt that names the run, seq and chunk.
// The chunks are read from view, the one snap's value was read from: a
// commit since may have deleted both. The caller has acquired s.
func (s *Store) resolveChunks(view *pebble.Snapshot, snap *Snapshot, refs []ChunkRef) error {
	total := 0
	for _, r := range refs {
		total += r.Len // bounded by MaxFrameSize: DecodeChunkedSnapshot checked
	}
	buf := make([]byte, total)
	var key []byte
	off := 0
	for i, r := range refs {
		key = AppendChunkKey(key[:0], snap.RunID, r.Hash)
		v, closer, err := view.Get(key)
		if errors.Is(err, pebble.ErrNotFound) {
			return fmt.Errorf("%w: run %q seq %d: chunk %d of %d (%x) is missing", ErrCorrupt, snap.RunID, snap.Seq, i, len(refs), r.Hash[:])
		}
		if err != nil {
			return pebbleErr(fmt.Sprintf("run %q seq %d: chunk %d of %d", snap.RunID, snap.Seq, i, len(refs)), err)
		}
		err = DecodeChunk(key, v, buf[off:off+r.Len])
		closer.Close()
		if err != nil {
			return fmt.Errorf("snapshot: run %q seq %d: chunk %d of %d: %w", snap.RunID, snap.Seq, i, len(refs), err)
		}
		off += r.Len
	}
	snap.Frame = buf
	return nil
}

// decodeStored decodes a snapshot value of either version, reading a
// chunked one's chunks from view, the one it was read from. The caller has
// acquired s.
func (s *Store) decodeStored(view *pebble.Snapshot, key, val []byte) (*Snapshot, error) {
	if valueVersion(val) != ChunkedValueVersion {
		return DecodeSnapshot(key, val)
	}
	snap, refs, err := DecodeChunkedSnapshot(key, val)
	if err != nil {
		return nil, err
	}
	if err := s.resolveChunks(view, snap, refs); err != nil {
		return nil, err
	}
	return snap, nil
}
