package record

import (
	"bytes"
	"errors"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/goldenhex"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

// testSealer returns a Sealer of store {1..} with a data key for run r1.
func testSealer(t testing.TB) *Sealer {
	t.Helper()
	ring, err := seal.NewKeyring(map[string][]byte{"k": bytes.Repeat([]byte{3}, seal.KeySize)}, "k")
	if err != nil {
		t.Fatal(err)
	}
	var tbl seal.Table
	ks := seal.NewKeys()
	for _, scope := range []string{"", "r1"} {
		k, err := tbl.Add(ring, scope)
		if err != nil {
			t.Fatal(err)
		}
		ks.Put(scope, k)
	}
	return &Sealer{Store: [16]byte{1, 15: 0xff}, Keys: ks}
}

// TestGoldenAAD pins the additional data of a sealed payload (frozen: a
// change makes every sealed payload of every store fail to open).
func TestGoldenAAD(t *testing.T) {
	want := goldenhex.Decode(t, `
		636f6e74696e75756d2f7265636f7264207365616c6564 # "continuum/record sealed"
		010000000000000000000000000000ff             # store id
		04                                           # kind: atom
		02 7231                                      # run "r1"
		07                                           # seq 7`)
	if got := AppendAAD(nil, [16]byte{1, 15: 0xff}, KindAtom, "r1", 7); !bytes.Equal(got, want) {
		t.Fatalf("AAD changed:\n got %x\nwant %x", got, want)
	}
}

// TestGoldenSealedAtomBody pins the plaintext of a sealed atom body:
// uvarint len | tail | compressed body.
func TestGoldenSealedAtomBody(t *testing.T) {
	s := testSealer(t)
	tail := bytes.Repeat([]byte{0xaa}, 32)
	sealed, err := s.SealAtomBody(nil, "r1", 7, []byte{0x01, 0x00, 0x62, 0x6f, 0x64, 0x79}, tail)
	if err != nil {
		t.Fatal(err)
	}
	if !seal.IsSealed(sealed) {
		t.Fatalf("sealed body %x does not start with seal.Magic", sealed)
	}
	plain, err := s.Open(nil, sealed, KindAtom, "r1", 7)
	if err != nil {
		t.Fatal(err)
	}
	want := goldenhex.Decode(t, `
		20                                                               # tail: 32 bytes
		aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa # one digest
		010062 6f6479                                                    # the compressed body`)
	if !bytes.Equal(plain, want) {
		t.Fatalf("sealed atom body's plaintext changed:\n got %x\nwant %x", plain, want)
	}
	comp, gotTail, err := s.OpenAtomBody(nil, sealed, "r1", 7)
	if err != nil || !bytes.Equal(gotTail, tail) || !bytes.Equal(comp, want[33:]) {
		t.Fatalf("OpenAtomBody: %x %x %v", comp, gotTail, err)
	}
	// Moved to another seq, run or kind, or changed: it does not open.
	for _, c := range []struct {
		k   Kind
		run string
		seq uint64
	}{{KindAtom, "r1", 8}, {KindAtom, "r2", 7}, {KindEnd, "r1", 7}} {
		if _, err := s.Open(nil, sealed, c.k, c.run, c.seq); !errors.Is(err, seal.ErrAuth) {
			t.Fatalf("opened as %v %s %d: %v", c.k, c.run, c.seq, err)
		}
	}
	sealed[len(sealed)-1] ^= 1
	if _, _, err := s.OpenAtomBody(nil, sealed, "r1", 7); !errors.Is(err, seal.ErrAuth) {
		t.Fatalf("a changed sealed body: %v, want ErrAuth", err)
	}
	// A tail that is not whole digests is refused after opening.
	bad, err := s.Seal(nil, []byte{0x01, 0xaa, 0x01}, KindAtom, "r1", 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.OpenAtomBody(nil, bad, "r1", 7); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a tail of 1 byte: %v, want ErrCorrupt", err)
	}
}

// TestDecodeSealedLedger: an intent sealed with another run's key is
// corrupt; one of its own run opens; a decoder without a Sealer leaves it
// sealed; an intent with an explicit key may be sealed with the store's
// key (its records belong to the store), one with a default key may not.
func TestDecodeSealedLedger(t *testing.T) {
	s := testSealer(t)
	comp := frame.NewCompressor(frame.NewDicts())
	body := ledger.AppendIntent(nil, &ledger.Intent{RunID: "r1", Seq: 1, Tool: "t", Args: []byte(`{"a":1}`), Key: ledger.DefaultKey("r1", 1, 0)})
	goldenPos := wal.Pos{Segment: 1, Offset: 64}
	rec, err := s.SealLedger([]byte{byte(KindIntent)}, comp.Compress(nil, body, 0), KindIntent, "r1")
	if err != nil {
		t.Fatal(err)
	}
	var r Record
	if err := (&Decoder{Comp: comp, Ledger: true, Sealed: true, Sealer: s}).Decode(rec, goldenPos, "seg", &r); err != nil {
		t.Fatal(err)
	}
	if r.Intent == nil || !r.Opened || r.Run != "r1" {
		t.Fatalf("opened intent: %+v", r)
	}
	if err := (&Decoder{Comp: comp, Ledger: true, Sealed: true}).Decode(rec, goldenPos, "seg", &r); err != nil || r.Intent != nil || r.Stored == nil {
		t.Fatalf("without a Sealer: %v, intent %v, stored %d bytes", err, r.Intent, len(r.Stored))
	}
	other, err := s.SealLedger([]byte{byte(KindIntent)}, comp.Compress(nil, body, 0), KindIntent, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Decoder{Comp: comp, Ledger: true, Sealed: true, Sealer: s}).Decode(other, goldenPos, "seg", &r); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an intent of r1 with a default key sealed with the store's key: %v, want ErrCorrupt", err)
	}
	explicit := ledger.AppendIntent(nil, &ledger.Intent{RunID: "r1", Seq: 1, Tool: "t", Args: []byte(`{"a":1}`), Key: "charge-7"})
	shared, err := s.SealLedger([]byte{byte(KindIntent)}, comp.Compress(nil, explicit, 0), KindIntent, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Decoder{Comp: comp, Ledger: true, Sealed: true, Sealer: s}).Decode(shared, goldenPos, "seg", &r); err != nil || r.Intent == nil || r.Intent.Key != "charge-7" {
		t.Fatalf("an intent of r1 with an explicit key sealed with the store's key: %v, intent %+v", err, r.Intent)
	}
	ring, err := seal.NewKeyring(map[string][]byte{"k": bytes.Repeat([]byte{3}, seal.KeySize)}, "k")
	if err != nil {
		t.Fatal(err)
	}
	var tbl seal.Table
	var k2 *seal.Key
	for _, scope := range []string{"", "r1", "r2"} { // numbered after testSealer's two
		if k2, err = tbl.Add(ring, scope); err != nil {
			t.Fatal(err)
		}
	}
	s.Keys.Put("r2", k2)
	foreign, err := s.SealLedger([]byte{byte(KindIntent)}, comp.Compress(nil, explicit, 0), KindIntent, "r2")
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Decoder{Comp: comp, Ledger: true, Sealed: true, Sealer: s}).Decode(foreign, goldenPos, "seg", &r); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an intent of r1 sealed with r2's key: %v, want ErrCorrupt", err)
	}
}

// FuzzOpenAtomBody: the plaintext of a sealed atom body never panics its
// parser, and what it accepts splits back into what sealed it.
func FuzzOpenAtomBody(f *testing.F) {
	s := testSealer(f)
	f.Add([]byte{0x20}, []byte{1, 2, 3})
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, plain, more []byte) {
		sealed, err := s.Seal(nil, append(plain, more...), KindAtom, "r1", 1)
		if err != nil {
			t.Fatal(err)
		}
		comp, tail, err := s.OpenAtomBody(nil, sealed, "r1", 1)
		if err != nil {
			return
		}
		again, err := s.SealAtomBody(nil, "r1", 1, comp, tail)
		if err != nil {
			t.Fatal(err)
		}
		c2, t2, err := s.OpenAtomBody(nil, again, "r1", 1)
		if err != nil || !bytes.Equal(c2, comp) || !bytes.Equal(t2, tail) {
			t.Fatalf("round trip: %x %x %v", c2, t2, err)
		}
	})
}
