package layout

// The note the engine keeps in a compacted log segment for every record
// that compaction removed (wal.Log.Compact, wal.Reclaimed.Note): what the
// record was, so that verify can check that only dead records went (the
// records of runs that a delete record deletes, superseded store heads).
// Frozen like format.go:
//
//	version u8 (1) | record kind u8 | seq uvarint | run id (the rest)
//
// A store head has seq 0 and no run id.

import (
	"encoding/binary"
	"fmt"

	"github.com/continuumdb/continuum/record"
)

const reclaimedVersion = 1

// ReclaimedNote is what a compacted segment says of a removed record.
type ReclaimedNote struct {
	Kind record.Kind
	Run  string
	Seq  uint64
}

// Marshal encodes n.
func (n ReclaimedNote) Marshal() []byte {
	b := []byte{reclaimedVersion, byte(n.Kind)}
	b = binary.AppendUvarint(b, n.Seq)
	return append(b, n.Run...)
}

// ParseReclaimedNote decodes a note written by Marshal.
func ParseReclaimedNote(b []byte) (ReclaimedNote, error) {
	if len(b) < 3 || b[0] != reclaimedVersion {
		return ReclaimedNote{}, fmt.Errorf("layout: reclaimed-record note of %d bytes: not version %d", len(b), reclaimedVersion)
	}
	seq, n := binary.Uvarint(b[2:])
	if n <= 0 {
		return ReclaimedNote{}, fmt.Errorf("layout: reclaimed-record note: bad seq")
	}
	return ReclaimedNote{Kind: record.Kind(b[1]), Seq: seq, Run: string(b[2+n:])}, nil
}
