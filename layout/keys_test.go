package layout

import (
	"bytes"
	"errors"
	"testing"

	"github.com/continuumdb/continuum/internal/goldenhex"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// goldenKeys is KEYS of the golden store holding a live store key wrapped
// by "k1" and run r1's key, erased.
const goldenKeys = `
	434e544d4b455953   # "CNTMKEYS"
	0100               # version 1
	` + hexStoreID + ` # store id
	17                 # key table: 23 bytes
	434b4559 01        # "CKEY", table version 1
	02                 # 2 entries
	01 00 01 026b31 03616263 # key 1, scope "" (the store), live, wrapped by "k1": "abc"
	02 027231 02 00 00       # key 2, scope "r1", erased: no key id, no wrapped key
	fb514408           # crc32c of all before`

// TestGoldenKeys pins KEYS byte for byte and reads it back.
func TestGoldenKeys(t *testing.T) {
	want := goldenhex.Decode(t, goldenKeys)
	tbl, err := ParseKeys(KeysName, goldenStoreID, want)
	if err != nil {
		t.Fatal(err)
	}
	es := tbl.Entries()
	if len(es) != 2 || es[0].No != 1 || es[0].Scope != "" || es[0].KeyID != "k1" || string(es[0].Wrapped) != "abc" ||
		es[1].No != 2 || es[1].Scope != "r1" || !es[1].Erased {
		t.Fatalf("read back as %+v", es)
	}
	if got := MarshalKeys(goldenStoreID, tbl); !bytes.Equal(got, want) {
		t.Fatalf("KEYS encoding changed:\n got %x\nwant %x", got, want)
	}
}

// TestKeysDamage: every truncation, a flipped byte and the KEYS of
// another store are corruption errors, never a table.
func TestKeysDamage(t *testing.T) {
	good := goldenhex.Decode(t, goldenKeys)
	var ce *record.CorruptionError
	for n := 0; n < len(good); n++ {
		if _, err := ParseKeys(KeysName, goldenStoreID, good[:n]); !errors.As(err, &ce) {
			t.Fatalf("truncated to %d bytes: %v, want a corruption error", n, err)
		}
	}
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		if _, err := ParseKeys(KeysName, goldenStoreID, b); !errors.As(err, &ce) {
			t.Fatalf("byte %d flipped: %v, want a corruption error", i, err)
		}
	}
	if _, err := ParseKeys(KeysName, [16]byte{1}, good); !errors.As(err, &ce) {
		t.Fatalf("KEYS of another store: %v, want a corruption error", err)
	}
}

// FuzzParseKeys: ParseKeys never panics, and what it accepts encodes back
// to the same bytes.
func FuzzParseKeys(f *testing.F) {
	var empty seal.Table
	f.Add(MarshalKeys(goldenStoreID, &empty))
	f.Add(goldenhex.Decode(f, goldenKeys))
	f.Fuzz(func(t *testing.T, b []byte) {
		tbl, err := ParseKeys(KeysName, goldenStoreID, b)
		if err != nil {
			return
		}
		if got := MarshalKeys(goldenStoreID, tbl); !bytes.Equal(got, b) {
			t.Fatalf("accepted %x, encodes back as %x", b, got)
		}
	})
}
