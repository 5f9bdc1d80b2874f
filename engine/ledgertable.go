package engine

// The ledger's persisted table: loaded in the background after Open, from
// the file CHECKPOINT names.

import (
	"context"
	"fmt"
)

func (db *DB) loadLedgerTable(gen uint64) {
	defer close(db.ledgerReady)
	name := db.ledgerTableName(gen)
	b, err := readFile(db.fs, name)
	if err != nil {
		db.ledgerErr = fmt.Errorf("engine: read ledger table %s: %w", name, err)
		return
	}
	if err := db.ledger.LoadTable(b); err != nil {
		db.ledgerErr = fmt.Errorf("engine: ledger table %s: %w", name, err)
	}
}

func (db *DB) ledgerTableName(gen uint64) string {
	return db.path(fmt.Sprintf("ledger-%06d.tbl", gen))
}

// startLedger starts loading the persisted ledger table, once.
func (db *DB) startLedger() {
	if db.ledgerStart != nil {
		db.ledgerOnce.Do(db.ledgerStart)
	}
}

// waitLedger blocks until the persisted ledger table is loaded.
func (db *DB) waitLedger(ctx context.Context) error {
	db.startLedger()
	select {
	case <-db.ledgerReady:
		return db.ledgerErr
	case <-ctx.Done():
		return ctx.Err()
	}
}
