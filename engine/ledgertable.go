package engine

// The ledger's persisted table: loaded in the background after Open, from
// the file CHECKPOINT names, or rebuilt from the log
// (internal/checkpoint's LedgerTable).

import (
	"context"

	"github.com/continuumdb/continuum/internal/checkpoint"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

// deferLedgerTable sets up the load of the table of checkpoint generation
// gen, taken at log position at, into the ledger Open's replay built.
func (db *DB) deferLedgerTable(gen uint64, at wal.Pos) {
	db.ledgerTable.Defer(checkpoint.LedgerTableSource{FS: db.fs, Name: db.ledgerTableName(gen), Gen: gen, At: at,
		Sealer: db.sealer, Logger: db.logger, Log: db.log, SegmentFile: db.segmentFile, Decoder: db.decoder(true)}, db.ledger)
}

// ledgerRebuiltWhy returns why the ledger table was rebuilt, once loaded.
func (db *DB) ledgerRebuiltWhy() string { return db.ledgerTable.Rebuilt() }

func (db *DB) ledgerTableName(gen uint64) string { return db.path(layout.LedgerTableName(gen)) }

// startLedger starts loading the persisted ledger table, once.
func (db *DB) startLedger() { db.ledgerTable.Start() }

// waitLedger blocks until the persisted ledger table is loaded.
func (db *DB) waitLedger(ctx context.Context) error { return db.ledgerTable.Wait(ctx) }
