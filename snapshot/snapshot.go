package snapshot

import (
	"fmt"
	"time"

	"github.com/continuumdb/continuum/wal"
)

// Pos is a position in the engine's log: the log's own position type,
// wal.Pos (an alias, not a copy: a wal.Pos is a Pos and needs no
// conversion). This package stores it but does not interpret it. Offset
// must not be negative.
type Pos = wal.Pos

// Snapshot is the whole frame of a run at one atom.
type Snapshot struct {
	// RunID names the run: 1 to MaxRunIDLen bytes of UTF-8 without control
	// characters (the run-id rule of internal/runid, the engine's).
	RunID string
	// Seq is the atom whose frame this is: frame(Seq).
	Seq uint64
	// Head is the run's chain head at Seq.
	Head [32]byte
	// Frame is the frame, at most MaxFrameSize bytes. Unless Plain is set it
	// is opaque to this package (encoded, compressed, perhaps sealed by the
	// caller) and stored whole, as a version 1 value.
	Frame []byte
	// Plain says that Frame is the frame's raw encoding (frame.AppendFrame's
	// bytes, neither compressed nor sealed): the store cuts it into
	// content-defined chunks, compresses each, and stores each chunk once
	// per run, shared by the run's snapshots that hold it (a version 2
	// value; see format.go). Reads return it the same way: Plain set, Frame
	// the reassembled raw bytes. Ciphertext does not deduplicate: sealed
	// frames go unchunked, Plain unset.
	Plain bool
	// Cuts, for a plain frame, are offsets in Frame where a chunk ends,
	// in increasing order (those not within the frame, or not after the
	// one before, are ignored): the caller's knowledge of its frame's
	// layout, so that a part rewritten at every snapshot does not share
	// a chunk with one that only grows (the engine cuts where a frame's
	// messages begin and end: frame.AppendFrameMessages). Between cuts,
	// chunks are content-defined (ChunkBoundariesAt). Cuts only decide
	// which chunks deduplicate: they are not stored, and a read returns
	// Cuts nil.
	Cuts []int
	// Created is when the snapshot was taken (kept to the nanosecond; the
	// monotonic clock reading and the location are dropped).
	Created time.Time
}

// Validate reports why s cannot be stored, or nil if it can.
func (s *Snapshot) Validate() error {
	if s == nil {
		return fmt.Errorf("%w: nil snapshot", ErrInvalid)
	}
	if err := validRunID(s.RunID); err != nil {
		return fmt.Errorf("snapshot of seq %d: %w", s.Seq, err)
	}
	if len(s.Frame) > MaxFrameSize {
		return fmt.Errorf("%w: run %q seq %d: frame of %d bytes exceeds the %d-byte limit",
			ErrInvalid, s.RunID, s.Seq, len(s.Frame), MaxFrameSize)
	}
	return nil
}
