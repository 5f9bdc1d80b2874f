package checkpoint

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// LedgerTable is the ledger's persisted table as a restart sees it: loaded
// once, in the background, after Open, from the file CHECKPOINT names, and
// rebuilt from the log when that file is missing, damaged, or not the one
// CHECKPOINT names (a table of version 2 records the checkpoint generation
// and log position it was taken at). Calls that need the ledger Wait for
// it.
type LedgerTable struct {
	// ready is closed once the table is loaded (or there is none); err
	// and rebuilt are set before that and read only after.
	ready   chan struct{}
	once    sync.Once // runs load once
	load    func()    // starts the load; nil if there is none
	err     error
	rebuilt string // why the table was rebuilt from the log ("": it was not)
}

// NewLedgerTable returns a table not loaded yet: Wait blocks until Defer
// and Start, or None.
func NewLedgerTable() *LedgerTable { return &LedgerTable{ready: make(chan struct{})} }

// None records that there is no table to load (no CHECKPOINT, or one not
// used): the ledger is whole as the replay built it.
func (t *LedgerTable) None() { close(t.ready) }

// LedgerTableSource is where a table comes from.
type LedgerTableSource struct {
	FS     vfs.FS
	Name   string         // the table's file
	Gen    uint64         // the checkpoint generation that names it
	At     wal.Pos        // the log position it was taken at: CHECKPOINT's replay position
	Sealer *record.Sealer // opens a sealed table; nil: a plaintext store
	Logger *slog.Logger
	// The log, its segments' names, and a decoder of its ledger records
	// (its Skip is set here), for a rebuild.
	Log         *wal.Log
	SegmentFile func(seg uint64) string
	Decoder     *record.Decoder
}

// Defer sets up the load of src into l, started by Start. The records from
// src.At on were applied to l by Open and keep precedence over the table.
func (t *LedgerTable) Defer(src LedgerTableSource, l *ledger.Ledger) {
	t.load = func() { go t.loadFrom(src, l) }
}

// Start starts the load, once, if there is one.
func (t *LedgerTable) Start() {
	if t.load != nil {
		t.once.Do(t.load)
	}
}

// Wait starts the load if it has not started, and blocks until it ended
// (its error) or ctx ends.
func (t *LedgerTable) Wait(ctx context.Context) error {
	t.Start()
	select {
	case <-t.ready:
		return t.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Rebuilt returns why the table was rebuilt from the log, once loaded
// ("" before, or if it was not).
func (t *LedgerTable) Rebuilt() string {
	select {
	case <-t.ready:
		return t.rebuilt
	default:
		return ""
	}
}

// loadFrom loads the table of src; on any mismatch it rebuilds the table
// from the log records before src.At instead (a full read of the log
// before the tail).
func (t *LedgerTable) loadFrom(src LedgerTableSource, l *ledger.Ledger) {
	defer close(t.ready)
	why := ""
	b, err := layout.ReadFile(src.FS, src.Name)
	if err == nil && src.Sealer != nil {
		b, err = src.Sealer.OpenStoreFile(b, record.PlaceLedgerTable, src.Gen)
	}
	if err == nil {
		why = layout.CheckLedgerTable(b, src.Gen, src.At)
	} else if layout.NotExist(err) {
		why = "it is missing"
	} else {
		why = err.Error()
	}
	if why == "" {
		if err := l.LoadTable(b); err == nil {
			return
		} else {
			why = err.Error()
		}
	}
	src.Logger.Warn("engine: ledger table not used; rebuilding it from the log", "file", src.Name, "reason", why)
	tb, err := RebuildLedgerTable(src.Log, src.SegmentFile, src.Decoder, src.At)
	if err == nil {
		err = l.LoadTable(tb)
	}
	if err != nil {
		t.err = fmt.Errorf("engine: rebuild ledger table %s from the log: %w", src.Name, err)
		return
	}
	t.rebuilt = fmt.Sprintf("%s: %s", src.Name, why)
}

// RebuildLedgerTable builds the ledger table as of the replay position to
// from the ledger records of log before it, decoded with dec (whose Skip
// it sets).
func RebuildLedgerTable(log *wal.Log, file func(seg uint64) string, dec *record.Decoder, to wal.Pos) ([]byte, error) {
	l := ledger.New()
	dec.Skip = func(k record.Kind, _ []byte) bool { return k != record.KindIntent && k != record.KindCert }
	c, err := record.NewCursor(log, file, wal.Pos{}, dec)
	if err != nil {
		return nil, fmt.Errorf("engine: rebuild ledger table: %w", err)
	}
	defer c.Close()
	c.Until(to)
	for c.Next() {
		r := c.Record()
		loc := r.Pos
		switch {
		case r.Erased:
			// Sealed with an erased key: its run was erased, and the
			// ledger forgot it.
		case r.Kind == record.KindIntent:
			l.ApplyIntent(r.Intent, loc)
		case r.Kind == record.KindCert:
			l.ApplyCertificate(r.Cert, loc, false)
		}
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	return l.AppendTable(nil), nil
}
