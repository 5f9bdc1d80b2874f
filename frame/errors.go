package frame

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test for them with errors.Is; the errors returned carry
// more detail (what and where) and wrap one of these.
var (
	// ErrCorrupt: an encoded frame, delta or compressed record is damaged
	// (truncated, a length beyond the input, an unknown enum, trailing bytes).
	ErrCorrupt = errors.New("frame: corrupt record")
	// ErrVersion: a record was written by a format version this package does
	// not know (its first byte names the kind but another version). The
	// error is a *CorruptError at offset 0 naming the version.
	ErrVersion = errors.New("frame: unsupported format version")
	// ErrUnknownCodec: a compressed record names a codec this package does
	// not know.
	ErrUnknownCodec = errors.New("frame: unknown codec")
	// ErrUnknownDict: a compressed record needs a dictionary id that is not
	// registered in the Dicts of the Compressor.
	ErrUnknownDict = errors.New("frame: unknown dictionary")
	// ErrTooLarge: a compressed record claims a decompressed size above
	// MaxDecompressedSize.
	ErrTooLarge = errors.New("frame: decompressed size exceeds limit")
	// ErrInvalidOp: Frame.Apply met an op that cannot apply to the frame
	// (unknown subgoal, bad status or role, duplicate id, ...). The frame is
	// unchanged.
	ErrInvalidOp = errors.New("frame: invalid delta op")
	// ErrUnresolved: a delta refers to a certified result that could not be
	// resolved: Apply was given it (only ApplyWith resolves references), or
	// the resolver given to ApplyWith or Resolve failed. The frame is
	// unchanged.
	ErrUnresolved = errors.New("frame: unresolved result reference")
	// ErrInvalidFrame: Frame.Validate found a frame that breaks an
	// invariant (duplicate subgoal id, unknown status, ...).
	ErrInvalidFrame = errors.New("frame: invalid frame")
	// ErrDict: a dictionary cannot be registered (id 0, empty or malformed,
	// or the id is taken by different bytes).
	ErrDict = errors.New("frame: bad dictionary")
	// ErrTooFewSamples: TrainDict was given too few or too small samples.
	ErrTooFewSamples = errors.New("frame: too few samples to train a dictionary")
)

// CorruptError describes where a record is damaged. It matches ErrCorrupt
// (or ErrVersion for an unknown version) with errors.Is.
type CorruptError struct {
	Record string // "delta", "frame" or "compressed record"
	Offset int    // byte offset in the record where the problem was found
	Detail string // what is wrong
	kind   error  // ErrCorrupt or ErrVersion
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%v: %s at offset %d: %s", e.kind, e.Record, e.Offset, e.Detail)
}

// Unwrap returns the sentinel the error matches.
func (e *CorruptError) Unwrap() error { return e.kind }
