//go:build unix

package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
)

// TestWaitsFileCutShortWhileMapped: WAITS is read in place, mapped. Cut
// short by another process while the store is open, a read of a page past
// its new end raised SIGBUS and ended the process. Now the index of waits
// is rebuilt from the log (Stats.WaitsRebuilt names the fault), the waits
// due wake as the log says, and the store opens again.
func TestWaitsFileCutShortWhileMapped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	clock := &fakeClock{now: t0}
	opts := waitOptions(vfs.Default, clock)
	open := func() *DB {
		t.Helper()
		db, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	const n = 400
	for i := range n {
		r := openRun(t, db, fmt.Sprintf("r%03d", i))
		if _, err := r.Sleep(ctx, t0.Add(time.Duration(n-i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, layout.WaitsName)
	if fi, err := os.Stat(path); err != nil || fi.Size() < 4*layout.WaitsBlock {
		t.Fatalf("WAITS: %v, %v; want one of several pages", fi, err)
	}
	db = open()
	if ws, err := db.Ready(ctx, 0); err != nil || len(ws) != 0 {
		t.Fatalf("before the cut: %v, %v", ws, err)
	}
	if s := db.Stats(); s.WaitsRebuilt != "" {
		t.Fatalf("WAITS was not used: %s", s.WaitsRebuilt)
	}
	if err := os.Truncate(path, layout.WaitsBlock); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(3 * time.Minute))
	ws, err := db.Ready(ctx, 0)
	if err != nil || len(ws) != 3 || ws[0].Run != "r399" || ws[2].Run != "r397" {
		t.Fatalf("due after the cut: %+v %v", ws, err)
	}
	if s := db.Stats(); !strings.Contains(s.WaitsRebuilt, "faulted") {
		t.Fatalf("Stats.WaitsRebuilt = %q, want the fault named", s.WaitsRebuilt)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open()
	defer db.Close()
	if ws, err := db.Ready(ctx, 0); err != nil || len(ws) != 3 {
		t.Fatalf("after a reopen: %+v %v", ws, err)
	}
}
