package snapshot

import "errors"

// Sentinel errors. Callers test them with errors.Is; the errors returned by
// this package wrap them with the run, seq or key they concern.
var (
	// ErrNotFound reports that the asked-for snapshot, position or metadata
	// key is not in the store. Positions wraps it with the first missing seq.
	ErrNotFound = errors.New("snapshot: not found")

	// ErrCorrupt reports a stored key or value that fails its checks (bad
	// magic, unknown version, checksum mismatch, truncation, a value under the
	// wrong key). The wrapping error names the run and seq, or the key.
	ErrCorrupt = errors.New("snapshot: corrupt")

	// ErrClosed reports a call on a Store after Close, or a Commit of a Batch
	// whose Store was closed.
	ErrClosed = errors.New("snapshot: store closed")

	// ErrFailed reports that a write to Pebble failed in a way Pebble cannot
	// recover from (a failed WAL write or fsync). It is sticky: every later
	// write returns it, without retrying, until the store is closed and
	// reopened. A batch whose Commit failed so may or may not be durable.
	ErrFailed = errors.New("snapshot: store failed")

	// ErrNewerFormat reports a store written by a newer version of this
	// package. It is not corruption: the store must not be rebuilt over.
	ErrNewerFormat = errors.New("snapshot: store written in a newer format")

	// ErrReadOnly reports a write to a Store opened with Options.ReadOnly.
	ErrReadOnly = errors.New("snapshot: store is read-only")

	// ErrInvalid reports a bad argument: a run id the run-id rule refuses
	// (empty, oversized, not UTF-8, or with a control character), a
	// negative log offset, a frame over MaxFrameSize, an empty range, a
	// Batch used after Commit, and so on.
	ErrInvalid = errors.New("snapshot: invalid argument")
)
