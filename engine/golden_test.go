package engine

import (
	"bytes"
	"testing"

	"github.com/continuumdb/continuum/internal/goldenhex"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

// TestGoldenCheckpoint pins CHECKPOINT version 2 (format.go says it is
// frozen) byte for byte, and reads version 1, which lacks the dictionary
// id, as before.
func TestGoldenCheckpoint(t *testing.T) {
	cp := layout.Checkpoint{Gen: 3, Replay: wal.Pos{Segment: 2, Offset: 4096}, LedgerGen: 3, Dict: 1,
		StoreID: [16]byte{0xaa, 15: 0xbb},
		Runs: []layout.CheckpointRun{{ID: "r1", Nonce: [16]byte{0x11}, Created: -1, LastSeq: 5, Head: [32]byte{0x22},
			FrameSeq: 5, IndexedSeq: 5, SnapSeq: 4, CkptSeq: 5, CkptHead: [32]byte{0x22},
			Inflight: []layout.InflightAction{{Index: 1, FP: [32]byte{0x33}}}}}}
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
	if got := cp.Marshal(); !bytes.Equal(got, v2) {
		t.Fatalf("CHECKPOINT encoding changed:\n got %x\nwant %x", got, v2)
	}
	v1 := goldenhex.Decode(t, `
		434e544d434b5054   # "CNTMCKPT"
		0100               # version 1
		03 02 8020 03      # generation, replay position, ledger table generation
		aa0000000000000000000000000000bb # store id
	`+body+`
		05e46e99           # crc32c of all before
	`)
	for _, b := range [][]byte{v1, v2} {
		got, err := layout.ParseCheckpoint("CHECKPOINT", b)
		if err != nil {
			t.Fatal(err)
		}
		want := cp
		if b[8] == 1 {
			want.Dict = 0 // version 1 does not say
		}
		if got.Gen != want.Gen || got.Replay != want.Replay || got.LedgerGen != want.LedgerGen || got.StoreID != want.StoreID ||
			got.Dict != want.Dict || len(got.Runs) != 1 || got.Runs[0].ID != "r1" || got.Runs[0].Head != want.Runs[0].Head ||
			got.Runs[0].Created != -1 || len(got.Runs[0].Inflight) != 1 || got.Runs[0].Inflight[0] != want.Runs[0].Inflight[0] {
			t.Fatalf("version %d read back as %+v", b[8], got)
		}
	}
}
