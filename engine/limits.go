package engine

// Size limits, checked before anything is appended (docs/DESIGN.md,
// "Guarantees").

import (
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/limits"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// MaxRunIDLen bounds a run id, in bytes (record.CheckRunID is the rule).
const MaxRunIDLen = record.MaxRunIDLen

// MaxSize is the one size limit, 63 MiB: a record's body and a run's
// encoded frame (frame.EncodedFrameSize). A Commit past it fails with
// ErrTooLarge and writes nothing; the atom stays running. A store whose
// SegmentSize is below 64 MiB is further limited by the segment.
// docs/DESIGN.md ("Guarantees") has the rest.
const MaxSize = 63 << 20

// MaxResultSize bounds an action's result (Do, Resolve). An intent past it
// is refused before exec; a result past it certifies the action as
// failed, the error matching ErrTooLarge (not in doubt: a later Do calls
// exec again with the same key).
const MaxResultSize = MaxSize - 1<<10

// The limits are internal/limits' (a compile error if they part).
var _, _ = [1]struct{}{}[MaxSize-limits.MaxSize], [1]struct{}{}[MaxResultSize-limits.MaxResultSize]

// maxResult is MaxResultSize, or less in a store whose segments are
// smaller than a record of that size (limits.MaxResult).
func (db *DB) maxResult() int { return limits.MaxResult(db.opts.SegmentSize) }

// sizeErrors are the sentinels of the size checks' errors.
var sizeErrors = limits.Errors{TooLarge: ErrTooLarge, InvalidDelta: ErrInvalidDelta}

// checkFrameSizeLocked returns an ErrTooLarge error if applying d (which
// CanApply accepted) would grow r's frame past MaxSize, and otherwise the
// frame's size bound after d (noteFrameSizeLocked's; limits.CheckFrame).
func (r *Run) checkFrameSizeLocked(d *frame.Delta, seq uint64) (int64, error) {
	return limits.CheckFrame(r.frameBoundLocked(), r.mu.frame, d, r.id, seq, sizeErrors)
}

// frameBoundLocked is the size bound of the run's frame as of lastSeq:
// its exact size, measured once per frame and seq (runstate.Sizes).
func (r *Run) frameBoundLocked() int64 { return r.mu.sizes.Encoded(r.mu.frame, r.mu.lastSeq) }

// noteFrameSizeLocked records the size bound of the frame as of seq, which
// just committed.
func (r *Run) noteFrameSizeLocked(bound int64) {
	r.mu.sizes.NoteEncoded(bound, r.mu.frame, r.mu.lastSeq)
}

// checkRecordSize returns an ErrTooLarge error for a record body past
// MaxSize.
func checkRecordSize(run string, seq uint64, what string, body []byte) error {
	return limits.CheckRecord(ErrTooLarge, run, seq, what, body)
}

// writable starts the directories' fsyncs, which a first write waits for,
// and refuses a write (what of run, if named) once the log failed.
func (db *DB) writable(what, run string) error {
	db.startDirSyncs()
	if err := db.logFailed(); err != nil {
		if what != "" {
			return fmt.Errorf("engine: %s %q: the log failed earlier; reopen the store: %w", what, run, err)
		}
		return fmt.Errorf("engine: the log failed earlier; reopen the store: %w", err)
	}
	return nil
}

// tooLargeForLog reports whether err is the log's refusal of a record or
// batch that does not fit (a segment smaller than the record): nothing was
// written, and the log is as usable as before.
func tooLargeForLog(err error) bool { return errors.Is(err, wal.ErrTooLarge) }
