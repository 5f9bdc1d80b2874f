package layout

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/goldenhex"
	"github.com/continuumdb/continuum/wal"
)

// The golden tests pin the files of format.go (frozen) byte for byte: each
// byte below is derived from the format description, the checksums with an
// independent CRC-32C (Castagnoli) implementation; the test confirms that
// the encoder writes them and that the parser reads each field back. A
// change of encoding fails here before it makes a store unreadable.

const (
	hexStoreID = "00112233445566778899aabbccddeeff"
	hexHead    = "2200000000000000000000000000000000000000000000000000000000000055"
	hexZero32  = "0000000000000000000000000000000000000000000000000000000000000000"
)

var (
	goldenStoreID = [16]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	goldenHead    = [32]byte{0x22, 31: 0x55}
)

// TestGoldenStore pins STORE in each chain mode.
func TestGoldenStore(t *testing.T) {
	for _, c := range []struct {
		name string
		s    Store
		hex  string
	}{{
		name: "unrecorded",
		s:    Store{ID: goldenStoreID, Created: -1, Mode: ChainUnrecorded},
		hex: `
			434e544d53544f52   # "CNTMSTOR"
			0100               # version 1
			0000               # chain mode 0: not recorded (stores written before it was)
			` + hexStoreID + ` # store id
			ffffffffffffffff   # created -1 ns: signed, 1 ns before the epoch
			750d935f           # crc32c of the 36 bytes before`,
	}, {
		name: "unkeyed",
		s:    Store{ID: goldenStoreID, Created: 1767225600000000000, Mode: ChainUnkeyed},
		hex: `
			434e544d53544f52   # "CNTMSTOR"
			0100               # version 1
			0100               # chain mode 1: unkeyed
			` + hexStoreID + ` # store id
			0000faed51728618   # created 2026-01-01T00:00:00Z, Unix ns
			0ef6848b           # crc32c of the 36 bytes before`,
	}, {
		name: "keyed",
		s:    Store{ID: goldenStoreID, Created: 1767225600000000000, Mode: ChainKeyed},
		hex: `
			434e544d53544f52   # "CNTMSTOR"
			0100               # version 1
			0200               # chain mode 2: keyed (Options.ChainKey)
			` + hexStoreID + ` # store id
			0000faed51728618   # created 2026-01-01T00:00:00Z, Unix ns
			1f7a77fd           # crc32c of the 36 bytes before`,
	}, {
		name: "sealed unkeyed",
		s:    Store{ID: goldenStoreID, Created: 1767225600000000000, Mode: ChainUnkeyed | ChainSealed},
		hex: `
			434e544d53544f52   # "CNTMSTOR"
			0100               # version 1
			0101               # chain mode 0x0101: unkeyed, sealed (Options.Keyring)
			` + hexStoreID + ` # store id
			0000faed51728618   # created 2026-01-01T00:00:00Z, Unix ns
			933db0a5           # crc32c of the 36 bytes before`,
	}, {
		name: "sealed keyed",
		s:    Store{ID: goldenStoreID, Created: 1767225600000000000, Mode: ChainKeyed | ChainSealed},
		hex: `
			434e544d53544f52   # "CNTMSTOR"
			0100               # version 1
			0201               # chain mode 0x0102: keyed, sealed
			` + hexStoreID + ` # store id
			0000faed51728618   # created 2026-01-01T00:00:00Z, Unix ns
			82b143d3           # crc32c of the 36 bytes before`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			want := goldenhex.Decode(t, c.hex)
			if len(want) != StoreFileSize {
				t.Fatalf("golden STORE is %d bytes, StoreFileSize %d", len(want), StoreFileSize)
			}
			if got := c.s.Marshal(); !bytes.Equal(got, want) {
				t.Fatalf("STORE encoding changed:\n got %x\nwant %x", got, want)
			}
			got, err := ParseStore(StoreName, want)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != c.s.ID || got.Created != c.s.Created || got.Mode != c.s.Mode {
				t.Fatalf("read back as %+v, want %+v", got, c.s)
			}
		})
	}
}

// TestGoldenCheckpoint pins CHECKPOINT version 3 byte for byte, and reads
// version 2 (without the end and fork fields) and version 1 (without the
// dictionary id either) as before.
func TestGoldenCheckpoint(t *testing.T) {
	cp := Checkpoint{Gen: 3, Replay: wal.Pos{Segment: 2, Offset: 4096}, LedgerGen: 3, Dict: 1,
		StoreID: [16]byte{0xaa, 15: 0xbb},
		Runs: []CheckpointRun{{ID: "r1", Nonce: [16]byte{0x11}, Created: -1, LastSeq: 5, Head: [32]byte{0x22},
			FrameSeq: 5, IndexedSeq: 5, SnapSeq: 4, CkptSeq: 5, CkptHead: [32]byte{0x22},
			Inflight: []InflightAction{{Index: 1, FP: [32]byte{0x33}}}}}}
	const body = `
		01                 # 1 run
		02 7231            # id "r1"
		11000000000000000000000000000000 # nonce
		01                 # created -1 (zigzag varint)
		05                 # last seq 5
		2200000000000000000000000000000000000000000000000000000000000000 # head
		05 05 04 05        # frame seq, indexed seq, snapshot seq, checkpoint seq
		2200000000000000000000000000000000000000000000000000000000000000 # checkpoint head
		01                 # 1 action in flight
		01                 # its index 1
		3300000000000000000000000000000000000000000000000000000000000000 # its fingerprint
	`
	v3 := goldenhex.Decode(t, `
		434e544d434b5054   # "CNTMCKPT"
		0300               # version 3
		03                 # generation 3
		02 8020            # replay from 2:4096
		03                 # ledger table generation 3
		aa0000000000000000000000000000bb # store id
		01                 # newest dictionary 1
	`+body+`
		00                 # status: active (no end fields)
		00                 # parent: none (not a fork)
		e2fff1bd           # crc32c of all before
	`)
	if got := cp.Marshal(); !bytes.Equal(got, v3) {
		t.Fatalf("CHECKPOINT encoding changed:\n got %x\nwant %x", got, v3)
	}
	v2 := goldenhex.Decode(t, `
		434e544d434b5054   # "CNTMCKPT"
		0200               # version 2
		03                 # generation 3
		02 8020            # replay from 2:4096
		03                 # ledger table generation 3
		aa0000000000000000000000000000bb # store id
		01                 # newest dictionary 1
	`+body+`
		f55009a5           # crc32c of all before
	`)
	v1 := goldenhex.Decode(t, `
		434e544d434b5054   # "CNTMCKPT"
		0100               # version 1
		03 02 8020 03      # generation, replay position, ledger table generation
		aa0000000000000000000000000000bb # store id
	`+body+`
		05e46e99           # crc32c of all before
	`)
	for _, b := range [][]byte{v1, v2, v3} {
		got, err := ParseCheckpoint(CheckpointName, b)
		if err != nil {
			t.Fatal(err)
		}
		want := cp
		if b[8] == 1 {
			want.Dict = 0 // version 1 does not say
		}
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("version %d read back as\n%+v\nwant\n%+v", b[8], *got, want)
		}
	}
}

// TestGoldenCheckpointRuns pins a CHECKPOINT of two runs, neither with an
// atom in flight, with multi-byte varints and a run id beyond ASCII: one
// ended, the other forked from it.
func TestGoldenCheckpointRuns(t *testing.T) {
	cp := Checkpoint{Gen: 300, Replay: wal.Pos{Segment: 1, Offset: 40}, StoreID: goldenStoreID, Dict: 65536,
		Runs: []CheckpointRun{{
			ID: "a", Created: 1767225600000000000, LastSeq: 128, Head: goldenHead,
			FrameSeq: 128, IndexedSeq: 127, SnapSeq: 100, CkptSeq: 128, CkptHead: goldenHead,
			Status: 1, Ended: 1, EndHead: goldenHead, Result: []byte("ok"),
		}, {
			Parent: "a", BaseHead: goldenHead,
			ID: "ü/b", Nonce: [16]byte{0: 0xff, 1: 0xff, 2: 0xff, 3: 0xff, 4: 0xff, 5: 0xff, 6: 0xff, 7: 0xff,
				8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff},
		}}}
	want := goldenhex.Decode(t, `
		434e544d434b5054   # "CNTMCKPT"
		0300               # version 3
		ac02               # generation 300
		01 28              # replay from 1:40 (just after the segment header)
		00                 # no ledger table
		`+hexStoreID+`     # store id
		808004             # newest dictionary 65536
		02                 # 2 runs
		# run "a"
		01 61              # id "a"
		00000000000000000000000000000000 # nonce
		8080d0dfbd94b98631 # created 2026-01-01T00:00:00Z in Unix ns, zigzag (x2) varint
		8001               # last seq 128
		`+hexHead+`        # head
		8001 7f 64 8001    # frame seq 128, indexed seq 127, snapshot seq 100, checkpoint seq 128
		`+hexHead+`        # checkpoint head
		00                 # nothing in flight
		01                 # status: completed
		02                 # ended 1 (zigzag varint)
		`+hexHead+`        # end head: h(129), the end record's link
		02 6f6b            # result "ok"
		00                 # parent: none
		# run "ü/b"
		04 c3bc 2f 62      # id "ü/b": 4 bytes of UTF-8
		ffffffffffffffffffffffffffffffff # nonce
		00                 # created 0
		00                 # last seq 0: no atom yet
		`+hexZero32+`      # head
		00 00 00 00        # frame seq, indexed seq, snapshot seq, checkpoint seq
		`+hexZero32+`      # checkpoint head
		00                 # nothing in flight
		00                 # status: active
		01 61              # parent "a": a fork
		00                 # forked at seq 0
		`+hexHead+`        # base head: its fork genesis
		9a9193a4           # crc32c of all before
	`)
	if got := cp.Marshal(); !bytes.Equal(got, want) {
		t.Fatalf("CHECKPOINT encoding changed:\n got %x\nwant %x", got, want)
	}
	got, err := ParseCheckpoint(CheckpointName, want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, cp) {
		t.Fatalf("read back as\n%+v\nwant\n%+v", *got, cp)
	}
}

// TestGoldenFrameFile pins a frame file, whose frame is stored with the raw
// codec so that the bytes do not depend on a compressor's version, and
// decodes the frame it holds.
func TestGoldenFrameFile(t *testing.T) {
	want := goldenhex.Decode(t, `
		434e544d4652414d   # "CNTMFRAM"
		0100               # version 1
		02 7231            # run id "r1"
		ac02               # seq 300
		`+hexHead+`        # head at seq 300
		0f                 # 15 bytes of compressed frame:
		00 00              #   raw codec, no dictionary (frame's compressed record)
		f1                 #   frame v1 (frame.AppendFrame)
		02 676f            #   objective "go"
		00                 #   no subgoals
		01 016b 0176       #   1 memory entry: "k" = "v"
		00 00 00           #   no scratchpad, no messages, nothing pending
		7a1d2775           # crc32c of all before
	`)
	compressed := goldenhex.Decode(t, `0000 f1 02676f 00 01016b0176 000000`)
	ff := FrameFile{Run: "r1", Seq: 300, Head: goldenHead, Frame: compressed}
	if got := ff.Marshal(); !bytes.Equal(got, want) {
		t.Fatalf("frame file encoding changed:\n got %x\nwant %x", got, want)
	}
	got, err := ParseFrameFile(FrameFileBase("r1"), want)
	if err != nil {
		t.Fatal(err)
	}
	if got.Run != "r1" || got.Seq != 300 || got.Head != goldenHead || !bytes.Equal(got.Frame, compressed) {
		t.Fatalf("read back as %+v", got)
	}
	f, err := DecodeFrame(frame.NewCompressor(frame.NewDicts()), got.Frame, FrameFileBase("r1"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Objective != "go" || len(f.Subgoals) != 0 || len(f.Memory) != 1 || string(f.Memory["k"]) != "v" ||
		len(f.Scratchpad) != 0 || len(f.Messages) != 0 || len(f.Pending) != 0 {
		t.Fatalf("frame read back as %+v", f)
	}
}

// TestGoldenDict pins a dictionary file: its id is fixed-width, not a
// varint.
func TestGoldenDict(t *testing.T) {
	dict := []byte("continuum dictionary")
	want := goldenhex.Decode(t, `
		434e544d44494354   # "CNTMDICT"
		0100               # version 1
		02010000           # id 258, u32 little-endian
		14                 # 20 bytes of dictionary:
		636f6e74696e75756d2064696374696f6e617279 # "continuum dictionary" (raw content)
		16531663           # crc32c of all before
	`)
	if got := MarshalDict(258, dict); !bytes.Equal(got, want) {
		t.Fatalf("dictionary file encoding changed:\n got %x\nwant %x", got, want)
	}
	id, got, err := ParseDict(DictFileName(258), want)
	if err != nil {
		t.Fatal(err)
	}
	if id != 258 || !bytes.Equal(got, dict) {
		t.Fatalf("read back as %d %q", id, got)
	}
	// What it holds is a dictionary the compressor takes.
	if err := frame.NewDicts().Add(id, got); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenNames pins the names of the store's files: the engine finds
// each file by its name.
func TestGoldenNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{DictFileName(1), "00000001.dict"},
		{DictFileName(258), "00000102.dict"},
		{DictFileName(0xdeadbeef), "deadbeef.dict"},
		{LedgerTableName(7), "ledger-000007.tbl"},
		{LedgerTableName(1234567), "ledger-1234567.tbl"},
		// BLAKE3("abc") is the published test vector
		// 6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85.
		{FrameFileBase("abc"), "6437b3ac38465133ffb63b75273a8db5.frame"},
		{StoreName + " " + CheckpointName + " " + LockName, "STORE CHECKPOINT LOCK"},
		{WALDir + " " + FramesDir + " " + DictsDir + " " + SnapshotsDir, "wal frames dicts snapshots"},
	} {
		if c.got != c.want {
			t.Errorf("name %q, want %q", c.got, c.want)
		}
	}
}

// TestGoldenRetention pins RETENTION and its refusals.
func TestGoldenRetention(t *testing.T) {
	r := Retention{StoreID: goldenStoreID, Floor: 5, Segments: 4, Bytes: 0x10_0000, Updated: 1767225600000000000}
	want := goldenhex.Decode(t, `
		434e544d5245544e   # "CNTMRETN"
		0100               # version 1
		0000               # reserved
		`+hexStoreID+`     # store id
		0500000000000000   # floor: segment 5 is the first the log keeps
		0400000000000000   # segments removed so far: 4
		0000100000000000   # bytes removed so far: 1 MiB
		0000faed51728618   # updated 2026-01-01T00:00:00Z, Unix ns
		b4e5a0f4           # crc32c of the 60 bytes before`)
	if got := r.Marshal(); !bytes.Equal(got, want) {
		t.Fatalf("RETENTION encoding changed:\n got %x\nwant %x", got, want)
	}
	back, err := ParseRetention("RETENTION", want)
	if err != nil || !reflect.DeepEqual(*back, r) {
		t.Fatalf("read back %+v, %v", back, err)
	}
	for _, c := range []struct {
		name string
		edit func(b []byte) []byte
		why  string
	}{
		{"short", func(b []byte) []byte { return b[:63] }, "size 63, want 64"},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, "bad magic"},
		{"bit flip", func(b []byte) []byte { b[30] ^= 1; return b }, "checksum mismatch"},
	} {
		b := c.edit(bytes.Clone(want))
		if _, err := ParseRetention("RETENTION", b); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.why)
		}
	}
	zero := Retention{StoreID: goldenStoreID}
	if _, err := ParseRetention("RETENTION", zero.Marshal()); err == nil || !strings.Contains(err.Error(), "floor 0") {
		t.Errorf("floor 0: %v", err)
	}
}
