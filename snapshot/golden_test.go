package snapshot

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
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

// TestGoldenSnapshotEdges pins snapshot keys and values at their edges: a
// run id whose length takes two varint bytes, one beyond ASCII, the
// largest seq, a time before the epoch, an empty frame.
func TestGoldenSnapshotEdges(t *testing.T) {
	head := [32]byte{0x22, 31: 0x55}
	long := strings.Repeat("a", 200)
	for _, c := range []struct {
		name     string
		s        Snapshot
		key, val string
	}{{
		name: "a 200-byte run id",
		s:    Snapshot{RunID: long, Seq: 1, Head: head, Frame: []byte("fr"), Created: time.Unix(1767225600, 0).UTC()},
		key: `
			73                       # 's'
			c8 01                    # run id length 200: two uvarint bytes
			` + strings.Repeat("61", 200) + ` # "aaa...a"
			00 00 00 00 00 00 00 01  # seq 1`,
		val: `
			43534e50 01 00           # "CSNP", version 1, flags
			00 00 00 00 69 55 b9 00  # created 2026-01-01T00:00:00Z: 1767225600 s
			00 00 00 00              #   and 0 ns
			2200000000000000000000000000000000000000000000000000000000000055 # head
			00 00 00 02 6672         # frame "fr"
			6c d4 4d 03              # CRC-32C of key || value so far`,
	}, {
		name: "before the epoch, empty frame, the last seq",
		s:    Snapshot{RunID: "ü", Seq: 1<<64 - 1, Created: time.Unix(-1, 999999999).UTC()},
		key: `
			73                       # 's'
			02 c3bc                  # run id "ü": 2 bytes of UTF-8
			ff ff ff ff ff ff ff ff  # seq 2^64-1`,
		val: `
			43534e50 01 00           # "CSNP", version 1, flags
			ff ff ff ff ff ff ff ff  # created 1969-12-31T23:59:59.999999999Z: -1 s (signed)
			3b 9a c9 ff              #   and 999999999 ns
			0000000000000000000000000000000000000000000000000000000000000000 # head
			00 00 00 00              # empty frame
			25 49 fa 74              # CRC-32C of key || value so far`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			key, val := goldenhex.Decode(t, c.key), goldenhex.Decode(t, c.val)
			if got := AppendSnapshotKey(nil, c.s.RunID, c.s.Seq); !bytes.Equal(got, key) {
				t.Fatalf("snapshot key changed:\n got %x\nwant %x", got, key)
			}
			if got := AppendSnapshot(nil, &c.s); !bytes.Equal(got, val) {
				t.Fatalf("snapshot value changed:\n got %x\nwant %x", got, val)
			}
			back, err := DecodeSnapshot(key, val)
			if err != nil {
				t.Fatal(err)
			}
			if back.RunID != c.s.RunID || back.Seq != c.s.Seq || back.Head != c.s.Head || !bytes.Equal(back.Frame, c.s.Frame) ||
				!back.Created.Equal(c.s.Created) {
				t.Fatalf("read back as %+v, want %+v", back, c.s)
			}
		})
	}
}

// TestGoldenStoreEntries pins every key kind and value a store writes, as Pebble
// holds them: the format marker, the snapshot count, engine metadata,
// positions and snapshots, read back raw after a reopen.
func TestGoldenStoreEntries(t *testing.T) {
	memfs := vfs.NewMem()
	st := openMem(t, memfs)
	b := st.NewBatch()
	s := &Snapshot{RunID: "r", Seq: 7, Frame: []byte("fr"), Created: time.Unix(1, 2).UTC()}
	for i := range s.Head {
		s.Head[i] = byte(i)
	}
	if err := b.PutSnapshot(s); err != nil {
		t.Fatal(err)
	}
	if err := b.PutPositions("r", 7, []Pos{{Segment: 3, Offset: 300}, {Segment: 200, Offset: 40}}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutMeta("engine/checkpoint-gen", []byte{0, 0, 0, 0, 0, 0, 0, 9}); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, b, true)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openMem(t, memfs)

	want := []struct{ key, val string }{{
		`00 636f756e74             # 0x00 "count": the snapshot count`,
		`00 00 00 00 00 00 00 01   # 1, uint64 big-endian`,
	}, {
		`00 666f726d6174           # 0x00 "format": the format marker`,
		`434e5353 01               # "CNSS", key layout version 1`,
	}, {
		`6d                        # 'm': engine metadata
		 656e67696e652f636865636b706f696e742d67656e # "engine/checkpoint-gen"`,
		`00 00 00 00 00 00 00 09   # opaque to the store (the engine's gen 9, u64 big-endian)`,
	}, {
		`70 01 72 00 00 00 00 00 00 00 07 # 'p', run id "r", seq 7`,
		`03 ac02                   # segment 3, offset 300, uvarints`,
	}, {
		`70 01 72 00 00 00 00 00 00 00 08 # 'p', run id "r", seq 8`,
		`c801 28                   # segment 200, offset 40`,
	}, {
		`73 01 72 00 00 00 00 00 00 00 07 # 's', run id "r", seq 7`,
		`43534e50 01 00 0000000000000001 00000002 # "CSNP", version 1, flags, created 1 s 2 ns
		 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f # head
		 00000002 6672 74002727    # frame "fr", CRC-32C`,
	}}
	it, err := st.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		if i == len(want) {
			t.Fatalf("an unexpected key %x -> %x", it.Key(), it.Value())
		}
		k, v := goldenhex.Decode(t, want[i].key), goldenhex.Decode(t, want[i].val)
		if !bytes.Equal(it.Key(), k) || !bytes.Equal(it.Value(), v) {
			t.Fatalf("entry %d changed:\n got %x -> %x\nwant %x -> %x", i, it.Key(), it.Value(), k, v)
		}
		i++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if i != len(want) {
		t.Fatalf("%d entries, want %d", i, len(want))
	}
	// And the store reads them back.
	if n := st.Stats().Snapshots; n != 1 {
		t.Fatalf("snapshot count read back as %d", n)
	}
	if v, err := st.Meta("engine/checkpoint-gen"); err != nil || !bytes.Equal(v, []byte{0, 0, 0, 0, 0, 0, 0, 9}) {
		t.Fatalf("meta read back as %x, %v", v, err)
	}
	if p, err := st.Positions("r", 7, 8); err != nil || len(p) != 2 || p[0] != (Pos{Segment: 3, Offset: 300}) || p[1] != (Pos{Segment: 200, Offset: 40}) {
		t.Fatalf("positions read back as %v, %v", p, err)
	}
	if back, err := st.Latest("r"); err != nil || back.Seq != 7 || back.Head != s.Head || string(back.Frame) != "fr" || !back.Created.Equal(s.Created) {
		t.Fatalf("snapshot read back as %+v, %v", back, err)
	}
}
