package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/internal/crc32c"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func testSnapshot(run string, seq uint64) *Snapshot {
	s := &Snapshot{
		RunID:   run,
		Seq:     seq,
		Frame:   []byte("frame of " + run + " at " + string(rune('0'+seq%10))),
		Created: time.Date(2026, 11, 29, 9, 0, 0, int(seq), time.UTC),
	}
	for i := range s.Head {
		s.Head[i] = byte(seq) + byte(i)
	}
	return s
}

var snapCmp = []cmp.Option{cmpopts.EquateEmpty()}

func TestSnapshotRoundTrip(t *testing.T) {
	tests := []*Snapshot{
		testSnapshot("r", 1),
		testSnapshot("agent/ünï 7", 0),
		testSnapshot(strings.Repeat("x", MaxRunIDLen), math.MaxUint64),
		{RunID: "empty-frame", Seq: 5},                               // zero time, nil frame
		{RunID: "old", Seq: 2, Created: time.Unix(-1e12, 999999999)}, // before 1970
		{RunID: "far", Seq: 3, Created: time.Date(9999, 1, 1, 0, 0, 0, 1, time.UTC)},
	}
	for _, s := range tests {
		key := AppendSnapshotKey(nil, s.RunID, s.Seq)
		val := AppendSnapshot([]byte("prefix"), s)
		if !bytes.HasPrefix(val, []byte("prefix")) {
			t.Fatalf("AppendSnapshot did not append to dst")
		}
		val = val[len("prefix"):]
		got, err := DecodeSnapshot(key, val)
		if err != nil {
			t.Fatalf("DecodeSnapshot(%q, %d): %v", s.RunID, s.Seq, err)
		}
		if !got.Created.Equal(s.Created) {
			t.Errorf("run %q: Created = %v, want %v", s.RunID, got.Created, s.Created)
		}
		want := *s
		want.Created = got.Created
		if diff := cmp.Diff(&want, got, snapCmp...); diff != "" {
			t.Errorf("round trip of run %q seq %d (-want +got):\n%s", s.RunID, s.Seq, diff)
		}
		if s.Created.IsZero() && !got.Created.IsZero() {
			t.Errorf("zero Created decoded as %v", got.Created)
		}
		// Canonical: re-encoding gives the same bytes.
		if again := AppendSnapshot(nil, got); !bytes.Equal(again, val) {
			t.Errorf("run %q: re-encoding differs", s.RunID)
		}
		// The decoded snapshot does not alias val.
		for i := range val {
			val[i] = 0xff
		}
		if diff := cmp.Diff(&want, got, snapCmp...); diff != "" {
			t.Errorf("decoded snapshot aliases its input (-want +got):\n%s", diff)
		}
	}
}

func TestAppendSnapshotInvalid(t *testing.T) {
	dst := []byte("keep")
	for _, s := range []*Snapshot{nil, {RunID: ""}, {RunID: strings.Repeat("x", MaxRunIDLen+1)}} {
		if got := AppendSnapshot(dst, s); !bytes.Equal(got, dst) {
			t.Errorf("AppendSnapshot(%v) changed dst to %q", s, got)
		}
		if err := s.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%v) = %v, want ErrInvalid", s, err)
		}
	}
}

// malformed is a decoding case: a key and a value DecodeSnapshot must
// refuse, and what its error must say.
type malformed struct {
	name     string
	key, val []byte
	want     string // substring of the error
}

// resealedUnder is val moved under the snapshot key of run at seq 42, its
// checksum recomputed for that key.
func resealedUnder(name, run string, val []byte, want string) malformed {
	key := AppendSnapshotKey(nil, run, 42)
	return malformed{"key with a " + name, key, reseal(key, bytes.Clone(val)), want}
}

// reseal recomputes the checksum of a value edited in place.
func reseal(key, val []byte) []byte {
	body := val[:len(val)-4]
	crc := crc32c.Update(crc32c.Checksum(key), body)
	binary.BigEndian.PutUint32(val[len(val)-4:], crc)
	return val
}

func TestDecodeSnapshotMalformed(t *testing.T) {
	s := testSnapshot("run-7", 42)
	key := AppendSnapshotKey(nil, s.RunID, s.Seq)
	good := AppendSnapshot(nil, s)
	edit := func(f func(v []byte) []byte) []byte { return f(bytes.Clone(good)) }

	tests := []malformed{
		{"nil key", nil, good, "not a"},
		{"position key", appendRunKey(nil, spacePosition, "run-7", 42), good, "not a"},
		{"key without length", []byte{spaceSnapshot}, good, "bad run id length"},
		{"key with overlong length", []byte{spaceSnapshot, 0x85, 0x00, 'a', 'b', 'c', 'd', 'e', 0, 0, 0, 0, 0, 0, 0, 1}, good, "non-minimal"},
		{"key with empty run", append([]byte{spaceSnapshot, 0}, make([]byte, 8)...), good, "out of range"},
		{"key with huge run", binary.AppendUvarint([]byte{spaceSnapshot}, MaxRunIDLen+1), good, "out of range"},
		{"key too short", key[:len(key)-1], good, "bytes after the run id length"},
		{"key too long", append(bytes.Clone(key), 0), good, "bytes after the run id length"},
		{"empty value", key, nil, "shorter than"},
		{"truncated header", key, good[:20], "shorter than"},
		{"truncated frame", key, good[:len(good)-5], "truncated or trailing"},
		{"trailing byte", key, append(bytes.Clone(good), 0), "truncated or trailing"},
		{"bad magic", key, edit(func(v []byte) []byte { v[0] = 'X'; return reseal(key, v) }), "bad magic"},
		{"future version", key, edit(func(v []byte) []byte { v[4] = 3; return reseal(key, v) }), "unknown value version 3"},
		{"chunked version", key, edit(func(v []byte) []byte { v[4] = 2; return reseal(key, v) }), "a chunked value (version 2)"},
		{"flags set", key, edit(func(v []byte) []byte { v[5] = 1; return reseal(key, v) }), "reserved flags"},
		{"frame length over limit", key, edit(func(v []byte) []byte {
			binary.BigEndian.PutUint32(v[50:], MaxFrameSize+1)
			return v
		}), "exceeds the"},
		{"frame length lies", key, edit(func(v []byte) []byte {
			binary.BigEndian.PutUint32(v[50:], binary.BigEndian.Uint32(v[50:])+1)
			return v
		}), "truncated or trailing"},
		{"flipped frame bit", key, edit(func(v []byte) []byte { v[valueHeaderLen] ^= 1; return v }), "checksum mismatch"},
		{"flipped head bit", key, edit(func(v []byte) []byte { v[20] ^= 0x80; return v }), "checksum mismatch"},
		{"flipped crc bit", key, edit(func(v []byte) []byte { v[len(v)-1] ^= 1; return v }), "checksum mismatch"},
		{"value under another seq", AppendSnapshotKey(nil, "run-7", 43), good, "checksum mismatch"},
		{"value under another run", AppendSnapshotKey(nil, "run-8", 42), good, "checksum mismatch"},
		{"nanoseconds out of range", key, edit(func(v []byte) []byte {
			binary.BigEndian.PutUint32(v[14:], 1e9)
			return reseal(key, v)
		}), "nanoseconds"},
		// Keys whose run id the run-id rule refuses, under values sealed for
		// them: no writer stores such an id.
		resealedUnder("run of 4096 bytes (the old bound)", strings.Repeat("r", 4096), good, "out of range [1, 256]"),
		resealedUnder("run of 257 bytes", strings.Repeat("r", MaxRunIDLen+1), good, "out of range [1, 256]"),
		resealedUnder("run with a NUL", "run\x007", good, "has a control character at byte 3"),
		resealedUnder("run with a newline", "run\n7", good, "has a control character at byte 3"),
		resealedUnder("run not UTF-8", "run-\xff", good, "is not valid UTF-8"),
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeSnapshot(tt.key, tt.val)
			if err == nil {
				t.Fatalf("DecodeSnapshot succeeded with %+v", got)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("error %v does not wrap ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if bytes.Equal(tt.key, key) && !strings.Contains(err.Error(), `run "run-7" seq 42`) {
				t.Errorf("error %q does not name the run and seq", err)
			}
		})
	}
}

func TestKeysOfRunsDoNotInterleave(t *testing.T) {
	// Ids that share prefixes, with the lowest and the highest bytes a run
	// id may hold (space, and the last code point's 0xf4 0x8f 0xbf 0xbf).
	runs := []string{"a", "a b", "ab", "a ", " ", "\U0010ffff", "b", strings.Repeat("a", MaxRunIDLen)}
	for _, r := range runs {
		lo, hi := runBounds(spaceSnapshot, r)
		for _, other := range runs {
			if other == r {
				continue
			}
			for _, seq := range []uint64{0, 1, 1 << 32, math.MaxUint64} {
				k := AppendSnapshotKey(nil, other, seq)
				if bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0 {
					t.Errorf("key of run %q seq %d falls in the range of run %q", other, seq, r)
				}
			}
		}
		for _, seq := range []uint64{0, 1, math.MaxUint64} {
			k := AppendSnapshotKey(nil, r, seq)
			if bytes.Compare(k, lo) < 0 || bytes.Compare(k, hi) >= 0 {
				t.Errorf("key of run %q seq %d outside its own range", r, seq)
			}
			gotRun, gotSeq, err := parseRunKey(spaceSnapshot, k)
			if err != nil || gotRun != r || gotSeq != seq {
				t.Errorf("parseRunKey(%q) = %q, %d, %v", k, gotRun, gotSeq, err)
			}
		}
	}
}

func TestPositionValue(t *testing.T) {
	for _, p := range []Pos{{}, {Segment: 1, Offset: 2}, {Segment: math.MaxUint64, Offset: math.MaxInt64}} {
		got, err := decodePos("r", 1, appendPos(nil, p))
		if err != nil || got != p {
			t.Errorf("position %+v round trip = %+v, %v", p, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {0x80}, {1}, {1, 2, 3}, binary.AppendUvarint([]byte{1}, math.MaxUint64),
		{0x83, 0x00, 0xac, 0x02}, {0x03, 0xac, 0x82, 0x00}} { // 3:300 with a padded segment, a padded offset

		if _, err := decodePos("r", 9, bad); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `run "r" seq 9`) {
			t.Errorf("decodePos(%x) = %v, want ErrCorrupt naming run and seq", bad, err)
		}
	}
}
