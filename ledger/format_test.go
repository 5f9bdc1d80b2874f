package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sampleIntents() []*Intent {
	return []*Intent{
		{},
		{Fingerprint: Fingerprint{1, 2, 3}, RunID: "run-1", Seq: 42, Index: 3, Tool: "email.send",
			Args: []byte(`{"to":"a@b.c"}`), Key: "ck1-5:run-1:42:3", Idempotent: true},
		{Fingerprint: Fingerprint{0xff}, RunID: strings.Repeat("r", 300), Seq: math.MaxUint64, Index: math.MaxUint32,
			Tool: "t", Args: bytes.Repeat([]byte("x"), 70000), Key: "k"},
	}
}

func sampleCertificates() []*Certificate {
	return []*Certificate{
		{Status: StatusDone, Result: []byte{}},
		{Fingerprint: Fingerprint{9}, RunID: "run-1", Seq: 7, Index: 1, Status: StatusDone, Result: []byte(`{"id":"m-1"}`)},
		{Fingerprint: Fingerprint{8}, RunID: "r", Seq: 1 << 40, Index: 0, Status: StatusFailed, Result: []byte{}, Err: "smtp: 550 mailbox unavailable"},
		{Fingerprint: Fingerprint{7}, RunID: "r", Seq: 3, Status: StatusResolved, Result: bytes.Repeat([]byte{0}, 1000)},
	}
}

func TestIntentRoundTrip(t *testing.T) {
	for i, in := range sampleIntents() {
		b := AppendIntent([]byte("prefix"), in)
		if string(b[:6]) != "prefix" {
			t.Fatalf("intent %d: prefix clobbered", i)
		}
		got, err := DecodeIntent(b[6:])
		if err != nil {
			t.Fatalf("intent %d: %v", i, err)
		}
		if !reflect.DeepEqual(in, got) { // cmp.Diff only on failure: it is slow on 70 kB under -race
			t.Fatalf("intent %d round trip (-want +got):\n%s", i, cmp.Diff(in, got))
		}
		// The decoded intent shares no memory with the buffer.
		for k := range b {
			b[k] = 0xAA
		}
		if !reflect.DeepEqual(in, got) {
			t.Fatalf("intent %d aliases its buffer:\n%s", i, cmp.Diff(in, got))
		}
	}
}

func TestCertificateRoundTrip(t *testing.T) {
	for i, c := range sampleCertificates() {
		b := AppendCertificate(nil, c)
		got, err := DecodeCertificate(b)
		if err != nil {
			t.Fatalf("certificate %d: %v", i, err)
		}
		if !reflect.DeepEqual(c, got) {
			t.Fatalf("certificate %d round trip (-want +got):\n%s", i, cmp.Diff(c, got))
		}
		if !bytes.Equal(AppendCertificate(nil, got), b) {
			t.Fatalf("certificate %d: re-encoding differs", i)
		}
	}
}

// TestDecodeTruncated checks every strict prefix of valid records is
// rejected as corrupt, never accepted and never a panic.
func TestDecodeTruncated(t *testing.T) {
	for i, in := range sampleIntents()[:2] {
		b := AppendIntent(nil, in)
		for n := range len(b) {
			if _, err := DecodeIntent(b[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("intent %d cut to %d of %d bytes: %v", i, n, len(b), err)
			}
		}
	}
	for i, c := range sampleCertificates() {
		b := AppendCertificate(nil, c)
		for n := range len(b) {
			if _, err := DecodeCertificate(b[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("certificate %d cut to %d of %d bytes: %v", i, n, len(b), err)
			}
		}
	}
}

func TestDecodeMalformed(t *testing.T) {
	in := AppendIntent(nil, sampleIntents()[1])
	cert := AppendCertificate(nil, sampleCertificates()[1])
	edit := func(b []byte, f func([]byte) []byte) []byte { return f(bytes.Clone(b)) }
	// Offset of the seq varint: after magic, version, flags/status, fingerprint.
	const seqOff = recordHeaderSize
	tests := []struct {
		name  string
		cert  bool
		b     []byte
		where string
	}{
		{"intent bad magic", false, edit(in, func(b []byte) []byte { b[0] = 'X'; return b }), "offset 0"},
		{"intent is a certificate", false, cert, "bad magic"},
		{"intent bad version", false, edit(in, func(b []byte) []byte { b[2] = 4; return b }), "unknown version 4"},
		{"intent version 2 without a compensation", false, edit(in, func(b []byte) []byte { b[2] = 2; return b }), "written as version 1"},
		{"intent version 1 with a compensation flag", false, edit(in, func(b []byte) []byte { b[3] |= 2; return b }), "unknown flags"},
		{"intent version 2 truncated compensation", false, edit(in, func(b []byte) []byte { b[2], b[3] = 2, b[3]|2; return b }), "compensation tool length"},
		{"intent version 2 compensation and undoes", false, edit(in, func(b []byte) []byte { b[2], b[3] = 2, b[3]|2|8; return b }), "compensation of its own"},
		{"intent version 2 truncated undoes", false, edit(in, func(b []byte) []byte { b[2], b[3] = 2, b[3]|8; return append(b, 1, 2) }), "truncated undone fingerprint"},
		{"intent version 2 zero undoes", false, edit(in, func(b []byte) []byte { b[2], b[3] = 2, b[3]|8; return append(b, make([]byte, 32)...) }), "zero fingerprint"},
		{"intent version 2 idempotent compensation without one", false, edit(in, func(b []byte) []byte {
			b[2], b[3] = 2, b[3]|4|8
			return append(b, make([]byte, 32)...)
		}), "compensation idempotent without"},
		{"intent version 2 empty compensation tool", false, edit(in, func(b []byte) []byte { b[2], b[3] = 2, b[3]|2; return append(b, 0, 0, 0) }), "compensation without a tool"},
		{"intent unknown flags", false, edit(in, func(b []byte) []byte { b[3] |= 0x80; return b }), "offset 3"},
		{"intent trailing byte", false, append(bytes.Clone(in), 0), "1 trailing bytes"},
		{"intent non-minimal seq", false, edit(in, func(b []byte) []byte {
			// seq 42 as two bytes 0xaa 0x00 instead of 0x2a
			return append(append(b[:seqOff:seqOff], 0xaa, 0x00), b[seqOff+1:]...)
		}), "not minimally encoded"},
		{"intent seq overflow", false, append(append(bytes.Clone(in[:seqOff]), bytes.Repeat([]byte{0xff}, 10)...), 0x01), "overflows"},
		{"intent index beyond 32 bits", false, func() []byte {
			b := bytes.Clone(in[:seqOff])
			b = binary.AppendUvarint(b, 1)
			b = binary.AppendUvarint(b, 1<<32)
			return append(b, in[seqOff+2:]...)
		}(), "exceeds 32 bits"},
		{"intent huge run id length", false, func() []byte {
			b := bytes.Clone(in[:seqOff+2])
			return binary.AppendUvarint(b, 1<<62)
		}(), "exceeds the 0 remaining bytes"},
		{"certificate bad status", true, edit(cert, func(b []byte) []byte { b[3] = byte(StatusIntent); return b }), "bad status 1"},
		{"certificate zero status", true, edit(cert, func(b []byte) []byte { b[3] = 0; return b }), "offset 3"},
		{"certificate is an intent", true, in, "bad magic"},
		{"certificate trailing", true, append(bytes.Clone(cert), 1, 2), "2 trailing bytes"},
		{"certificate bad version", true, edit(cert, func(b []byte) []byte { b[2] = 0; return b }), "offset 2"},
		{"empty", true, nil, "truncated header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.cert {
				_, err = DecodeCertificate(tc.b)
			} else {
				_, err = DecodeIntent(tc.b)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), tc.where) {
				t.Fatalf("error %q does not mention %q", err, tc.where)
			}
		})
	}
}
