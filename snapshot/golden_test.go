package snapshot

import (
	"bytes"
	"testing"
	"time"

	"github.com/continuumdb/continuum/internal/goldenhex"
)

// TestGoldenFormat pins the keys and values of format.go (frozen): a change
// of encoding fails here before it makes stored snapshots unreadable.
func TestGoldenFormat(t *testing.T) {
	s := &Snapshot{RunID: "r", Seq: 7, Frame: []byte("fr"), Created: time.Unix(1, 2).UTC()}
	for i := range s.Head {
		s.Head[i] = byte(i)
	}
	wantKey := goldenhex.Decode(t, `
		73                       # 's': the snapshot keyspace
		01 72                    # run id: uvarint length 1, "r"
		00 00 00 00 00 00 00 07  # seq 7, big-endian
	`)
	wantVal := goldenhex.Decode(t, `
		43 53 4e 50              # magic "CSNP"
		01                       # value version 1
		00                       # flags (reserved)
		00 00 00 00 00 00 00 01  # created: 1 s since the Unix epoch
		00 00 00 02              # created: 2 ns
		00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f  # chain head at seq 7
		10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f
		00 00 00 02              # frame length 2
		66 72                    # frame "fr" (opaque)
		74 00 27 27              # CRC-32C of key || value so far
	`)
	if got := AppendSnapshotKey(nil, s.RunID, s.Seq); !bytes.Equal(got, wantKey) {
		t.Fatalf("snapshot key changed:\n got %x\nwant %x", got, wantKey)
	}
	if got := AppendSnapshot(nil, s); !bytes.Equal(got, wantVal) {
		t.Fatalf("snapshot value changed:\n got %x\nwant %x", got, wantVal)
	}
	back, err := DecodeSnapshot(wantKey, wantVal)
	if err != nil || back.RunID != "r" || back.Seq != 7 || back.Head != s.Head || string(back.Frame) != "fr" || !back.Created.Equal(s.Created) {
		t.Fatalf("golden value decodes to %+v, %v", back, err)
	}
	// The checksum covers the key: the same value under seq 8 is damage.
	if _, err := DecodeSnapshot(AppendSnapshotKey(nil, "r", 8), wantVal); err == nil {
		t.Fatal("a value moved to another seq decodes")
	}

	wantPosKey := goldenhex.Decode(t, `
		70                       # 'p': the atom position keyspace
		01 72                    # run id "r"
		00 00 00 00 00 00 00 07  # seq 7
	`)
	wantPos := goldenhex.Decode(t, `
		03                       # segment 3, uvarint
		ac 02                    # offset 300, uvarint
	`)
	if got := appendRunKey(nil, spacePosition, "r", 7); !bytes.Equal(got, wantPosKey) {
		t.Fatalf("position key changed:\n got %x\nwant %x", got, wantPosKey)
	}
	if got := appendPos(nil, Pos{Segment: 3, Offset: 300}); !bytes.Equal(got, wantPos) {
		t.Fatalf("position value changed:\n got %x\nwant %x", got, wantPos)
	}
	if p, err := decodePos("r", 7, wantPos); err != nil || p != (Pos{Segment: 3, Offset: 300}) {
		t.Fatalf("golden position decodes to %+v, %v", p, err)
	}
	if !bytes.Equal(keyFormat, goldenhex.Decode(t, `00 666f726d6174 # 0x00 "format"`)) || !bytes.Equal(keyCount, goldenhex.Decode(t, `00 636f756e74 # 0x00 "count"`)) {
		t.Fatal("system keys changed")
	}
}
