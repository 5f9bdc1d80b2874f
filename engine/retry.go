package engine

// Durable retries (docs/DESIGN.md, "Durable retries"): the ledger's, but
// for the give-up's outcome (the journal reads an attempt back:
// internal/journal).

import (
	"errors"

	"github.com/continuumdb/continuum/ledger"
)

// gaveUp reports whether err is a retry policy's give-up.
func gaveUp(err error) bool { return errors.Is(err, ledger.ErrGaveUp) }
