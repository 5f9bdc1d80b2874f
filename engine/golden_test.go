package engine

import (
	"bytes"
	"testing"

	"github.com/continuumdb/continuum/internal/goldenhex"
)

// TestGoldenCheckpoint pins CHECKPOINT version 2 (format.go says it is
// frozen) byte for byte, and reads version 1, which lacks the dictionary
// id, as before.
func TestGoldenCheckpoint(t *testing.T) {
	cp := checkpointFile{gen: 3, replay: walPos{seg: 2, off: 4096}, ledgerGen: 3, dict: 1,
		storeID: [16]byte{0xaa, 15: 0xbb},
		runs: []checkpointRun{{id: "r1", nonce: [16]byte{0x11}, created: -1, lastSeq: 5, head: [32]byte{0x22},
			frameSeq: 5, indexedSeq: 5, snapSeq: 4, ckptSeq: 5, ckptHead: [32]byte{0x22},
			inflight: []inflightAction{{index: 1, fp: [32]byte{0x33}}}}}}
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
	if got := cp.marshal(); !bytes.Equal(got, v2) {
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
		got, err := parseCheckpointFile("CHECKPOINT", b)
		if err != nil {
			t.Fatal(err)
		}
		want := cp
		if b[8] == 1 {
			want.dict = 0 // version 1 does not say
		}
		if got.gen != want.gen || got.replay != want.replay || got.ledgerGen != want.ledgerGen || got.storeID != want.storeID ||
			got.dict != want.dict || len(got.runs) != 1 || got.runs[0].id != "r1" || got.runs[0].head != want.runs[0].head ||
			got.runs[0].created != -1 || len(got.runs[0].inflight) != 1 || got.runs[0].inflight[0] != want.runs[0].inflight[0] {
			t.Fatalf("version %d read back as %+v", b[8], got)
		}
	}
}
