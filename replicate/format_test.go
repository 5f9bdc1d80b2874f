package replicate

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/continuumdb/continuum/wal"
	"github.com/google/go-cmp/cmp"
)

// TestGroupGolden pins the group encoding (format.go): frozen.
func TestGroupGolden(t *testing.T) {
	got := encodeGroup([][][]byte{{[]byte("ab")}, {[]byte("c"), {}}})
	want := "02" + // 2 appends
		"01" + "02" + "6162" + // 1 record: "ab"
		"02" + "01" + "63" + "00" + // 2 records: "c", ""
		"" // then the crc32c (Castagnoli) of these bytes, little endian
	if h := hex.EncodeToString(got[:len(got)-4]); h != want {
		t.Fatalf("group body %s, want %s", h, want)
	}
	if h := hex.EncodeToString(got[len(got)-4:]); h != "cb8c0859" {
		t.Errorf("group checksum %s: the encoding changed", h)
	}
}

// TestGroupRoundTrip checks that decodeGroup gives back every append whole
// and refuses every damaged or truncated encoding with errFormat.
func TestGroupRoundTrip(t *testing.T) {
	groups := [][][][]byte{
		{{[]byte("one")}},
		{{[]byte("a"), []byte("bb")}, {bytes.Repeat([]byte{7}, 300)}, {{}}},
	}
	for _, g := range groups {
		b := encodeGroup(g)
		got, err := decodeGroup(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(g, got); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
		for i := range b {
			d := bytes.Clone(b)
			d[i] ^= 0x40
			if _, err := decodeGroup(d); !errors.Is(err, errFormat) {
				t.Fatalf("byte %d flipped: %v, want errFormat", i, err)
			}
			if _, err := decodeGroup(b[:i]); !errors.Is(err, errFormat) {
				t.Fatalf("cut at %d: %v, want errFormat", i, err)
			}
		}
	}
	// Well-checksummed bodies that lie about their counts (a group's
	// checksum is sealFile's: crc32c of the body, little endian).
	for _, body := range [][]byte{{0x05}, {0x01, 0x00}, {0x01, 0x01, 0x09, 'x'}, {0x01, 0x01, 0x01, 'x', 'y'}, {0x01}} {
		if _, err := decodeGroup(sealFile(body)); !errors.Is(err, errFormat) {
			t.Errorf("body %x: %v, want errFormat", body, err)
		}
	}
}

func TestParsePart(t *testing.T) {
	for _, c := range []struct {
		in   string
		i, n int
		ok   bool
	}{
		{"1/1", 1, 1, true}, {"2/3", 2, 3, true}, {formatPart(7, 9), 7, 9, true},
		{"", 0, 0, false}, {"0/1", 0, 0, false}, {"3/2", 0, 0, false}, {"1", 0, 0, false}, {"a/b", 0, 0, false}, {"1/-1", 0, 0, false},
	} {
		i, n, err := parsePart(c.in)
		if (err == nil) != c.ok || i != c.i || n != c.n {
			t.Errorf("parsePart(%q) = %d, %d, %v", c.in, i, n, err)
		}
	}
}

func TestFileName(t *testing.T) {
	for name, ok := range map[string]bool{
		"STORE": true, "dicts/00000001.dict": true,
		"": false, "dicts/": false, "dicts/../STORE": false, "../x.dict": false, "dicts/a/b.dict": false,
		"/etc/passwd": false, "CHECKPOINT": false, "dicts/x.txt": false,
	} {
		if fileName(name) != ok {
			t.Errorf("fileName(%q) = %v", name, !ok)
		}
	}
}

// TestMarkGolden pins REPLICA's layout (format.go): frozen.
func TestMarkGolden(t *testing.T) {
	m := mark{Created: 0x0102030405060708, Epoch: 3, Pos: wal.Pos{Segment: 2, Offset: 0x28}, Seq: 9,
		PendingRecords: 1, PendingSeq: 10}
	for i := range m.StoreID {
		m.StoreID[i] = byte(0xa0 + i)
	}
	h := newRecordsHash()
	h.add([]byte("ab"))
	m.PendingHash = h.sum()
	got := m.marshal()
	want := hex.EncodeToString([]byte(markMagic)) + "0100" + // magic, version 1
		"a0a1a2a3a4a5a6a7a8a9aaabacadaeaf" + // store id
		"0807060504030201" + // created
		"0300000000000000" + // epoch 3
		"0200000000000000" + "2800000000000000" + // position 2:40
		"0900000000000000" + // seq 9
		"0100000000000000" + "0a00000000000000" + // 1 pending record, to seq 10
		"" // then SHA-256(uvarint 2, "ab") and the crc32c of all before it
	if len(got) != markSize {
		t.Fatalf("REPLICA of %d bytes, want %d", len(got), markSize)
	}
	if h := hex.EncodeToString(got[:markSize-4-32]); h != want {
		t.Fatalf("REPLICA %s, want %s", h, want)
	}
	if h := hex.EncodeToString(got[markSize-4-32 : markSize-4]); h != "3502aac2f2e29890633f7992adb58fb393e235472c47c234e92d465cdd066830" {
		t.Errorf("pending hash %s: recordsHash changed", h)
	}
	if h := hex.EncodeToString(got[markSize-4:]); h != "59b90b4c" {
		t.Errorf("REPLICA checksum %s: the encoding changed", h)
	}
}

// TestMarkRoundTrip checks that parseMark gives back what marshal wrote
// and refuses every damaged or truncated file with errMark.
func TestMarkRoundTrip(t *testing.T) {
	m := mark{Created: 7, Epoch: 2, Pos: wal.Pos{Segment: 1, Offset: 40}, Seq: 5, PendingRecords: 3, PendingSeq: 7}
	m.PendingHash[0] = 1
	b := m.marshal()
	got, err := parseMark(b)
	if err != nil || *got != m {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for i := range b {
		d := bytes.Clone(b)
		d[i] ^= 0x40
		if _, err := parseMark(d); !errors.Is(err, errMark) {
			t.Fatalf("byte %d flipped: %v, want errMark", i, err)
		}
		if _, err := parseMark(b[:i]); !errors.Is(err, errMark) {
			t.Fatalf("cut at %d: %v, want errMark", i, err)
		}
	}
	// Well-checksummed marks that contradict themselves.
	for _, bad := range []mark{
		{Seq: 5, PendingRecords: 1, PendingSeq: 5}, // pending records, no pending message
		{Seq: 5, PendingSeq: 6},                    // a pending message, no records
		{Pos: wal.Pos{Offset: -8}},
	} {
		if _, err := parseMark(bad.marshal()); !errors.Is(err, errMark) {
			t.Errorf("%+v: %v, want errMark", bad, err)
		}
	}
}
