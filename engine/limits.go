package engine

// Size limits. What Commit, Do and Resolve accept, the engine reads back:
// every limit is checked when a record is written, before anything is
// appended, so that no acknowledged record or frame is refused when read.

import (
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// MaxSize is the one size limit of the engine, 63 MiB: the encoded size of
// a record's body (an atom's delta and action fingerprints, an action's
// intent or certificate with its result) and the encoded size of a run's
// frame (frame.EncodedFrameSize: the state a snapshot or frame file holds).
// It sits below frame.MaxDecompressedSize (what the reader accepts) and
// wal.MaxRecordSize (what a log record holds) with room for the record's
// header and compression framing.
//
// A Commit whose delta is larger, or that would grow the frame past it,
// fails with ErrTooLarge and writes nothing; the atom stays running and can
// commit a smaller delta. A frame near the limit can always shrink (a
// Delete, DropMessages or ClearScratch commits). A store with a
// SegmentSize below 64 MiB is further limited by the segment: a record
// must fit in one.
// MaxRunIDLen bounds a run id, in bytes (record.CheckRunID is the rule).
const MaxRunIDLen = record.MaxRunIDLen

const MaxSize = 63 << 20

// MaxResultSize bounds an action's result (Do, Resolve): its certificate,
// which adds the run id, the fingerprint and a few varints, must stay
// within MaxSize.
//
// Do checks the action's intent before exec, so an oversized action is
// refused with nothing run. A result found too large after exec cannot be
// certified as it is; Do then certifies the action as failed, with a
// reason that says the result was too large, and returns an error matching
// ErrTooLarge. The action is not left in doubt: a later Do of it calls exec
// again with the same idempotency key (the downstream sees the key twice),
// so a tool whose result may be this large should return a reference to
// it (a file, an object name) instead.
const MaxResultSize = MaxSize - 1<<10

// maxResult is MaxResultSize, or less in a store whose segments are
// smaller than a record of that size: a certificate must fit in one
// segment with the segment's header, the record's framing, a seal and the
// certificate's own fields (under 512 bytes with the longest run id).
func (db *DB) maxResult() int {
	return int(max(0, min(MaxResultSize, db.opts.SegmentSize-1<<10)))
}

// tooLarge is the error of a record or frame past MaxSize.
func tooLarge(run string, seq uint64, what string, size int) error {
	return fmt.Errorf("%w: run %q seq %d: %s is %d bytes, the limit is %d (engine.MaxSize); nothing was written; "+
		"keep large values out of the frame: set Options.BlobThreshold (say 256 KiB) so that values above it go to blobs, "+
		"or write one with Atom.PutBlob and put blob.Value(ref) in the delta",
		ErrTooLarge, run, seq, what, size, MaxSize)
}

// checkFrameSizeLocked returns an ErrTooLarge error if applying d (which
// CanApply accepted) would grow r's frame past MaxSize, and otherwise the
// frame's size bound after d, to be recorded by noteFrameSizeLocked once
// d applied. The bound is the frame's exact size when it was last measured
// plus the encoded size of every delta since: no op grows a frame by more
// than its own encoding plus the count varint it may lengthen (2 bytes).
// Only a frame whose bound passes the limit is measured exactly, on a copy
// with d applied.
func (r *Run) checkFrameSizeLocked(d *frame.Delta, seq uint64) (int64, error) {
	bound := r.frameBoundLocked() + int64(frame.EncodedDeltaSize(d)) + 2*int64(d.Len())
	if bound <= MaxSize {
		return bound, nil
	}
	next := r.mu.frame.Clone()
	if err := next.Apply(d); err != nil {
		return 0, fmt.Errorf("%w: run %q seq %d: %v", ErrInvalidDelta, r.id, seq, err)
	}
	exact := int64(frame.EncodedFrameSize(next))
	if exact > MaxSize {
		return 0, tooLarge(r.id, seq, "the frame after this delta", int(exact))
	}
	return exact, nil
}

// frameBoundLocked is the size bound of the run's frame as of lastSeq:
// its exact size, measured once per frame and seq.
func (r *Run) frameBoundLocked() int64 {
	if r.mu.sizeFrame != r.mu.frame || r.mu.sizeSeq != r.mu.lastSeq {
		r.mu.sizeBound = int64(frame.EncodedFrameSize(r.mu.frame))
		r.mu.sizeFrame, r.mu.sizeSeq = r.mu.frame, r.mu.lastSeq
	}
	return r.mu.sizeBound
}

// noteFrameSizeLocked records the size bound of the frame as of seq, which
// just committed.
func (r *Run) noteFrameSizeLocked(bound int64) {
	r.mu.sizeBound, r.mu.sizeFrame, r.mu.sizeSeq = bound, r.mu.frame, r.mu.lastSeq
}

// checkRecordSize returns an ErrTooLarge error for a record body past
// MaxSize.
func checkRecordSize(run string, seq uint64, what string, body []byte) error {
	if len(body) > MaxSize {
		return tooLarge(run, seq, what, len(body))
	}
	return nil
}

// tooLargeForLog reports whether err is the log's refusal of a record or
// batch that does not fit (a segment smaller than the record): nothing was
// written, and the log is as usable as before.
func tooLargeForLog(err error) bool { return errors.Is(err, wal.ErrTooLarge) }
