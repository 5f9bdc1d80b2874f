package wal

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test for them with errors.Is.
var (
	// ErrClosed is returned by operations on a closed log, and by appends
	// still pending when Close gave up on them.
	ErrClosed = errors.New("wal: log closed")
	// ErrCorrupt matches every *CorruptionError.
	ErrCorrupt = errors.New("wal: corrupt log")
	// ErrReadOnly is returned by writes to a log opened with ReadOnly.
	ErrReadOnly = errors.New("wal: log opened read-only")
	// ErrTooLarge is returned for a record or batch that cannot fit in one
	// segment, or a record larger than MaxRecordSize.
	ErrTooLarge = errors.New("wal: record too large")
	// ErrBadPos is returned for a position that is not a record of this log.
	ErrBadPos = errors.New("wal: bad position")
	// ErrBadOptions is returned by Open for invalid Options.
	ErrBadOptions = errors.New("wal: bad options")
)

// CorruptionError reports a damaged log: which segment (and file), at which
// byte offset, and why. It matches ErrCorrupt with errors.Is.
type CorruptionError struct {
	Segment uint64
	Offset  int64
	File    string
	Reason  string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("wal: corrupt log: segment %d (%s) offset %d: %s", e.Segment, e.File, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }
