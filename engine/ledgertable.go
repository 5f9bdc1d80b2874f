package engine

// The ledger's persisted table (internal/checkpoint's LedgerTable).

import (
	"context"

	"github.com/continuumdb/continuum/internal/checkpoint"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

// deferLedgerTable sets up the load of generation gen's table (taken at at).
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
