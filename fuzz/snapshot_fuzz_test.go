package fuzz

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/continuumdb/continuum/snapshot"
)

// snapshotSeeds are snapshots as the engine writes them: a run id, a seq at a
// snapshot boundary, a chain head and a compressed-looking frame.
func snapshotSeeds() []*snapshot.Snapshot {
	var out []*snapshot.Snapshot
	for i, run := range []string{"run-1", "a", "a b", "agent/7f3a-42"} {
		s := &snapshot.Snapshot{
			RunID:   run,
			Seq:     uint64(50 * (i + 1)),
			Created: time.Date(2026, 11, 29, 9, i, 0, 123456789*i, time.UTC),
			Frame:   bytes.Repeat([]byte{0x28, 0xb5, 0x2f, 0xfd, byte(i)}, 10*i),
		}
		for j := range s.Head {
			s.Head[j] = byte(i*31 + j)
		}
		out = append(out, s)
	}
	return append(out, &snapshot.Snapshot{RunID: "z", Seq: 0})
}

// FuzzSnapshotDecode feeds arbitrary keys and values to the snapshot value
// decoder: it must never panic, must reject with ErrCorrupt, and whatever it
// accepts must re-encode to exactly the same key and value.
func FuzzSnapshotDecode(f *testing.F) {
	for _, s := range snapshotSeeds() {
		key := snapshot.AppendSnapshotKey(nil, s.RunID, s.Seq)
		val := snapshot.AppendSnapshot(nil, s)
		f.Add(key, val)
		f.Add(key, val[:len(val)/2])
		flipped := bytes.Clone(val)
		flipped[len(flipped)/2] ^= 0x10
		f.Add(key, flipped)
	}
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, key, val []byte) {
		s, err := snapshot.DecodeSnapshot(key, val)
		if err != nil {
			if !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if got := snapshot.AppendSnapshotKey(nil, s.RunID, s.Seq); !bytes.Equal(got, key) {
			t.Fatalf("accepted key %x re-encodes as %x", key, got)
		}
		if got := snapshot.AppendSnapshot(nil, s); !bytes.Equal(got, val) {
			t.Fatalf("accepted value re-encodes differently:\n got %x\nwant %x", got, val)
		}
	})
}

// FuzzSnapshotRoundTrip encodes arbitrary snapshots: a valid one decodes to
// itself, an invalid one is refused by Validate and leaves dst unchanged.
func FuzzSnapshotRoundTrip(f *testing.F) {
	for _, s := range snapshotSeeds() {
		f.Add(s.RunID, s.Seq, s.Head[:], s.Frame, s.Created.Unix(), int64(s.Created.Nanosecond()))
	}
	f.Add("", uint64(1), []byte{}, []byte{}, int64(0), int64(0))
	f.Fuzz(func(t *testing.T, run string, seq uint64, head, frame []byte, secs, nanos int64) {
		s := &snapshot.Snapshot{RunID: run, Seq: seq, Frame: frame, Created: time.Unix(secs, nanos)}
		copy(s.Head[:], head)
		val := snapshot.AppendSnapshot([]byte("dst"), s)
		if s.Validate() != nil {
			if string(val) != "dst" {
				t.Fatalf("invalid snapshot was encoded")
			}
			return
		}
		got, err := snapshot.DecodeSnapshot(snapshot.AppendSnapshotKey(nil, run, seq), val[3:])
		if err != nil {
			t.Fatalf("decoding a fresh encoding of run %q seq %d: %v", run, seq, err)
		}
		if got.RunID != run || got.Seq != seq || got.Head != s.Head || !bytes.Equal(got.Frame, frame) || !got.Created.Equal(s.Created) {
			t.Fatalf("round trip changed the snapshot: %+v -> %+v", s, got)
		}
	})
}
