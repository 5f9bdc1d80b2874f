package engine

// The ledger's persisted table: loaded in the background after Open, from
// the file CHECKPOINT names, and rebuilt from the log when that file is
// missing, damaged, or not the one CHECKPOINT names (a table of version 2
// records the checkpoint generation and log position it was taken at).

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// loadLedgerTable loads the table of checkpoint generation gen, taken at
// log position at; on any mismatch it rebuilds the table from the log
// records before at instead (a full read of the log before the tail).
func (db *DB) loadLedgerTable(gen uint64, at wal.Pos) {
	defer close(db.ledgerReady)
	name := db.ledgerTableName(gen)
	why := ""
	b, err := layout.ReadFile(db.fs, name)
	if err == nil && db.sealer != nil {
		b, err = db.sealer.OpenStoreFile(b, record.PlaceLedgerTable, gen)
	}
	if err == nil {
		why = layout.CheckLedgerTable(b, gen, at)
	} else if layout.NotExist(err) {
		why = "it is missing"
	} else {
		why = err.Error()
	}
	if why == "" {
		if err := db.ledger.LoadTable(b); err == nil {
			return
		} else {
			why = err.Error()
		}
	}
	db.logger.Warn("engine: ledger table not used; rebuilding it from the log", "file", name, "reason", why)
	t, err := db.rebuildLedgerTable(at)
	if err == nil {
		err = db.ledger.LoadTable(t)
	}
	if err != nil {
		db.ledgerErr = fmt.Errorf("engine: rebuild ledger table %s from the log: %w", name, err)
		return
	}
	db.ledgerRebuilt = fmt.Sprintf("%s: %s", name, why)
}

// ledgerRebuiltWhy returns why the ledger table was rebuilt, once loaded.
func (db *DB) ledgerRebuiltWhy() string {
	select {
	case <-db.ledgerReady:
		return db.ledgerRebuilt
	default:
		return ""
	}
}

func (db *DB) ledgerTableName(gen uint64) string { return db.path(layout.LedgerTableName(gen)) }

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
