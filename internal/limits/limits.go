package limits

import (
	"fmt"

	"github.com/continuumdb/continuum/frame"
)

// MaxSize is the one size limit, 63 MiB: a record's body and a run's
// encoded frame (engine.MaxSize).
const MaxSize = 63 << 20

// MaxResultSize bounds an action's result (engine.MaxResultSize).
const MaxResultSize = MaxSize - 1<<10

// MaxResult is MaxResultSize, or less in a store whose segments
// (segmentSize bytes) are smaller than a record of that size: a
// certificate must fit in one segment with the segment's header, the
// record's framing, a seal and the certificate's own fields (under 512
// bytes with the longest run id).
func MaxResult(segmentSize int64) int {
	return int(max(0, min(MaxResultSize, segmentSize-1<<10)))
}

// Errors are the engine's sentinels the checks' errors match.
type Errors struct{ TooLarge, InvalidDelta error }

// TooLarge is the error of a record or frame (what) of run at seq past
// MaxSize, size bytes, matching tooLarge.
func TooLarge(tooLarge error, run string, seq uint64, what string, size int) error {
	return fmt.Errorf("%w: run %q seq %d: %s is %d bytes, the limit is %d (engine.MaxSize); nothing was written; "+
		"keep large values out of the frame: set Options.BlobThreshold (say 256 KiB) so that values above it go to blobs, "+
		"or write one with Atom.PutBlob and put blob.Value(ref) in the delta",
		tooLarge, run, seq, what, size, MaxSize)
}

// CheckRecord returns a TooLarge error for a record body past MaxSize.
func CheckRecord(tooLarge error, run string, seq uint64, what string, body []byte) error {
	if len(body) > MaxSize {
		return TooLarge(tooLarge, run, seq, what, len(body))
	}
	return nil
}

// Growth bounds how many bytes applying d adds to a frame's encoding:
// the delta's encoding and 2 bytes an op.
func Growth(d *frame.Delta) int64 {
	return int64(frame.EncodedDeltaSize(d)) + 2*int64(d.Len())
}

// CheckFrame returns an error matching e.TooLarge if applying d (which
// CanApply accepted) to f, a run's frame whose encoded size is at most
// bound, would grow it past MaxSize, and otherwise the frame's size bound
// after d: bound plus Growth(d), measured exactly only past the limit.
// run and seq (the atom's) name the error.
func CheckFrame(bound int64, f *frame.Frame, d *frame.Delta, run string, seq uint64, e Errors) (int64, error) {
	bound += Growth(d)
	if bound <= MaxSize {
		return bound, nil
	}
	next := f.Clone()
	if err := next.Apply(d); err != nil {
		return 0, fmt.Errorf("%w: run %q seq %d: %v", e.InvalidDelta, run, seq, err)
	}
	exact := int64(frame.EncodedFrameSize(next))
	if exact > MaxSize {
		return 0, TooLarge(e.TooLarge, run, seq, "the frame after this delta", int(exact))
	}
	return exact, nil
}
