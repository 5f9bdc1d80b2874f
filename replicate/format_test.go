package replicate

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

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
