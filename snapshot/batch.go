package snapshot

import (
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// Batch accumulates snapshots, positions and metadata, then writes them with
// one Commit: one Pebble batch, atomic (after a crash it is wholly present or
// wholly absent) and, with sync, durable when Commit returns. A Batch is for
// one goroutine; it cannot be used after Commit or Discard. Puts copy their
// arguments: the caller may reuse them at once.
type Batch struct {
	s  *Store
	pb *pebble.Batch // nil after Commit or Discard

	// snapKeys are the distinct snapshot keys in pb, for the store's count;
	// delKeys those it deletes.
	snapKeys map[string]struct{}
	delKeys  map[string]struct{}
	// scratch is reused to encode values before pb copies them.
	scratch []byte

	// runs holds, per run, the chunks of the plain frames put (chunk.go):
	// those pb writes and the references of each snapshot put. pinned are
	// the chunk keys already in the store that this batch's snapshots
	// reference, pinned in the store (Store.pins) until Commit or Discard so
	// that no other commit removes them meanwhile.
	runs   map[string]*runChunks
	pinned map[string]struct{}

	entries, snapshots, positions int
}

// NewBatch returns an empty batch for s.
func (s *Store) NewBatch() *Batch {
	return &Batch{s: s, pb: s.db.NewBatch(), snapKeys: map[string]struct{}{}, delKeys: map[string]struct{}{}}
}

var errBatchDone = fmt.Errorf("%w: batch already committed or discarded", ErrInvalid)

func (b *Batch) usable() error {
	if b == nil || b.pb == nil {
		return errBatchDone
	}
	if b.s.readOnly {
		return ErrReadOnly
	}
	return nil
}

// runChunks is what a batch does to the chunks of one run.
type runChunks struct {
	// written are the chunks pb writes.
	written map[[ChunkHashLen]byte]struct{}
	// puts are the chunk references of the snapshots put, by snapshot key;
	// superseded those of snapshots put and then put again in this batch.
	puts       map[string][]ChunkRef
	superseded []ChunkRef
}

func (b *Batch) chunksOf(runID string) *runChunks {
	rc := b.runs[runID]
	if rc == nil {
		rc = &runChunks{written: map[[ChunkHashLen]byte]struct{}{}, puts: map[string][]ChunkRef{}}
		if b.runs == nil {
			b.runs = map[string]*runChunks{}
		}
		b.runs[runID] = rc
	}
	return rc
}

// PutSnapshot adds s, keyed by its run and seq. A snapshot already stored
// under that run and seq is replaced.
//
// A plain frame (s.Plain) is cut into chunks (ChunkBoundariesAt, at
// s.Cuts), and only the chunks the run does not hold already, in the
// store or in this batch, are written (compressed); the snapshot's value
// lists them. Looking them up reads the store: a plain PutSnapshot is for
// the background, as Commit is. The store keeps a plain frame of 64 KiB or
// more (chunkmemo.go: the next snapshot of the run cuts only what changed)
// until the run's next plain PutSnapshot, DeleteRun or Close: the caller
// must not change s.Frame after the call.
func (b *Batch) PutSnapshot(s *Snapshot) error {
	if err := b.usable(); err != nil {
		return err
	}
	if err := s.Validate(); err != nil {
		return err
	}
	key := AppendSnapshotKey(nil, s.RunID, s.Seq)
	if _, ok := b.delKeys[string(key)]; ok {
		return fmt.Errorf("%w: run %q seq %d: snapshot deleted and put in one batch", ErrInvalid, s.RunID, s.Seq)
	}
	if s.Plain {
		refs, err := b.putChunks(s)
		if err != nil {
			return err
		}
		rc := b.chunksOf(s.RunID)
		if old, ok := rc.puts[string(key)]; ok {
			rc.superseded = append(rc.superseded, old...)
		}
		rc.puts[string(key)] = refs
		b.scratch = AppendChunkedSnapshot(b.scratch[:0], s, refs)
	} else {
		b.scratch = AppendSnapshot(b.scratch[:0], s)
	}
	if err := b.pb.Set(key, b.scratch, nil); err != nil {
		return fmt.Errorf("snapshot: run %q seq %d: %w", s.RunID, s.Seq, err)
	}
	b.snapKeys[string(key)] = struct{}{}
	b.entries++
	b.snapshots++
	return nil
}

// putChunks writes the chunks of s's plain frame that its run holds
// neither in the store nor in this batch, and returns the frame's chunk
// references.
func (b *Batch) putChunks(s *Snapshot) ([]ChunkRef, error) {
	st := b.s
	if err := st.acquire(); err != nil {
		return nil, err
	}
	defer st.mu.RUnlock()
	// Under the store's shared lock: Close clears the memo after.
	refs, ends := st.memo.chunk(s.RunID, s.Frame, s.Cuts)
	rc := b.chunksOf(s.RunID)
	var key []byte
	start := 0
	for i, r := range refs {
		raw := s.Frame[start:ends[i]]
		start = ends[i]
		if _, ok := rc.written[r.Hash]; ok {
			continue
		}
		key = AppendChunkKey(key[:0], s.RunID, r.Hash)
		if _, ok := b.pinned[string(key)]; ok {
			continue // in the store, and pinned there
		}
		// Pinned before it is looked up: a commit that would remove it
		// either has (the lookup misses it, and it is written again) or
		// sees the pin (Batch.Commit).
		st.pin(string(key))
		if b.pinned == nil {
			b.pinned = map[string]struct{}{}
		}
		b.pinned[string(key)] = struct{}{}
		_, closer, err := st.db.Get(key)
		switch {
		case err == nil:
			closer.Close()
			continue
		case !errors.Is(err, pebble.ErrNotFound):
			return nil, st.readErr(pebbleErr(fmt.Sprintf("run %q seq %d: looking up chunk %x", s.RunID, s.Seq, r.Hash[:]), err))
		}
		b.scratch = AppendChunk(b.scratch[:0], s.RunID, raw)
		if err := b.pb.Set(key, b.scratch, nil); err != nil {
			return nil, fmt.Errorf("snapshot: run %q seq %d: chunk %x: %w", s.RunID, s.Seq, r.Hash[:], err)
		}
		rc.written[r.Hash] = struct{}{}
	}
	return refs, nil
}

// DeleteSnapshot removes the snapshot of runID at seq, if there is one (a
// retention policy thins old snapshots out; the log keeps every delta, so
// StateAt still reaches every seq). A batch cannot both put and delete the
// same snapshot.
func (b *Batch) DeleteSnapshot(runID string, seq uint64) error {
	if err := b.usable(); err != nil {
		return err
	}
	if err := validRunID(runID); err != nil {
		return err
	}
	key := AppendSnapshotKey(nil, runID, seq)
	if _, ok := b.snapKeys[string(key)]; ok {
		return fmt.Errorf("%w: run %q seq %d: snapshot put and deleted in one batch", ErrInvalid, runID, seq)
	}
	if err := b.pb.Delete(key, nil); err != nil {
		return fmt.Errorf("snapshot: run %q seq %d: %w", runID, seq, err)
	}
	b.delKeys[string(key)] = struct{}{}
	b.entries++
	return nil
}

// PutPositions adds the log positions of the run's atoms firstSeq,
// firstSeq+1, ..., one per element of pos. Offsets must not be negative, and
// the seqs must not pass math.MaxUint64.
func (b *Batch) PutPositions(runID string, firstSeq uint64, pos []Pos) error {
	if err := b.usable(); err != nil {
		return err
	}
	if err := validRunID(runID); err != nil {
		return err
	}
	if len(pos) == 0 {
		return nil
	}
	if uint64(len(pos))-1 > math.MaxUint64-firstSeq {
		return fmt.Errorf("%w: run %q: %d positions from seq %d overflow the seq space", ErrInvalid, runID, len(pos), firstSeq)
	}
	for i, p := range pos {
		if p.Offset < 0 {
			return fmt.Errorf("%w: run %q seq %d: negative log offset %d", ErrInvalid, runID, firstSeq+uint64(i), p.Offset)
		}
	}
	prefix := appendRunPrefix(nil, spacePosition, runID)
	key := make([]byte, 0, len(prefix)+seqLen)
	for i, p := range pos {
		key = appendRunKey(key[:0], spacePosition, runID, firstSeq+uint64(i))
		b.scratch = appendPos(b.scratch[:0], p)
		if err := b.pb.Set(key, b.scratch, nil); err != nil {
			return fmt.Errorf("snapshot: run %q seq %d: %w", runID, firstSeq+uint64(i), err)
		}
		b.entries++
		b.positions++
	}
	return nil
}

// PutMeta adds engine metadata: key (1 to MaxMetaKeyLen bytes) to val (at
// most MaxMetaValueLen bytes), replacing any earlier value.
func (b *Batch) PutMeta(key string, val []byte) error {
	if err := b.usable(); err != nil {
		return err
	}
	if err := validMetaKey(key); err != nil {
		return err
	}
	if len(val) > MaxMetaValueLen {
		return fmt.Errorf("%w: meta key %q: value of %d bytes exceeds the %d-byte limit", ErrInvalid, key, len(val), MaxMetaValueLen)
	}
	if err := b.pb.Set(append([]byte{spaceMeta}, key...), val, nil); err != nil {
		return fmt.Errorf("snapshot: meta key %q: %w", key, err)
	}
	b.entries++
	return nil
}

func validMetaKey(key string) error {
	if key == "" || len(key) > MaxMetaKeyLen {
		return fmt.Errorf("%w: meta key of %d bytes, want 1 to %d", ErrInvalid, len(key), MaxMetaKeyLen)
	}
	return nil
}

// Len returns the number of entries added: one per snapshot, per deleted
// snapshot, per position and per metadata key.
func (b *Batch) Len() int {
	if b == nil {
		return 0
	}
	return b.entries
}

// Size returns the encoded size of the batch in bytes (0 after Commit).
func (b *Batch) Size() int {
	if b == nil || b.pb == nil {
		return 0
	}
	return b.pb.Len()
}

// Commit writes the batch atomically. With sync, it returns once the batch
// is durable (Pebble's WAL is fsynced); without, a crash may lose it, but
// never tear it. The commit point is Pebble's WAL write of the batch: after
// a crash, recovery replays the WAL and the batch is wholly present or
// wholly absent. The Batch cannot be used afterwards, whatever the result.
// Committing an empty batch does nothing.
func (b *Batch) Commit(sync bool) error {
	if err := b.usable(); err != nil {
		return err
	}
	pb := b.pb
	b.pb = nil
	defer b.unpin()
	// pb is closed here on every path but the one through commit, which
	// closes it itself (possibly later: see Store.apply).
	closePB := true
	defer func() {
		if closePB {
			pb.Close()
		}
	}()
	if b.entries == 0 {
		return nil
	}
	s := b.s
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	if err := s.Err(); err != nil {
		return err
	}

	var added, dead int64
	chunksDead := false
	// The chunks of the snapshots this batch deletes or replaces, by run:
	// those no remaining snapshot references are deleted below.
	var gone map[string]*chunkCandidates
	if len(b.snapKeys)+len(b.delKeys) > 0 {
		// exists reports whether k holds a value, and its size; it notes
		// the chunks of a chunked one in gone.
		exists := func(k string) (bool, int64, error) {
			v, closer, err := s.db.Get([]byte(k))
			switch {
			case errors.Is(err, pebble.ErrNotFound):
				return false, 0, nil
			case err != nil:
				return false, 0, s.readErr(pebbleErr("commit", err))
			}
			defer closer.Close()
			if valueVersion(v) == ChunkedValueVersion {
				gone = noteGone(gone, []byte(k), v)
			}
			return true, int64(len(v)), nil
		}
		for k := range b.snapKeys {
			ok, n, err := exists(k)
			if err != nil {
				return err
			}
			if !ok {
				added++
			}
			dead += n // replaced
		}
		for k := range b.delKeys {
			ok, n, err := exists(k)
			if err != nil {
				return err
			}
			if ok {
				added--
			}
			dead += n
		}
		if err := setCount(pb, s.snapshots.Load()+added); err != nil {
			return fmt.Errorf("snapshot: commit: %w", err)
		}
	}
	for run, rc := range b.runs {
		if len(rc.superseded) > 0 {
			gone = noteRefs(gone, run, rc.superseded)
		}
	}
	if len(gone) > 0 {
		// The pins are held from the choice of the chunks to delete until
		// the batch is in Pebble: a batch being built either pinned a chunk
		// before (it is kept) or looks it up after (and writes it again).
		s.pins.Lock()
		defer s.pins.Unlock()
		n, err := b.collectChunks(pb, gone)
		if err != nil {
			return err
		}
		dead += n
		chunksDead = n > 0
	}
	size := pb.Len()
	closePB = false
	if err := s.commit(pb, sync); err != nil {
		return fmt.Errorf("snapshot: commit of %d entries: %w", b.entries, err)
	}
	s.snapshots.Add(added)
	if chunksDead {
		s.chunksDead.Store(true)
	}
	s.deadBytes.Add(dead)
	if sync {
		s.maybeCompact()
	}
	s.batches.Add(1)
	s.snapshotsWritten.Add(uint64(b.snapshots))
	s.positionsWritten.Add(uint64(b.positions))
	s.bytesCommitted.Add(uint64(size))
	return nil
}

// Discard drops the batch without writing it. Discarding a committed or
// discarded batch does nothing.
func (b *Batch) Discard() {
	if b == nil || b.pb == nil {
		return
	}
	b.pb.Close()
	b.pb = nil
	b.unpin()
}

// unpin releases the batch's pins.
func (b *Batch) unpin() {
	if len(b.pinned) == 0 {
		return
	}
	b.s.pins.Lock()
	for k := range b.pinned {
		b.s.unpinLocked(k)
	}
	b.s.pins.Unlock()
	b.pinned = nil
}
