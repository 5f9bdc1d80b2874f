package engine

// The ledger's journal over the log: internal/journal, one Journal per
// ledger call; journalCore is the DB as its Core.

import (
	"context"

	jrn "github.com/continuumdb/continuum/internal/journal"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// journal is the journal of one ledger call (internal/journal), strict;
// a relaxed Do's sets Relaxed and Landed (atom.go).
func (db *DB) journal() jrn.Journal {
	return jrn.Journal{Core: journalCore{db}, Max: MaxSize, ErrTooLarge: ErrTooLarge}
}

func (db *DB) readCertificate(loc ledger.Loc) (*ledger.Certificate, error) {
	return jrn.ReadCertificate(journalCore{db}, loc)
}

func (db *DB) readIntent(loc ledger.Loc) (*ledger.Intent, error) {
	return jrn.ReadIntent(journalCore{db}, loc)
}

// journalCore is the DB as internal/journal's Core.
type journalCore struct{ db *DB }

func (c journalCore) Encode(dst []byte, k record.Kind, body []byte) []byte {
	return record.AppendLedger(dst, k, body, c.db.comp, c.db.curDict.Load())
}
func (c journalCore) Sealer() *record.Sealer { return c.db.sealer }
func (c journalCore) Sample(body []byte)     { c.db.sample(body) }
func (c journalCore) Append(ctx context.Context, rec []byte) (wal.Pos, error) {
	return c.db.append(ctx, rec)
}
func (c journalCore) AppendAsync(rec []byte) *wal.Waiter   { return c.db.log.AppendAsync(rec) }
func (c journalCore) Failed(err error)                     { c.db.failLog(err) }
func (c journalCore) Appended(n int)                       { c.db.noteAppended(n) }
func (c journalCore) ReadAt(pos wal.Pos) ([]byte, error)   { return c.db.log.ReadAt(pos) }
func (c journalCore) Decoder() *record.Decoder             { return c.db.decoder(true) }
func (c journalCore) File(seg uint64) string               { return c.db.segmentFile(seg) }
func (c journalCore) Ledger() *ledger.Ledger               { return c.db.ledger }
func (c journalCore) WaitLedger(ctx context.Context) error { return c.db.waitLedger(ctx) }

// Go runs f on a goroutine an engine checkpoint waits for (db.relaxed).
func (c journalCore) Go(f func()) {
	c.db.relaxed.Add(1)
	go func() { defer c.db.relaxed.Done(); f() }()
}
