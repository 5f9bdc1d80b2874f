package record

import (
	"bytes"
	"errors"
	"github.com/continuumdb/continuum/wal"
	"strings"
	"testing"
)

// TestStreamMalformed: a stream record that breaks a rule of its format
// is a CorruptionError that says which, never a record.
func TestStreamMalformed(t *testing.T) {
	for _, c := range []struct {
		name, why string
		raw       []byte
	}{
		{"seq 0", "both start at 1", AppendStreamChunk(nil, "r", 0, 1, "s", 0, nil)},
		{"attempt 0", "both start at 1", AppendStreamChunk(nil, "r", 1, 0, "s", 0, nil)},
		{"abandon attempt 0", "both start at 1", AppendStreamAbandon(nil, "r", 1, 0)},
		{"empty name", "stream name of 0 bytes", AppendStreamChunk(nil, "r", 1, 1, "", 0, nil)},
		{"slash in name", "is not a letter", AppendStreamChunk(nil, "r", 1, 1, "a/b", 0, nil)},
		{"long name", "exceeds the bound", AppendStreamChunk(nil, "r", 1, 1, strings.Repeat("a", MaxStreamNameLen+1), 0, nil)},
		{"huge data", "the limit is", AppendStreamChunk(nil, "r", 1, 1, "s", 0, make([]byte, MaxChunkSize+1))},
		{"abandon trailing", "trailing bytes", append(AppendStreamAbandon(nil, "r", 1, 1), 0)},
		{"truncated", "need", AppendStreamChunkHeader(nil, "r", 1, 1, "stream", 0)[:8]},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r Record
			err := (&Decoder{}).Decode(c.raw, wal.Pos{Segment: 1, Offset: 64}, "seg", &r)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("got %v, want a corruption that says %q", err, c.why)
			}
		})
	}
}

// TestSealedChunk: in an encrypted store a chunk's data is sealed for its
// place; moved to another offset, attempt, stream or seq it does not open,
// and a plaintext chunk there is damage.
func TestSealedChunk(t *testing.T) {
	s := testSealer(t)
	seal1 := func(run string, seq, attempt uint64, stream string, off uint64) []byte {
		rec := AppendStreamChunkHeader(nil, "r1", seq, attempt, stream, off)
		out, err := s.SealChunk(rec, []byte("secret"), run, seq, attempt, stream, off)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	d := &Decoder{Sealed: true, Sealer: s}
	var r Record
	raw := seal1("r1", 3, 1, "tok", 7)
	if bytes.Contains(raw, []byte("secret")) {
		t.Fatal("the data is in the clear")
	}
	if err := d.Decode(raw, wal.Pos{Segment: 1, Offset: 64}, "seg", &r); err != nil || !r.Opened || string(r.Chunk) != "secret" {
		t.Fatalf("decoded %+v, %v", r, err)
	}
	// Without the keys: the data stays sealed.
	if err := (&Decoder{Sealed: true}).Decode(raw, wal.Pos{Segment: 1, Offset: 64}, "seg", &r); err != nil || r.Opened || r.Chunk != nil || len(r.Stored) == 0 {
		t.Fatalf("decoded without keys %+v, %v", r, err)
	}
	// Sealed for another place, then given this record's header.
	for _, moved := range [][]byte{seal1("r1", 3, 1, "tok", 8), seal1("r1", 3, 2, "tok", 7), seal1("r1", 3, 1, "tak", 7), seal1("r1", 4, 1, "tok", 7)} {
		var rr Record
		if err := d.Decode(moved, wal.Pos{Segment: 1, Offset: 64}, "seg", &rr); err != nil {
			t.Fatal(err)
		}
		hdr := AppendStreamChunkHeader(nil, "r1", 3, 1, "tok", 7)
		forged := append(hdr, rr.Raw[len(AppendStreamChunkHeader(nil, rr.Run, rr.Seq, rr.Attempt, rr.Stream, rr.Offset)):]...)
		if err := d.Decode(forged, wal.Pos{Segment: 1, Offset: 64}, "seg", &r); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a chunk moved to another place opened: %v", err)
		}
	}
	if err := d.Decode(AppendStreamChunk(nil, "r1", 3, 1, "tok", 7, []byte("plain")), wal.Pos{Segment: 1, Offset: 64}, "seg", &r); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a plaintext chunk in an encrypted store: %v", err)
	}
	// An erased key: Erased, no error.
	k, _ := s.Keys.Scope("r1")
	s.Keys.Drop("r1", []uint64{k.No()})
	if err := d.Decode(raw, wal.Pos{Segment: 1, Offset: 64}, "seg", &r); err != nil || !r.Erased || r.Chunk != nil {
		t.Fatalf("decoded with the key erased %+v, %v", r, err)
	}
}
