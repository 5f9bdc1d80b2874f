package ledger

import (
	"bytes"
	"testing"

	"github.com/continuumdb/continuum/internal/goldenhex"
)

// goldenLedger holds two actions: one certified, one in doubt.
func goldenLedger() *Ledger {
	l := New()
	done, doubt := Fingerprint{0x01, 0x02}, Fingerprint{0x0a}
	l.ApplyIntent(&Intent{Fingerprint: done}, Loc{Segment: 1, Offset: 40})
	l.ApplyCertificate(&Certificate{Fingerprint: done, Status: StatusDone}, Loc{Segment: 1, Offset: 128}, false)
	l.ApplyIntent(&Intent{Fingerprint: doubt}, Loc{Segment: 2, Offset: 40})
	return l
}

const goldenEntries = `
	0102000000000000 0000000000000000 0000000000000000 0000000000000000 # fingerprint 0102...
	02 00000000000000                  # status done, reserved
	0100000000000000 2800000000000000  # intent at 1:40
	0100000000000000 8000000000000000  # certificate at 1:128
	0a00000000000000 0000000000000000 0000000000000000 0000000000000000 # fingerprint 0a...
	01 00000000000000                  # status intent (in doubt), reserved
	0200000000000000 2800000000000000  # intent at 2:40
	0000000000000000 0000000000000000  # no certificate
`

// TestGoldenTable pins both table versions (format.go says they are
// frozen): version 1 (AppendTable, Checkpoint) and version 2
// (CheckpointAt), which names the checkpoint generation and log position
// it derives from. Both stay readable.
func TestGoldenTable(t *testing.T) {
	v1 := goldenhex.Decode(t, `
		434c4454           # "CLDT"
		0100               # version 1
		4800               # entry size 72
		0200000000000000   # 2 entries
		6790087b           # body crc
		0133aca0           # header crc of the 20 bytes before
	`+goldenEntries)
	v2 := goldenhex.Decode(t, `
		434c4454           # "CLDT"
		0200               # version 2
		4800               # entry size 72
		0200000000000000   # 2 entries
		0700000000000000   # checkpoint generation 7
		0300000000000000   # log position: segment 3
		0010000000000000   #               offset 4096
		6790087b           # body crc
		ee9b33e2           # header crc of the 44 bytes before
	`+goldenEntries)
	if got := goldenLedger().AppendTable(nil); !bytes.Equal(got, v1) {
		t.Fatalf("version 1 table changed:\n got %x\nwant %x", got, v1)
	}
	origin := TableOrigin{Gen: 7, Pos: Loc{Segment: 3, Offset: 4096}}
	if got := goldenLedger().CheckpointAt(nil, func() TableOrigin { return origin }); !bytes.Equal(got, v2) {
		t.Fatalf("version 2 table changed:\n got %x\nwant %x", got, v2)
	}
	for _, tc := range []struct {
		b      []byte
		origin TableOrigin
	}{{v1, TableOrigin{}}, {v2, origin}} {
		o, err := ReadTableOrigin(tc.b)
		if err != nil || o != tc.origin {
			t.Fatalf("ReadTableOrigin: %+v, %v; want %+v", o, err, tc.origin)
		}
		l := New()
		if err := l.LoadTable(tc.b); err != nil {
			t.Fatal(err)
		}
		e, ok := l.Lookup(Fingerprint{0x01, 0x02})
		if !ok || e.Status != StatusDone || e.CertLoc != (Loc{Segment: 1, Offset: 128}) {
			t.Fatalf("entry read back as %+v", e)
		}
		if e, ok := l.Lookup(Fingerprint{0x0a}); !ok || e.Status != StatusIntent || e.IntentLoc != (Loc{Segment: 2, Offset: 40}) {
			t.Fatalf("entry read back as %+v", e)
		}
	}
	// Every byte of a version 2 header is covered by its checksum.
	for i := 0; i < tableHeaderSizeV2; i++ {
		b := bytes.Clone(v2)
		b[i] ^= 0x01
		if err := New().LoadTable(b); err == nil {
			t.Fatalf("a flipped byte %d of the header was accepted", i)
		}
	}
}
