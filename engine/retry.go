package engine

// Durable retries (docs/DESIGN.md, "Durable retries"): the ledger's, but
// for the journal reading an attempt back.

import "github.com/continuumdb/continuum/ledger"

// ReadIntent reads back the intent at loc (ledger.IntentReader).
func (j *journal) ReadIntent(loc ledger.Loc) (*ledger.Intent, error) {
	return j.db.readIntent(loc)
}
