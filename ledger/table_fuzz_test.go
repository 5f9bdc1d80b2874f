package ledger

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/continuumdb/continuum/internal/crc32c"
)

// FuzzLoadTable feeds LoadTable tables of every version, damaged or made
// up (a store written by an attacker), as they come and with their
// checksums made right (so that the entries' contents are explored past
// them): it never panics; a table it accepts answers Lookup for every
// entry, and the next checkpoint writes the same entries back in a table
// that loads to the same answers.
func FuzzLoadTable(f *testing.F) {
	l := goldenLedger()
	f.Add(l.AppendTable(nil))
	f.Add(l.CheckpointAt(nil, func() TableOrigin { return TableOrigin{Gen: 3, Pos: Loc{Segment: 2, Offset: 4096}} }))
	wide := New()
	wide.ApplyIntent(&Intent{Fingerprint: Fingerprint{9}}, Loc{Segment: 1 << 40, Offset: 8})
	f.Add(wide.CheckpointAt(nil, func() TableOrigin { return TableOrigin{Gen: 1} })) // version 2
	f.Add([]byte("CLDT"))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkLoadTable(t, b)
		checkLoadTable(t, withTableChecksums(bytes.Clone(b)))
	})
}

// withTableChecksums sets the checksums of b's header and entries, as a
// writer would, where b is long enough for its version's header.
func withTableChecksums(b []byte) []byte {
	if len(b) < tableHeaderSize {
		return b
	}
	hdr := tableHeaderSize
	if v := binary.LittleEndian.Uint16(b[4:]); v == tableVersion2 || v == tableVersion3 {
		hdr = tableHeaderSizeV2
	}
	if len(b) < hdr {
		return b
	}
	binary.LittleEndian.PutUint32(b[hdr-8:], crc32c.Checksum(b[hdr:]))
	binary.LittleEndian.PutUint32(b[hdr-4:], crc32c.Checksum(b[:hdr-4]))
	return b
}

// checkLoadTable loads b and, if it is accepted, checks what it answers.
func checkLoadTable(t *testing.T, b []byte) {
	t.Helper()
	l := New()
	if err := l.LoadTable(bytes.Clone(b)); err != nil {
		return
	}
	n := l.Len()
	hdr, esize := tableHeaderSize, tableEntrySize
	switch binary.LittleEndian.Uint16(b[4:]) {
	case tableVersion2:
		hdr = tableHeaderSizeV2
	case tableVersion3:
		hdr, esize = tableHeaderSizeV2, tableEntrySizeV3
	}
	if n != (len(b)-hdr)/esize {
		t.Fatalf("%d entries loaded from %d bytes of %d-byte entries", n, len(b)-hdr, esize)
	}
	want := map[Fingerprint]Entry{}
	for i := range n {
		var fp Fingerprint
		copy(fp[:], b[hdr+i*esize:])
		e, ok := l.Lookup(fp)
		if !ok || e.Status < StatusIntent || e.Status > StatusResolved {
			t.Fatalf("entry %d (%x): %+v, %v", i, fp[:4], e, ok)
		}
		want[fp] = e
	}
	again := l.CheckpointAt(nil, func() TableOrigin { return TableOrigin{Gen: 1} })
	back := New()
	if err := back.LoadTable(again); err != nil {
		t.Fatalf("the table written back does not load: %v", err)
	}
	if back.Len() != n {
		t.Fatalf("written back: %d entries, want %d", back.Len(), n)
	}
	for fp, w := range want {
		if e, ok := back.Lookup(fp); !ok || e.Status != w.Status || e.IntentLoc != w.IntentLoc || e.CertLoc != w.CertLoc {
			t.Fatalf("written back: %x: %+v, %v; want %+v", fp[:4], e, ok, w)
		}
	}
}
