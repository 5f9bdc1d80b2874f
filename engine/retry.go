package engine

// Durable retries (docs/DESIGN.md, "Durable retries"): the ledger's, but
// for the journal reading an attempt back and the give-up's outcome.

import (
	"errors"

	"github.com/continuumdb/continuum/ledger"
)

// ReadIntent reads back the intent at loc (ledger.IntentReader).
func (j *journal) ReadIntent(loc ledger.Loc) (*ledger.Intent, error) {
	return j.db.readIntent(loc)
}

var _ ledger.IntentReader = (*journal)(nil)

// gaveUp reports whether err is a retry policy's give-up.
func gaveUp(err error) bool { return errors.Is(err, ledger.ErrGaveUp) }
