package record

import (
	"errors"
	"fmt"
)

// ErrCorrupt marks a damaged store: a log record, or a file derived from
// the log, that breaks its format. Every *CorruptionError matches it.
var ErrCorrupt = errors.New("continuum: corrupt store")

// CorruptionError says where a store is damaged. It matches ErrCorrupt,
// and unwraps to its cause (a *wal.CorruptionError, a frame or ledger
// decoding error, ...), when it has one.
type CorruptionError struct {
	File   string // path of the damaged file
	Offset int64  // byte offset of the damage in File, if known (0: not)
	Run    string // run concerned, if known
	Seq    uint64 // seq concerned (the first affected), if known
	Reason string // what is wrong, in words
	Err    error  // the cause, if any
}

func (e *CorruptionError) Error() string {
	s := ErrCorrupt.Error() + ": " + e.File
	if e.Offset != 0 {
		s += fmt.Sprintf(" offset %d", e.Offset)
	}
	if e.Run != "" {
		s += fmt.Sprintf(": run %q", e.Run)
		if e.Seq != 0 {
			s += fmt.Sprintf(" seq %d", e.Seq)
		}
	}
	return s + ": " + e.Reason
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the cause.
func (e *CorruptionError) Unwrap() error { return e.Err }

// Corruptf returns a *CorruptionError of file, without a position.
func Corruptf(file string, format string, args ...any) error {
	return &CorruptionError{File: file, Reason: fmt.Sprintf(format, args...)}
}
