package crc32c

import (
	"bytes"
	"testing"
)

// TestKnownValues pins the polynomial: the check value of the CRC
// catalogue and RFC 3720's iSCSI test vectors (B.4) are CRC-32C's, and no
// other CRC-32 gives them.
func TestKnownValues(t *testing.T) {
	inc := make([]byte, 32)
	dec := make([]byte, 32)
	for i := range inc {
		inc[i] = byte(i)
		dec[i] = byte(31 - i)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want uint32
	}{
		{"empty", nil, 0},
		{"check value 123456789", []byte("123456789"), 0xe3069283},
		{"32 zero bytes", make([]byte, 32), 0x8a9136aa},
		{"32 0xff bytes", bytes.Repeat([]byte{0xff}, 32), 0x62a8ab43},
		{"32 incrementing bytes", inc, 0x46dd794e},
		{"32 decrementing bytes", dec, 0x113fdb5c},
	} {
		if got := Checksum(tc.in); got != tc.want {
			t.Errorf("%s: Checksum = %#08x, want %#08x", tc.name, got, tc.want)
		}
	}
}

// TestUpdateComposes: a checksum computed in pieces, split anywhere, is the
// checksum of the whole, as the formats that checksum a key and then a
// value, or a header and then a payload, rely on.
func TestUpdateComposes(t *testing.T) {
	b := []byte("a record header, then its payload, then the segment id")
	whole := Checksum(b)
	for i := 0; i <= len(b); i++ {
		if got := Update(Checksum(b[:i]), b[i:]); got != whole {
			t.Fatalf("split at %d: %#08x, want %#08x", i, got, whole)
		}
	}
	if got := Update(0, b); got != whole {
		t.Errorf("Update(0, b) = %#08x, want Checksum(b) = %#08x", got, whole)
	}
}
