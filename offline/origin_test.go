package offline

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
)

func TestStoreOrigin(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("s", 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := StoreOrigin("s", fs); !errors.Is(err, ErrNotAStore) {
		t.Fatalf("a directory without STORE: %v, want ErrNotAStore", err)
	}
	sf := &layout.Store{ID: [16]byte{0xab, 0xcd, 1, 2, 3, 4, 5, 6}, Created: 1, Mode: layout.ChainKeyed}
	if err := layout.WriteFileAtomic(fs, fs.PathJoin("s", layout.StoreName), sf.Marshal(), true); err != nil {
		t.Fatal(err)
	}
	got, err := StoreOrigin("s", fs)
	if err != nil {
		t.Fatal(err)
	}
	if want := chain.OriginName("abcd0102030405060000000000000000"); got != want {
		t.Fatalf("origin %q, want %q", got, want)
	}
	b := sf.Marshal()
	b[len(b)-1] ^= 1
	if err := layout.WriteFileAtomic(fs, fs.PathJoin("s", layout.StoreName), b, true); err != nil {
		t.Fatal(err)
	}
	if _, err := StoreOrigin("s", fs); err == nil || errors.Is(err, ErrNotAStore) {
		t.Fatalf("a damaged STORE: %v, want its damage", err)
	}
}
