package lifecycle

import (
	"time"

	"github.com/continuumdb/continuum/chain"
)

// End is how a run ended: the engine's Run.mu.end, set once the end
// record is durable (or as a restart finds it: CHECKPOINT's row, the
// log's record) and immutable from then on.
type End struct {
	Status uint8 // final: Completed, Failed or Cancelled
	At     time.Time
	Result []byte
	Head   chain.Hash // h(lastSeq+1): the end record's link
	// Stored is the result as the end record stores it, sealed, in an
	// encrypted store (nil otherwise): what CHECKPOINT's row holds there.
	Stored []byte
}

// StatusName is the name of the status the run ended with.
func (e *End) StatusName() string { return StatusName(e.Status) }

// RowResult is the result CHECKPOINT's row of the run holds: the end
// record's stored result (sealed in an encrypted store).
func (e *End) RowResult() []byte {
	if e.Stored != nil {
		return e.Stored
	}
	return e.Result
}

// ChainHead returns the seq and head of the last link of a run whose
// last atom is last with head head, ended by e (nil: not ended): the
// end's link, one past last, once it ended (final).
func ChainHead(e *End, last uint64, head chain.Hash) (seq uint64, h chain.Hash, final bool) {
	if e != nil {
		return last + 1, e.Head, true
	}
	return last, head, false
}
