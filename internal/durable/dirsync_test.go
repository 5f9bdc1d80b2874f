package durable

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestDirSyncs: the fsyncs start once, and Wait returns their error (a
// missing directory's, the others synced all the same); noSync, Skip and
// a Settle before Start end them without a sync; once ended, a later
// Settle, Skip or Start changes nothing.
func TestDirSyncs(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/a/b", 0o700); err != nil {
		t.Fatal(err)
	}
	closed := errors.New("closed")
	calls := 0
	dirs := func(ds ...string) func() []string {
		return func() []string { calls++; return ds }
	}

	var s DirSyncs
	if s.Ready() {
		t.Fatal("a zero DirSyncs is ready")
	}
	s.Init()
	if !s.Ready() || s.Synced() || s.Err() != nil {
		t.Fatal("a new DirSyncs has ended")
	}
	s.Start(fs, false, dirs("/a", "/a/b"))
	s.Start(fs, false, dirs("/missing"))
	if err := s.Wait(); err != nil || !s.Synced() || calls != 1 {
		t.Fatalf("Wait = %v, synced %v, dirs called %d times", err, s.Synced(), calls)
	}
	s.Settle(closed)
	if s.Err() != nil {
		t.Fatalf("Settle after the fsyncs: Err = %v", s.Err())
	}

	var bad DirSyncs
	bad.Init()
	bad.Start(fs, false, dirs("/a", "/missing", "/a/b"))
	if err := bad.Wait(); err == nil || !strings.Contains(err.Error(), "/missing") || bad.Synced() || bad.Err() != err {
		t.Fatalf("a missing directory: Wait = %v, synced %v", err, bad.Synced())
	}

	for _, tc := range []struct {
		name string
		end  func(s *DirSyncs)
		err  error
	}{
		{"noSync", func(s *DirSyncs) { s.Start(fs, true, dirs("/missing")) }, nil},
		{"Skip", func(s *DirSyncs) { s.Skip() }, nil},
		{"Settle", func(s *DirSyncs) { s.Settle(closed) }, closed},
	} {
		calls = 0
		var s DirSyncs
		s.Init()
		tc.end(&s)
		s.Start(fs, false, dirs("/missing"))
		s.Skip()
		if err := s.Wait(); err != tc.err || calls != 0 || s.Synced() != (tc.err == nil) {
			t.Errorf("%s: Wait = %v, dirs called %d times, synced %v", tc.name, err, calls, s.Synced())
		}
	}
}
