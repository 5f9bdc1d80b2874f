package layout

import (
	"bytes"
	"errors"
	"slices"
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

// goldenKeysV2 is goldenKeys as this version writes it (version 2), with
// one addition: run r3's key, added after the table.
const goldenKeysV2 = `
	434e544d4b455953   # "CNTMKEYS"
	0200               # version 2
	` + hexStoreID + ` # store id
	17                 # key table: 23 bytes
	434b4559 01        # "CKEY", table version 1
	02                 # 2 entries
	01 00 01 026b31 03616263 # key 1, scope "" (the store), live, wrapped by "k1": "abc"
	02 027231 02 00 00       # key 2, scope "r1", erased: no key id, no wrapped key
	baacd019           # crc32c of all before
	0c                 # an addition of 12 bytes:
	03 027233 01 026b31 03787977 # key 3, scope "r3", live, wrapped by "k1": "xyw"
	179b9b4d           # crc32c of the addition's length and entry`

// TestGoldenKeys pins KEYS byte for byte: version 1 reads back (and is
// written as version 2), version 2 reads back with its addition, and its
// table and addition are what MarshalKeys and AppendKeysAddition write.
func TestGoldenKeys(t *testing.T) {
	v1 := goldenhex.Decode(t, goldenKeys)
	tbl, err := ParseKeys(KeysName, goldenStoreID, v1)
	if err != nil {
		t.Fatal(err)
	}
	es := tbl.Entries()
	if len(es) != 2 || es[0].No != 1 || es[0].Scope != "" || es[0].KeyID != "k1" || string(es[0].Wrapped) != "abc" ||
		es[1].No != 2 || es[1].Scope != "r1" || !es[1].Erased {
		t.Fatalf("read back as %+v", es)
	}
	v2 := goldenhex.Decode(t, goldenKeysV2)
	added := seal.Entry{No: 3, Scope: "r3", KeyID: "k1", Wrapped: []byte("xyw")}
	if got := AppendKeysAddition(MarshalKeys(goldenStoreID, tbl), added); !bytes.Equal(got, v2) {
		t.Fatalf("KEYS encoding changed:\n got %x\nwant %x", got, v2)
	}
	tbl2, good, err := ParseKeysFile(KeysName, goldenStoreID, v2)
	if err != nil || good != len(v2) {
		t.Fatalf("version 2: %v, %d of %d bytes whole", err, good, len(v2))
	}
	if es := tbl2.Entries(); len(es) != 3 || es[2].No != 3 || es[2].Scope != "r3" || es[2].Erased || string(es[2].Wrapped) != "xyw" {
		t.Fatalf("version 2 read back as %+v", es)
	}
}

// TestKeysDamage: damage to KEYS is a corruption error, never a table; a
// last addition cut short is a torn append, ignored, and ParseKeysFile
// says where the whole file ends.
func TestKeysDamage(t *testing.T) {
	var ce *record.CorruptionError
	v1 := goldenhex.Decode(t, goldenKeys)
	for n := 0; n < len(v1); n++ {
		if _, err := ParseKeys(KeysName, goldenStoreID, v1[:n]); !errors.As(err, &ce) {
			t.Fatalf("version 1 truncated to %d bytes: %v, want a corruption error", n, err)
		}
	}
	for i := range v1 {
		b := bytes.Clone(v1)
		b[i] ^= 0x40
		if _, err := ParseKeys(KeysName, goldenStoreID, b); !errors.As(err, &ce) {
			t.Fatalf("version 1, byte %d flipped: %v, want a corruption error", i, err)
		}
	}
	if _, err := ParseKeys(KeysName, goldenStoreID, append(bytes.Clone(v1), 0)); !errors.As(err, &ce) {
		t.Fatalf("version 1 with a byte after it: %v, want a corruption error", err)
	}
	if _, err := ParseKeys(KeysName, [16]byte{1}, v1); !errors.As(err, &ce) {
		t.Fatalf("KEYS of another store: %v, want a corruption error", err)
	}

	v2 := goldenhex.Decode(t, goldenKeysV2)
	base := len(v2) - 17 // the table's part: the addition is 17 bytes
	for n := 0; n < len(v2); n++ {
		tbl, good, err := ParseKeysFile(KeysName, goldenStoreID, v2[:n])
		switch {
		case n < base && !errors.As(err, &ce):
			t.Fatalf("version 2 truncated to %d bytes, in its table: %v, want a corruption error", n, err)
		case n == base && (err != nil || good != base || tbl.Len() != 2):
			t.Fatalf("version 2 truncated to its table: %v, appended at %d, want %d", err, good, base)
		case n > base && (err != nil || good != -1 || tbl.Len() != 2):
			t.Fatalf("version 2 truncated to %d bytes, in its addition: %v, appended at %d; want the table alone, rewritten first", n, err, good)
		}
	}
	for i := range base {
		b := bytes.Clone(v2)
		b[i] ^= 0x40
		if _, err := ParseKeys(KeysName, goldenStoreID, b); !errors.As(err, &ce) {
			t.Fatalf("version 2, byte %d of its table flipped: %v, want a corruption error", i, err)
		}
	}
	// A damaged addition with another after it is no torn append.
	two := AppendKeysAddition(bytes.Clone(v2), seal.Entry{No: 4, Scope: "r4", KeyID: "k1", Wrapped: []byte("q")})
	two[base+6] ^= 0x40
	if _, err := ParseKeys(KeysName, goldenStoreID, two); !errors.As(err, &ce) {
		t.Fatalf("a damaged addition before another: %v, want a corruption error", err)
	}
	// Zeros where an append was cut short are a torn append.
	if tbl, good, err := ParseKeysFile(KeysName, goldenStoreID, append(bytes.Clone(v2), make([]byte, 40)...)); err != nil || good != -1 || tbl.Len() != 3 {
		t.Fatalf("zeros after the last addition: %v, appended at %d (want -1: rewritten first)", err, good)
	}
	if _, at, err := ParseKeysFile(KeysName, goldenStoreID, v1); err != nil || at != -1 {
		t.Fatalf("version 1: %v, appended at %d (want -1: rewritten first)", err, at)
	}
	// An addition must add: a key number not above the table's is damage.
	dup := AppendKeysAddition(bytes.Clone(v2), seal.Entry{No: 3, Scope: "r5", KeyID: "k1", Wrapped: []byte("q")})
	dup = AppendKeysAddition(dup, seal.Entry{No: 5, Scope: "r6", KeyID: "k1", Wrapped: []byte("q")})
	if _, err := ParseKeys(KeysName, goldenStoreID, dup); !errors.As(err, &ce) {
		t.Fatalf("an addition of key 3 again: %v, want a corruption error", err)
	}
}

// FuzzParseKeys: ParseKeysFile never panics; what it accepts holds a
// whole prefix, and its table encodes back to a file that reads the same.
func FuzzParseKeys(f *testing.F) {
	var empty seal.Table
	f.Add(MarshalKeys(goldenStoreID, &empty))
	f.Add(goldenhex.Decode(f, goldenKeys))
	f.Add(goldenhex.Decode(f, goldenKeysV2))
	f.Fuzz(func(t *testing.T, b []byte) {
		tbl, good, err := ParseKeysFile(KeysName, goldenStoreID, b)
		if err != nil {
			return
		}
		if good != -1 && good != len(b) {
			t.Fatalf("appended at %d of %d bytes", good, len(b))
		}
		again, err := ParseKeys(KeysName, goldenStoreID, MarshalKeys(goldenStoreID, tbl))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(again.Entries(), tbl.Entries(), func(a, b seal.Entry) bool {
			return a.No == b.No && a.Scope == b.Scope && a.Erased == b.Erased && a.Erasing == b.Erasing && a.KeyID == b.KeyID && bytes.Equal(a.Wrapped, b.Wrapped)
		}) {
			t.Fatalf("accepted %x as %+v, encodes back as %+v", b, tbl.Entries(), again.Entries())
		}
	})
}
