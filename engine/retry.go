package engine

// Durable retries (ledger.RetryPolicy, internal/retry): the engine's side
// is the ledger's journal reading an attempt back by its position, and the
// observer's outcome for an action given up. The schedule, the attempts
// and the give-up are the ledger's (ledger/retrydo.go); the records are
// the ledger's intents (version 3) and certificates (version 2), framed as
// every intent and certificate is, so the commit path, Open's replay and
// the capabilities list do not change.

import (
	"errors"

	"github.com/continuumdb/continuum/ledger"
)

// ReadIntent reads back the intent at loc: the ledger asks for it to learn
// the attempt count of an action with a retry policy left in doubt, when
// its entry came from the persisted table (ledger.IntentReader).
func (j *journal) ReadIntent(loc ledger.Loc) (*ledger.Intent, error) {
	return j.db.readIntent(loc)
}

var _ ledger.IntentReader = (*journal)(nil)

// gaveUp reports whether err is a retry policy's give-up.
func gaveUp(err error) bool { return errors.Is(err, ledger.ErrGaveUp) }
