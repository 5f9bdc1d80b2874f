package record

import (
	"bytes"
	"errors"
	"testing"

	"github.com/continuumdb/continuum/internal/goldenhex"
	"github.com/continuumdb/continuum/seal"
)

// TestGoldenBlockAAD pins the additional data of a sealed block of a
// derived file (frozen: a change makes every WAITS sealed per block fail
// to open, and the store rebuild its index from the log).
func TestGoldenBlockAAD(t *testing.T) {
	want := goldenhex.Decode(t, `
		636f6e74696e75756d2f7265636f7264207365616c6564 # "continuum/record sealed"
		010000000000000000000000000000ff             # store id
		f6                                           # kind: a block of WAITS
		00                                           # run ""
		09                                           # generation 9
		03 616263                                    # bind "abc" (the file's header)
		8001                                         # block 128`)
	if got := appendBlockAAD(nil, [16]byte{1, 15: 0xff}, PlaceWaitsBlock, 9, []byte("abc"), 128); !bytes.Equal(got, want) {
		t.Fatalf("block AAD changed:\n got %x\nwant %x", got, want)
	}
}

// TestBlockSeal: a block opens at its place only (its index, its
// generation, its header, its kind, its store); its length is SealedLen.
func TestBlockSeal(t *testing.T) {
	s := testSealer(t)
	bs, err := s.StoreBlockSealer(PlaceWaitsBlock, 9)
	if err != nil {
		t.Fatal(err)
	}
	plain := bytes.Repeat([]byte("x"), 100)
	sealed, err := bs.Seal(nil, plain, []byte("head"), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) != SealedLen(len(plain), bs.KeyNo()) {
		t.Fatalf("sealed %d bytes, SealedLen says %d", len(sealed), SealedLen(len(plain), bs.KeyNo()))
	}
	if got, err := s.OpenStoreBlock(nil, sealed, PlaceWaitsBlock, 9, []byte("head"), 3); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open: %v", err)
	}
	other := *s
	other.Store[0]++
	for what, open := range map[string]func() error{
		"another index": func() error {
			_, err := s.OpenStoreBlock(nil, sealed, PlaceWaitsBlock, 9, []byte("head"), 4)
			return err
		},
		"another generation": func() error {
			_, err := s.OpenStoreBlock(nil, sealed, PlaceWaitsBlock, 8, []byte("head"), 3)
			return err
		},
		"another header": func() error {
			_, err := s.OpenStoreBlock(nil, sealed, PlaceWaitsBlock, 9, []byte("heaD"), 3)
			return err
		},
		"another kind": func() error { _, err := s.OpenStoreBlock(nil, sealed, PlaceWaits, 9, []byte("head"), 3); return err },
		"another store": func() error {
			_, err := other.OpenStoreBlock(nil, sealed, PlaceWaitsBlock, 9, []byte("head"), 3)
			return err
		},
	} {
		if err := open(); !errors.Is(err, seal.ErrAuth) {
			t.Errorf("%s: %v, want seal.ErrAuth", what, err)
		}
	}
}
