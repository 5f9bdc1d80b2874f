package checkpoint

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

func TestLedgerTableNone(t *testing.T) {
	lt := NewLedgerTable()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := lt.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait before None: %v, want the context's end", err)
	}
	lt.None()
	if err := lt.Wait(context.Background()); err != nil || lt.Rebuilt() != "" {
		t.Fatalf("Wait after None: %v, rebuilt %q", err, lt.Rebuilt())
	}
}

func TestLedgerTableMissingRebuilt(t *testing.T) {
	fs := vfs.NewMem()
	l, err := wal.Open("/s/wal", &wal.Options{FS: fs, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lt := NewLedgerTable()
	lt.Defer(LedgerTableSource{FS: fs, Name: "/s/ledger.7", Gen: 7, Logger: slog.Default(), Log: l,
		SegmentFile: wal.SegmentName, Decoder: &record.Decoder{Ledger: true}}, ledger.New())
	if lt.Rebuilt() != "" {
		t.Fatal("Rebuilt before the load")
	}
	if err := lt.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if why := lt.Rebuilt(); !strings.Contains(why, "/s/ledger.7: it is missing") {
		t.Fatalf("Rebuilt = %q, want the file named and why", why)
	}
}
