package snapshot

// Reads: snapshots, positions and metadata, one run or one key at a time,
// and whole-store scans for verification.

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// AtOrBelow returns the run's snapshot with the greatest Seq <= seq, or an
// error wrapping ErrNotFound if it has none.
func (s *Store) AtOrBelow(runID string, seq uint64) (*Snapshot, error) {
	if err := validRunID(runID); err != nil {
		return nil, err
	}
	lo, _ := runBounds(spaceSnapshot, runID)
	_, hi := seqBounds(spaceSnapshot, runID, 0, seq)
	snap, err := s.last(lo, hi)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: run %q has no snapshot at or below seq %d", ErrNotFound, runID, seq)
	}
	return snap, err
}

// Latest returns the run's snapshot with the greatest Seq, or an error
// wrapping ErrNotFound if it has none.
func (s *Store) Latest(runID string) (*Snapshot, error) {
	if err := validRunID(runID); err != nil {
		return nil, err
	}
	snap, err := s.last(runBounds(spaceSnapshot, runID))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: run %q has no snapshot", ErrNotFound, runID)
	}
	return snap, err
}

// last decodes the last snapshot in [lo, hi).
func (s *Store) last(lo, hi []byte) (*Snapshot, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	// One view for the value and its chunks: a commit meanwhile may delete
	// the snapshot and the chunks only it held.
	view := s.db.NewSnapshot()
	defer view.Close()
	it, err := view.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, pebbleErr("reading snapshots", err)
	}
	var snap *Snapshot
	var refs []ChunkRef
	found := it.Last()
	if found {
		var val []byte
		val, err = it.ValueAndErr()
		if err == nil && valueVersion(val) == ChunkedValueVersion {
			snap, refs, err = DecodeChunkedSnapshot(it.Key(), val)
		} else if err == nil {
			snap, err = DecodeSnapshot(it.Key(), val)
		}
	}
	if ierr := errors.Join(it.Error(), it.Close()); ierr != nil && err == nil {
		err = pebbleErr("reading snapshots", ierr)
	}
	if err == nil && snap != nil && snap.Plain {
		// Once the iterator is closed: the chunks are read with Gets.
		err = s.resolveChunks(view, snap, refs)
	}
	if err != nil {
		return nil, s.readErr(err)
	}
	if !found {
		return nil, ErrNotFound
	}
	return snap, nil
}

// Snapshots returns the seqs of the run's snapshots in ascending order (nil
// if it has none). It reads every key of the run's snapshots: it is meant for
// inspection and statistics, not for a hot path.
func (s *Store) Snapshots(runID string) ([]uint64, error) {
	if err := validRunID(runID); err != nil {
		return nil, err
	}
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	lo, hi := runBounds(spaceSnapshot, runID)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	var seqs []uint64
	for valid := it.First(); valid; valid = it.Next() {
		run, seq, perr := parseRunKey(spaceSnapshot, it.Key())
		if perr == nil && run != runID {
			perr = fmt.Errorf("%w: key %q of run %q inside the range of run %q", ErrCorrupt, it.Key(), run, runID)
		}
		if perr != nil {
			it.Close()
			return nil, s.readErr(perr)
		}
		seqs = append(seqs, seq)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, s.readErr(pebbleErr(fmt.Sprintf("listing run %q", runID), err))
	}
	return seqs, nil
}

// Positions returns the log positions of the run's atoms from..to inclusive,
// one per seq. If any is missing, the error wraps ErrNotFound and names the
// first missing seq. from > to is an error wrapping ErrInvalid.
func (s *Store) Positions(runID string, from, to uint64) ([]Pos, error) {
	if err := validRunID(runID); err != nil {
		return nil, err
	}
	if from > to {
		return nil, fmt.Errorf("%w: run %q: positions from seq %d to %d: empty range", ErrInvalid, runID, from, to)
	}
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	lo, hi := seqBounds(spacePosition, runID, from, to)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	out := make([]Pos, 0, min(to-from+1, 1024))
	next := from
	var ferr error
	for valid := it.First(); valid && ferr == nil; valid = it.Next() {
		run, seq, perr := parseRunKey(spacePosition, it.Key())
		switch {
		case perr != nil:
			ferr = perr
		case run != runID:
			ferr = fmt.Errorf("%w: key %q of run %q inside the range of run %q", ErrCorrupt, it.Key(), run, runID)
		case seq != next:
			ferr = fmt.Errorf("%w: run %q has no position for seq %d", ErrNotFound, runID, next)
		default:
			val, verr := it.ValueAndErr()
			if verr != nil {
				ferr = fmt.Errorf("snapshot: run %q seq %d: %w", runID, seq, verr)
				break
			}
			p, derr := decodePos(runID, seq, val)
			if derr != nil {
				ferr = derr
				break
			}
			out = append(out, p)
			next++
		}
	}
	if ierr := errors.Join(it.Error(), it.Close()); ierr != nil && ferr == nil {
		ferr = pebbleErr(fmt.Sprintf("reading positions of run %q", runID), ierr)
	}
	if ferr != nil {
		return nil, s.readErr(ferr)
	}
	// The seqs read are from, from+1, ..., next-1 with none skipped; the range
	// is whole when the last one read is to. (next itself may have wrapped
	// past math.MaxUint64, and to-from+1 may have too.)
	if len(out) == 0 || next-1 != to {
		return nil, fmt.Errorf("%w: run %q has no position for seq %d", ErrNotFound, runID, next)
	}
	return out, nil
}

// Meta returns the value of the engine metadata key, or an error wrapping
// ErrNotFound. The returned slice belongs to the caller.
func (s *Store) Meta(key string) ([]byte, error) {
	if err := validMetaKey(key); err != nil {
		return nil, err
	}
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	val, closer, err := s.db.Get(append([]byte{spaceMeta}, key...))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("%w: meta key %q", ErrNotFound, key)
	}
	if err != nil {
		return nil, s.readErr(pebbleErr(fmt.Sprintf("meta key %q", key), err))
	}
	defer closer.Close()
	return append([]byte{}, val...), nil
}

// EachSnapshot calls fn with every snapshot of the store, by run and then
// by seq, a chunked one with its frame read from its chunks. A value that
// does not decode (or a chunk of it) is passed as err (wrapping ErrCorrupt,
// naming the run and seq, or the key if that does not parse) with a nil
// snap, and the scan goes on. An error from fn stops the scan
// and is returned. It reads the whole store: it is for verification.
func (s *Store) EachSnapshot(fn func(runID string, seq uint64, snap *Snapshot, err error) error) error {
	return s.each(spaceSnapshot, func(view *pebble.Snapshot, runID string, seq uint64, key, val []byte, err error) error {
		if err != nil {
			return fn(runID, seq, nil, err)
		}
		snap, err := s.decodeStored(view, key, val)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return s.readErr(err) // a failed read, not a bad value
		}
		return fn(runID, seq, snap, err)
	})
}

// EachPosition calls fn with every atom position of the store, by run and
// then by seq; like EachSnapshot, a value (or key) that does not decode is
// passed as err and the scan goes on.
func (s *Store) EachPosition(fn func(runID string, seq uint64, p Pos, err error) error) error {
	return s.each(spacePosition, func(_ *pebble.Snapshot, runID string, seq uint64, key, val []byte, err error) error {
		var p Pos
		if err == nil {
			p, err = decodePos(runID, seq, val)
		}
		return fn(runID, seq, p, err)
	})
}

// each calls fn with every key of space and its value, read from one view
// of the store (passed to fn, for the chunks of a snapshot); a key that
// does not parse is passed as err (runID "", seq 0).
func (s *Store) each(space byte, fn func(view *pebble.Snapshot, runID string, seq uint64, key, val []byte, err error) error) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	view := s.db.NewSnapshot()
	defer view.Close()
	it, err := view.NewIter(&pebble.IterOptions{LowerBound: []byte{space}, UpperBound: []byte{space + 1}})
	if err != nil {
		return s.readErr(pebbleErr("scanning the store", err))
	}
	var ferr error
	for valid := it.First(); valid && ferr == nil; valid = it.Next() {
		runID, seq, perr := parseRunKey(space, it.Key())
		if perr != nil {
			ferr = fn(view, "", 0, nil, nil, perr)
			continue
		}
		val, verr := it.ValueAndErr()
		if verr != nil {
			ferr = s.readErr(pebbleErr(fmt.Sprintf("run %q seq %d", runID, seq), verr))
			break
		}
		ferr = fn(view, runID, seq, it.Key(), val, nil)
	}
	if ierr := errors.Join(it.Error(), it.Close()); ierr != nil && ferr == nil {
		ferr = s.readErr(pebbleErr("scanning the store", ierr))
	}
	return ferr
}
