package keystore

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

func ring(t *testing.T, current string, ids ...string) seal.Keyring {
	t.Helper()
	m := map[string][]byte{}
	for i, id := range ids {
		m[id] = bytes.Repeat([]byte{byte(i + 1)}, seal.KeySize)
	}
	r, err := seal.NewKeyring(m, current)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCreateAddOpen(t *testing.T) {
	fs := vfs.NewMem()
	id := [16]byte{1, 2, 3}
	r := ring(t, "a", "a")
	s, err := Create(fs, "KEYS", id, r, false)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, scope := range []string{"run-1", "run-2", "run-3", "run-1"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Add(scope); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := len(s.Entries()); n != 4 { // the store's key and three runs'
		t.Fatalf("%d entries, want 4", n)
	}
	o, err := Open(fs, "KEYS", "STORE", id, r, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, scope := range []string{"", "run-1", "run-2", "run-3"} {
		a, _ := s.Keys().Scope(scope)
		b, ok := o.Keys().Scope(scope)
		if !ok || a == nil || a.No() != b.No() {
			t.Errorf("scope %q: reopened %v %v, written %v", scope, b, ok, a)
		}
	}
	// Another store's id, a missing file, the wrong keyring.
	if _, err := Open(fs, "KEYS", "STORE", [16]byte{9}, r, false); !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("another store's KEYS: %v", err)
	}
	if _, err := Open(fs, "NOPE", "STORE", id, r, false); !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("missing KEYS: %v", err)
	}
	if _, err := Open(fs, "KEYS", "STORE", id, ring(t, "b", "b"), false); err == nil {
		t.Error("a keyring without the store's key opened it")
	}
}

func TestRekeyAndReplace(t *testing.T) {
	fs := vfs.NewMem()
	id := [16]byte{7}
	s, err := Create(fs, "KEYS", id, ring(t, "a", "a", "b"), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add("r"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Rekey(); err != nil || n != 0 {
		t.Fatalf("Rekey with the current key already: %d, %v", n, err)
	}
	s.ring = ring(t, "b", "a", "b")
	if n, err := s.Rekey(); err != nil || n != 2 {
		t.Fatalf("Rekey: %d, %v; want 2", n, err)
	}
	// After the rewrap, a keyring with b alone opens it.
	if _, err := Open(fs, "KEYS", "STORE", id, ring(t, "b", "x", "b"), false); err != nil {
		t.Fatalf("open with the new key: %v", err)
	}
	// Replace: the erasure's change of the table, durable.
	tab, _ := s.Lock()
	next := tab.Clone()
	next.Erase("r")
	if err := s.Replace(next); err != nil {
		t.Fatal(err)
	}
	s.Unlock()
	o, err := Open(fs, "KEYS", "STORE", id, ring(t, "b", "a", "b"), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range o.Entries() {
		if e.Scope == "r" && !e.Erased {
			t.Fatal("the erased key is live after a reopen")
		}
	}
}

func TestLacking(t *testing.T) {
	s, err := Create(vfs.NewMem(), "KEYS", [16]byte{4}, ring(t, "a", "a"), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, scope := range []string{"run-1", "run-2"} {
		if err := s.Add(scope); err != nil {
			t.Fatal(err)
		}
	}
	if id := s.Lacking(slices.Values([]string{"run-1", "run-2"})); id != "" {
		t.Fatalf("Lacking = %q with every key", id)
	}
	if id := s.Lacking(slices.Values([]string{"run-1", "run-3", "run-4"})); id != "run-3" {
		t.Fatalf("Lacking = %q, want run-3", id)
	}
	if id := s.Lacking(slices.Values([]string(nil))); id != "" {
		t.Fatalf("Lacking of nothing = %q", id)
	}
}
