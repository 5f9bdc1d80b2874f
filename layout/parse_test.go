package layout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/internal/goldenhex"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// The parsers refuse every input that breaks its format with a
// *record.CorruptionError naming the file (layout's doc.go), and never
// panic.

// wantCorrupt fails t unless err is a *record.CorruptionError of file
// whose reason says why.
func wantCorrupt(t *testing.T, err error, file, why string) {
	t.Helper()
	var ce *record.CorruptionError
	switch {
	case err == nil:
		t.Fatalf("accepted; want a refusal saying %q", why)
	case !errors.As(err, &ce) || !errors.Is(err, record.ErrCorrupt):
		t.Fatalf("error %v (%T) is not a *record.CorruptionError", err, err)
	case ce.File != file:
		t.Fatalf("error %v names file %q, want %q", err, ce.File, file)
	case !strings.Contains(ce.Reason, why):
		t.Fatalf("error %v does not say %q", err, why)
	}
}

// withCRC returns b with its last 4 bytes set to the CRC-32C of the rest,
// so that a test reaches the checks behind the checksum.
func withCRC(b []byte) []byte {
	b = bytes.Clone(b)
	n := len(b) - 4
	binary.LittleEndian.PutUint32(b[n:], crc32.Checksum(b[:n], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// sealed returns the bytes of annotated hex s followed by their CRC-32C.
func sealed(t *testing.T, s string) []byte {
	return withCRC(append(goldenhex.Decode(t, s), 0, 0, 0, 0))
}

// edit returns a copy of b with f applied.
func edit(b []byte, f func(b []byte) []byte) []byte { return f(bytes.Clone(b)) }

type refusal struct {
	name string
	b    []byte
	why  string
}

func TestParseStoreRefuses(t *testing.T) {
	const file = "db/STORE"
	good := (&Store{ID: goldenStoreID, Created: 1767225600000000000, Mode: ChainKeyed}).Marshal()
	if _, err := ParseStore(file, good); err != nil {
		t.Fatal(err)
	}
	for _, c := range []refusal{
		{"empty", nil, "size 0, want 40"},
		{"truncated", good[:39], "size 39, want 40"},
		{"trailing byte", append(bytes.Clone(good), 0), "size 41, want 40"},
		{"bad magic", withCRC(edit(good, func(b []byte) []byte { b[7] = 'X'; return b })), "bad magic"},
		{"bad checksum", edit(good, func(b []byte) []byte { b[20] ^= 1; return b }), "checksum mismatch"},
		{"checksum over the magic", edit(good, func(b []byte) []byte { b[36] ^= 1; return b }), "checksum mismatch"},
		{"unknown version 0", withCRC(edit(good, func(b []byte) []byte { b[8] = 0; return b })), "unknown version 0"},
		{"unknown version 2", withCRC(edit(good, func(b []byte) []byte { b[8] = 2; return b })), "unknown version 2"},
		{"unknown chain mode", withCRC(edit(good, func(b []byte) []byte { b[10] = 3; return b })), "unknown chain mode 3"},
		{"chain mode high byte", withCRC(edit(good, func(b []byte) []byte { b[11] = 2; return b })), "unknown chain mode 514"},
		{"sealed, mode unrecorded", withCRC(edit(good, func(b []byte) []byte { b[10], b[11] = 0, 1; return b })), "unknown chain mode 256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := ParseStore(file, c.b)
			if s != nil {
				t.Fatalf("refusal returned %+v", s)
			}
			wantCorrupt(t, err, file, c.why)
		})
	}
}

// ckpt returns a CHECKPOINT version 2 whose fields after the version are
// the annotated hex s, sealed with its CRC.
func ckpt(t *testing.T, s string) []byte {
	return sealed(t, `434e544d434b5054 0200 # "CNTMCKPT", version 2`+"\n"+s)
}

// ckptRun is a CHECKPOINT of one run with id idHex (its length included)
// and the given last seq, frame seq and in-flight count.
func ckptRun(t *testing.T, idHex, lastSeq, frameSeq, inflight string) []byte {
	return ckpt(t, `
		01 00 28 00 `+hexStoreID+` 00 # gen 1, replay 0:40, no table, store id, no dictionary
		01                            # 1 run
		`+idHex+`                     # id
		00000000000000000000000000000000 # nonce
		00                            # created
		`+lastSeq+`                   # last seq
		`+hexZero32+`                 # head
		`+frameSeq+` 00 00 00         # frame seq, indexed seq, snapshot seq, checkpoint seq
		`+hexZero32+`                 # checkpoint head
		`+inflight+`                  # in flight`)
}

func TestParseCheckpointRefuses(t *testing.T) {
	const file = "db/CHECKPOINT"
	good := ckptRun(t, "01 61", "05", "05", "00")
	if c, err := ParseCheckpoint(file, good); err != nil || len(c.Runs) != 1 || c.Runs[0].ID != "a" || c.Runs[0].LastSeq != 5 {
		t.Fatalf("the base case reads as %+v, %v", c, err)
	}
	long := "8102 " + strings.Repeat("61", 257) // a 257-byte id
	for _, c := range []refusal{
		{"empty", nil, "0 bytes is too short"},
		{"too short", good[:13], "13 bytes is too short"},
		{"bad magic", withCRC(edit(good, func(b []byte) []byte { b[0] = 'X'; return b })), "bad magic"},
		{"bad checksum", edit(good, func(b []byte) []byte { b[12] ^= 0x80; return b }), "checksum mismatch"},
		{"unknown version 0", withCRC(edit(good, func(b []byte) []byte { b[8] = 0; return b })), "unknown version 0"},
		{"unknown version 4", withCRC(edit(good, func(b []byte) []byte { b[8] = 4; return b })), "unknown version 4"},
		{"version high byte", withCRC(edit(good, func(b []byte) []byte { b[9] = 1; return b })), "unknown version 258"},
		{"trailing byte", withCRC(append(good[:len(good)-4:len(good)-4], 0, 0, 0, 0, 0)), "1 trailing bytes"},
		{"truncated run", ckpt(t, `01 00 28 00 `+hexStoreID+` 00 01 01 61 0000`), "nonce: need 16 bytes"},
		{"no run count", ckpt(t, `01 00 28 00 `+hexStoreID+` 00`), "run count: bad or truncated varint"},
		{"non-minimal generation", ckpt(t, `8100 00 28 00 `+hexStoreID+` 00 00 # gen 1 in 2 bytes`), "generation: varint of 2 bytes is not minimal"},
		{"non-minimal replay offset", ckpt(t, `01 00 a800 00 `+hexStoreID+` 00 00`), "replay offset: varint of 2 bytes is not minimal"},
		{"non-minimal run count", ckpt(t, `01 00 28 00 `+hexStoreID+` 00 8000 # 0 runs in 2 bytes`), "run count: varint of 2 bytes is not minimal"},
		{"non-minimal created", ckpt(t, `01 00 28 00 `+hexStoreID+` 00 01 01 61 00000000000000000000000000000000
			8000 # created 0 in 2 bytes
			05 `+hexZero32+` 05 00 00 00 `+hexZero32+` 00`), "created: varint of 2 bytes is not minimal"},
		{"non-minimal last seq", ckptRun(t, "01 61", "8500", "05", "00"), "last seq: varint of 2 bytes is not minimal"},
		{"non-minimal id length", ckptRun(t, "8100 61", "05", "05", "00"), "run id length: varint of 2 bytes is not minimal"},
		{"dictionary id over 32 bits", ckpt(t, `01 00 28 00 `+hexStoreID+` 8080808010 00 # dictionary 2^32`), "dictionary id 4294967296 exceeds 32 bits"},
		{"run count beyond the file", ckpt(t, `01 00 28 00 `+hexStoreID+` 00 8001 # 128 runs`), "run count 128 exceeds the file"},
		{"empty run id", ckptRun(t, "00", "05", "05", "00"), "invalid run id: empty"},
		{"run id with a control character", ckptRun(t, "02 610a", "05", "05", "00"), "control character"},
		{"run id not UTF-8", ckptRun(t, "01 ff", "05", "05", "00"), "not valid UTF-8"},
		{"replay offset over 63 bits", ckpt(t, `01 00 80808080808080808001 00 `+hexStoreID+` 00 00 # offset 2^63`), "replay offset 9223372036854775808 exceeds"},
		{"in-flight index over 32 bits", ckptRun(t, "01 61", "05", "05", "01 8180808010 "+hexZero32), "in-flight index 4294967297 exceeds 32 bits"},
		{"run id too long", ckptRun(t, long, "05", "05", "00"), "run id: length 257 exceeds the bound 256"},
		{"frame seq beyond last seq", ckptRun(t, "01 61", "05", "06", "00"), "frame/indexed/snapshot seq beyond last seq 5"},
		{"in-flight count over the bound", ckptRun(t, "01 61", "05", "05", "818004 # 65537"), "in-flight count 65537 exceeds 65536"},
		{"in-flight pair truncated", ckptRun(t, "01 61", "05", "05", "01 01"), "in-flight fingerprint: need 32 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cp, err := ParseCheckpoint(file, c.b)
			if cp != nil {
				t.Fatalf("refusal returned %+v", cp)
			}
			wantCorrupt(t, err, file, c.why)
		})
	}
	// A version 1 file is version 2 without the dictionary id: the same
	// bytes read as version 1 lack one byte, so they are refused.
	v1 := withCRC(edit(good, func(b []byte) []byte { b[8] = 1; return b }))
	if _, err := ParseCheckpoint(file, v1); err == nil {
		t.Fatal("a version 2 body accepted as version 1")
	}
}

// frameFile returns a frame file whose fields after the version are the
// annotated hex s, sealed with its CRC.
func frameFile(t *testing.T, s string) []byte {
	return sealed(t, `434e544d4652414d 0100 # "CNTMFRAM", version 1`+"\n"+s)
}

func TestParseFrameFileRefuses(t *testing.T) {
	const file = "db/frames/x.frame"
	good := frameFile(t, `02 7231 05 `+hexHead+` 03 000061 # "r1", seq 5, head, frame 000061`)
	if f, err := ParseFrameFile(file, good); err != nil || f.Run != "r1" || f.Seq != 5 || !bytes.Equal(f.Frame, []byte{0, 0, 0x61}) {
		t.Fatalf("the base case reads as %+v, %v", f, err)
	}
	for _, c := range []refusal{
		{"empty", nil, "not a frame file (bad magic or 0 bytes)"},
		{"too short", good[:13], "not a frame file (bad magic or 13 bytes)"},
		{"bad magic", withCRC(edit(good, func(b []byte) []byte { b[4] = 'X'; return b })), "bad magic"},
		{"a dictionary file", MarshalDict(1, []byte("0123456789abcdef")), "bad magic"},
		{"bad checksum", edit(good, func(b []byte) []byte { b[len(b)-5] ^= 1; return b }), "checksum mismatch"},
		{"unknown version", withCRC(edit(good, func(b []byte) []byte { b[8] = 2; return b })), "unknown version 2"},
		{"trailing byte", frameFile(t, `02 7231 05 `+hexHead+` 03 000061 00`), "frame file: 1 trailing bytes"},
		{"frame beyond the file", frameFile(t, `02 7231 05 `+hexHead+` 04 000061`), "frame: need 4 bytes, 3 left"},
		{"no frame", frameFile(t, `02 7231 05 `+hexHead), "frame length: bad or truncated varint"},
		{"non-minimal seq", frameFile(t, `02 7231 8500 `+hexHead+` 03 000061`), "seq: varint of 2 bytes is not minimal"},
		{"non-minimal frame length", frameFile(t, `02 7231 05 `+hexHead+` 8300 000061`), "frame length: varint of 2 bytes is not minimal"},
		{"empty run id", frameFile(t, `00 05 `+hexHead+` 03 000061`), "invalid run id: empty"},
		{"run id with a control character", frameFile(t, `02 7f31 05 `+hexHead+` 03 000061`), "control character"},
		{"run id too long", frameFile(t, `8102 `+strings.Repeat("61", 257)+` 05 `+hexHead+` 03 000061`), "run id: length 257 exceeds the bound 256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := ParseFrameFile(file, c.b)
			if f != nil {
				t.Fatalf("refusal returned %+v", f)
			}
			wantCorrupt(t, err, file, c.why)
		})
	}
}

// dictFile returns a dictionary file whose fields after the version are
// the annotated hex s, sealed with its CRC.
func dictFile(t *testing.T, s string) []byte {
	return sealed(t, `434e544d44494354 0100 # "CNTMDICT", version 1`+"\n"+s)
}

func TestParseDictRefuses(t *testing.T) {
	const file = "db/dicts/00000001.dict"
	good := dictFile(t, `01000000 02 6869 # id 1, "hi"`)
	if id, d, err := ParseDict(file, good); err != nil || id != 1 || string(d) != "hi" {
		t.Fatalf("the base case reads as %d %q, %v", id, d, err)
	}
	for _, c := range []refusal{
		{"empty", nil, "not a dictionary file (bad magic or 0 bytes)"},
		{"too short", good[:17], "not a dictionary file (bad magic or 17 bytes)"},
		{"bad magic", withCRC(edit(good, func(b []byte) []byte { b[4] = 'X'; return b })), "bad magic"},
		{"a frame file", (&FrameFile{Run: "r", Seq: 1}).Marshal(), "bad magic"},
		{"bad checksum", edit(good, func(b []byte) []byte { b[10] ^= 2; return b }), "checksum mismatch"},
		{"unknown version", withCRC(edit(good, func(b []byte) []byte { b[8] = 0; return b })), "unknown version 0"},
		{"trailing byte", dictFile(t, `01000000 02 6869 00`), "dictionary file: 1 trailing bytes"},
		{"dictionary beyond the file", dictFile(t, `01000000 03 6869`), "dictionary: need 3 bytes, 2 left"},
		{"no dictionary", dictFile(t, `01000000`), "dictionary length: bad or truncated varint"},
		{"non-minimal length", dictFile(t, `01000000 8200 6869`), "dictionary length: varint of 2 bytes is not minimal"},
		{"id 0", dictFile(t, `00000000 02 6869`), "dictionary id 0 is reserved"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, d, err := ParseDict(file, c.b)
			if id != 0 || d != nil {
				t.Fatalf("refusal returned %d %q", id, d)
			}
			wantCorrupt(t, err, file, c.why)
		})
	}
}

// TestParseNeverPanics feeds every prefix of each golden file, and each
// with one byte flipped and its CRC fixed, to its parser: each is read or
// refused as corrupt, never a panic.
func TestParseNeverPanics(t *testing.T) {
	cp := Checkpoint{Gen: 3, Replay: wal.Pos{Segment: 2, Offset: 4096}, LedgerGen: 3, Dict: 2, StoreID: goldenStoreID,
		Runs: []CheckpointRun{{ID: "r1", LastSeq: 5, FrameSeq: 5, Inflight: []InflightAction{{Index: 1}}}}}
	files := map[string][]byte{
		"STORE":      (&Store{ID: goldenStoreID, Mode: ChainUnkeyed}).Marshal(),
		"CHECKPOINT": cp.Marshal(),
		"frame":      (&FrameFile{Run: "r1", Seq: 5, Frame: []byte{0, 0, 0xf1}}).Marshal(),
		"dict":       MarshalDict(7, []byte("0123456789abcdef")),
	}
	parse := map[string]func([]byte) error{
		"STORE":      func(b []byte) error { _, err := ParseStore("f", b); return err },
		"CHECKPOINT": func(b []byte) error { _, err := ParseCheckpoint("f", b); return err },
		"frame":      func(b []byte) error { _, err := ParseFrameFile("f", b); return err },
		"dict":       func(b []byte) error { _, _, err := ParseDict("f", b); return err },
	}
	for kind, good := range files {
		try := func(b []byte) {
			if err := parse[kind](b); err != nil && !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("%s %x: error %v does not match record.ErrCorrupt", kind, b, err)
			}
		}
		if err := parse[kind](good); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		for n := range len(good) {
			if parse[kind](good[:n]) == nil {
				t.Fatalf("%s: a prefix of %d bytes accepted", kind, n)
			}
			try(withCRC(append(good[:n:n], 0, 0, 0, 0)))
		}
		for i := range len(good) - 4 {
			for _, bit := range []byte{0x01, 0x80} {
				b := edit(good, func(b []byte) []byte { b[i] ^= bit; return b })
				if parse[kind](b) == nil {
					t.Fatalf("%s: byte %d flipped (%#x) passes the checksum", kind, i, bit)
				}
				try(withCRC(b))
			}
		}
	}
}
