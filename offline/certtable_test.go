package offline

import (
	"encoding/binary"
	"testing"

	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
)

// TestCertTable checks the certificate table against a map, across its
// growth, with fingerprints that share their first bytes (as forged ones
// may) and duplicates that must not replace the first certificate.
func TestCertTable(t *testing.T) {
	var tab certTable
	want := map[ledger.Fingerprint]certSeen{}
	fp := func(i int) ledger.Fingerprint {
		var f ledger.Fingerprint
		binary.BigEndian.PutUint32(f[28:], uint32(i)) // only the last bytes differ
		return f
	}
	if _, ok := tab.get(&ledger.Fingerprint{}); ok {
		t.Fatal("empty table has a certificate")
	}
	for i := range 5000 {
		f := fp(i)
		c := certSeen{pos: wal.Pos{Segment: 1, Offset: int64(i)}}
		c.sum[0] = byte(i)
		if !tab.add(&f, c) {
			t.Fatalf("add %d: reported a duplicate", i)
		}
		want[f] = c
		if got, ok := tab.get(&f); !ok || got != c { // the entry added last
			t.Fatalf("get %d just after its add: %v %v, want %v", i, got, ok, c)
		}
		if i%3 == 0 {
			j := fp(i / 2)
			if tab.add(&j, certSeen{}) {
				t.Fatalf("add %d again: not reported as a duplicate", i/2)
			}
		}
	}
	for i := range 6000 {
		f := fp(i)
		got, ok := tab.get(&f)
		w, wok := want[f]
		if ok != wok || got != w || tab.has(&f) != wok {
			t.Fatalf("get %d: %v %v, want %v %v", i, got, ok, w, wok)
		}
	}
}
