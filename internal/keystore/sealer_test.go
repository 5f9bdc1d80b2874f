package keystore

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/record"
)

// TestSealer: what the sealer of a new store seals with a run's key opens
// with the sealer of KEYS reopened, and only for that store's id; a run
// without a data key seals nothing.
func TestSealer(t *testing.T) {
	fs := vfs.NewMem()
	id := [16]byte{4, 5, 6}
	r := ring(t, "a", "a")
	s, err := Create(fs, "KEYS", id, r, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add("run-1"); err != nil {
		t.Fatal(err)
	}
	sealed, err := s.Sealer().Seal(nil, []byte("result"), record.KindEnd, "run-1", 3)
	if err != nil {
		t.Fatal(err)
	}
	o, err := Open(fs, "KEYS", "STORE", id, r, false)
	if err != nil {
		t.Fatal(err)
	}
	sl := o.Sealer()
	if sl.KeysFile != "KEYS" || sl.Store != id {
		t.Fatalf("sealer of store %x, keys file %q", sl.Store, sl.KeysFile)
	}
	if plain, err := sl.Open(nil, sealed, record.KindEnd, "run-1", 3); err != nil || string(plain) != "result" {
		t.Fatalf("reopened: %q, %v", plain, err)
	}
	other := *sl
	other.Store = [16]byte{7}
	if _, err := other.Open(nil, sealed, record.KindEnd, "run-1", 3); err == nil {
		t.Fatal("a payload of another store's id opened")
	}
	if _, err := sl.Seal(nil, []byte("x"), record.KindEnd, "run-2", 1); err == nil {
		t.Fatal("a run without a data key sealed a payload")
	}
}
