package record

import (
	"bytes"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/goldenhex"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
)

// The golden tests pin every log record kind byte for byte (format.go says
// they are frozen) and read each back. The ledger's bodies are framed with
// the raw codec (00, dictionary 00) so that the bytes do not depend on a
// compressor's version.

var (
	fp1   = ledger.Fingerprint{0x33, 31: 0x44}
	head1 = chain.Hash{0x22, 31: 0x55}
	head2 = chain.Hash{0x77, 31: 0x88}
)

const (
	hexFP    = "3300000000000000000000000000000000000000000000000000000000000044"
	hexHead  = "2200000000000000000000000000000000000000000000000000000000000055"
	hexHead2 = "7700000000000000000000000000000000000000000000000000000000000088"
)

// goldenUndo is what the golden rollback record undoes.
var goldenUndo = []Undo{
	{Seq: 6, Action: fp1, Tool: "pay", Compensation: &ledger.Compensation{Tool: "refund", Args: []byte(`{"eur":5}`), Key: "rk1"}},
	{Seq: 4, Action: fp1, Tool: "mail"},
	{Seq: 3, Action: fp1, Tool: "b", Compensation: &ledger.Compensation{Tool: "u", Key: "k2", Idempotent: true}},
}

type rawComp struct{ *frame.Compressor }

func (c rawComp) Compress(dst, src []byte, _ uint32) []byte {
	return c.CompressWith(dst, src, frame.CodecNone, 0)
}

func newRaw() rawComp { return rawComp{frame.NewCompressor(frame.NewDicts())} }

func TestGoldenRecords(t *testing.T) {
	comp := newRaw()
	in := &ledger.Intent{Fingerprint: fp1, RunID: "r1", Seq: 3, Index: 1, Tool: "mail", Args: []byte(`{}`), Key: "k", Idempotent: true}
	cert := &ledger.Certificate{Fingerprint: fp1, RunID: "r1", Seq: 3, Index: 1, Status: ledger.StatusDone, Result: []byte("ok")}
	for _, c := range []struct {
		name  string
		got   []byte
		want  string
		check func(t *testing.T, r *Record)
	}{{
		name: "run",
		got:  AppendRun(nil, "r1", chain.Nonce{0x11, 15: 0x66}, -1),
		want: `
			01                               # kind run
			02 7231                          # run id "r1"
			11000000000000000000000000000066 # nonce
			01                               # created -1 (zigzag varint)`,
		check: func(t *testing.T, r *Record) {
			if r.Run != "r1" || r.Nonce != (chain.Nonce{0x11, 15: 0x66}) || r.Created != -1 {
				t.Fatalf("read back %+v", r)
			}
		},
	}, {
		name: "atom",
		got: comp.Compress(AppendAtomHeader(nil, "r1", 300, head1),
			AppendAtomBody(nil, []ledger.Fingerprint{fp1}, []byte{0xde, 0xad}), 0),
		want: `
			04                               # kind atom
			02 7231                          # run id "r1"
			ac02                             # seq 300
			` + hexHead + `                  # head after the atom
			00 00                            # compressed: raw codec, no dictionary
			01                               # atom body version 1
			01                               # 1 action
			` + hexFP + `                    # its fingerprint
			dead                             # the delta (frame.AppendDelta)`,
		check: func(t *testing.T, r *Record) {
			if r.Run != "r1" || r.Seq != 300 || r.Head != head1 {
				t.Fatalf("read back %+v", r)
			}
			d := &Decoder{Comp: comp}
			_, body, err := d.DecodeAtom(nil, r, "seg")
			if err != nil || len(body.Actions) != 1 || body.Actions[0] != fp1 || !bytes.Equal(body.Delta, []byte{0xde, 0xad}) {
				t.Fatalf("body read back %+v, %v", body, err)
			}
		},
	}, {
		name: "atom with extensions",
		got: comp.Compress(AppendAtomHeader(nil, "r1", 300, head1),
			append(AppendAtomBodyHeaderExt(nil, []ledger.Fingerprint{fp1},
				[]AtomExt{{Tag: ExtTagBase, Data: []byte{0x05}}, {Tag: ExtTagConsumed, Data: []byte{0xab, 0xcd}}}), 0xde, 0xad), 0),
		want: `
			04                               # kind atom
			02 7231                          # run id "r1"
			ac02                             # seq 300
			` + hexHead + `                  # head after the atom
			00 00                            # compressed: raw codec, no dictionary
			02                               # atom body version 2
			01                               # 1 action
			` + hexFP + `                    # its fingerprint
			02                               # 2 extensions
			01 01 05                         # tag 1 (base), 1 byte
			03 02 abcd                       # tag 3 (consumed), 2 bytes
			dead                             # the delta (frame.AppendDelta)`,
		check: func(t *testing.T, r *Record) {
			d := &Decoder{Comp: comp}
			_, body, err := d.DecodeAtom(nil, r, "seg")
			if err != nil || len(body.Actions) != 1 || !bytes.Equal(body.Delta, []byte{0xde, 0xad}) || len(body.Exts) != 2 {
				t.Fatalf("body read back %+v, %v", body, err)
			}
			if b, ok := body.Ext(ExtTagBase); !ok || !bytes.Equal(b, []byte{0x05}) {
				t.Fatalf("base extension read back %x, %v", b, ok)
			}
			if _, ok := body.Ext(ExtTagSent); ok {
				t.Fatal("an absent extension was found")
			}
		},
	}, {
		name: "fail",
		got:  AppendFail(nil, "r1", 3, "boom"),
		want: `
			05                               # kind fail
			02 7231                          # run id "r1"
			03                               # seq 3
			04 626f6f6d                      # reason "boom"`,
		check: func(t *testing.T, r *Record) {
			if r.Run != "r1" || r.Seq != 3 || r.Reason != "boom" {
				t.Fatalf("read back %+v", r)
			}
		},
	}, {
		name: "intent",
		got:  AppendLedger(nil, KindIntent, ledger.AppendIntent(nil, in), comp, 0),
		want: `
			02                               # kind intent
			00 00                            # compressed: raw codec, no dictionary
			4c49 01 01                       # "LI", version 1, flags: idempotent
			` + hexFP + `                    # fingerprint
			03 01                            # seq 3, index 1
			02 7231                          # run id "r1"
			04 6d61696c                      # tool "mail"
			02 7b7d                          # args {}
			01 6b                            # key "k"`,
		check: func(t *testing.T, r *Record) {
			if r.Run != "r1" || r.Seq != 3 || r.Intent == nil || r.Intent.Tool != "mail" || !r.Intent.Idempotent || r.Intent.Key != "k" {
				t.Fatalf("read back %+v", r)
			}
		},
	}, {
		name: "certificate",
		got:  AppendLedger(nil, KindCert, ledger.AppendCertificate(nil, cert), comp, 0),
		want: `
			03                               # kind certificate
			00 00                            # compressed: raw codec, no dictionary
			4c43 01 02                       # "LC", version 1, status done
			` + hexFP + `                    # fingerprint
			03 01                            # seq 3, index 1
			02 7231                          # run id "r1"
			02 6f6b                          # result "ok"
			00                               # no error`,
		check: func(t *testing.T, r *Record) {
			if r.Run != "r1" || r.Seq != 3 || r.Cert == nil || string(r.Cert.Result) != "ok" || r.Cert.Status != ledger.StatusDone {
				t.Fatalf("read back %+v", r)
			}
		},
	}, {
		name: "end",
		got:  AppendEnd(nil, "r1", 301, head1, EndFailed, 5, []byte("no")),
		want: `
			08                               # kind end
			02 7231                          # run id "r1"
			ad02                             # seq 301: the run's last atom + 1
			` + hexHead + `                  # head: the link over what follows
			02                               # status failed
			0a                               # ended 5 (zigzag varint)
			02 6e6f                          # result "no"`,
		check: func(t *testing.T, r *Record) {
			if r.Run != "r1" || r.Seq != 301 || r.Head != head1 || r.Status != EndFailed || r.Ended != 5 || string(r.Result) != "no" {
				t.Fatalf("read back %+v", r)
			}
			if want := AppendEndPayload(nil, EndFailed, 5, []byte("no")); !bytes.Equal(r.Payload, want) {
				t.Fatalf("chained payload %x, want %x", r.Payload, want)
			}
		},
	}, {
		name: "fork",
		got:  AppendFork(nil, "f", chain.Nonce{0x11, 15: 0x66}, 1, "r1", 300, head1),
		want: `
			09                               # kind fork
			01 66                            # run id "f"
			11000000000000000000000000000066 # nonce
			02                               # created 1 (zigzag varint)
			02 7231                          # parent "r1"
			ac02                             # fork point: seq 300
			` + hexHead + `                  # the parent's head at seq 300`,
		check: func(t *testing.T, r *Record) {
			if r.Run != "f" || r.Parent != "r1" || r.Seq != 300 || r.ParentHead != head1 || r.Created != 1 {
				t.Fatalf("read back %+v", r)
			}
		},
	}, {
		name: "delete",
		got:  AppendDelete(nil, "r1", 5, head1, head2, 1, "why", delNote("r1", 5, head2, true)),
		want: `
			0a                               # kind delete
			02 7231                          # run id "r1"
			05                               # seq 5: the end's seq + 1
			` + hexHead + `                  # final head: the end's link
			` + hexHead2 + `                 # head: the deletion's link over what follows
			02                               # deleted 1 (zigzag varint)
			03 776879                        # reason "why"
			636f6e74696e75756d20636865636b706f696e742076310a # "continuum checkpoint v1\n": the chain's checkpoint text (pinned by package chain)
			73746f7265202273220a             # store "s"
			72756e20227231220a               # run "r1"
			73657120350a                     # seq 5
			6865616420 ` + hex.EncodeToString([]byte(head2.String())) + ` 0a # head <head2 in hex>
			66696e616c0a                     # final`,
		check: func(t *testing.T, r *Record) {
			if r.Run != "r1" || r.Seq != 5 || r.Final != head1 || r.Head != head2 || r.Deleted != 1 || r.Reason != "why" ||
				!bytes.Equal(r.Payload, []byte{0x02, 0x03, 'w', 'h', 'y'}) ||
				r.Checkpoint.RunID != "r1" || r.Checkpoint.Seq != 5 || r.Checkpoint.Head != head2 || !r.Checkpoint.Final {
				t.Fatalf("read back %+v", r)
			}
		},
	}, {
		name: "erase",
		got:  AppendErase(nil, "r1", 6, head1, head2, 1, "why", delNote("r1", 6, head2, true)),
		want: `
			0c                               # kind erase: the delete record's fields
			02 7231                          # run id "r1"
			06                               # seq 6: the end's (or the deletion's) seq + 1
			` + hexHead + `                  # final head: the link it follows
			` + hexHead2 + `                 # head: the erasure's link over the mark and what follows
			02                               # erased 1 (zigzag varint)
			03 776879                        # reason "why"
			636f6e74696e75756d20636865636b706f696e742076310a # "continuum checkpoint v1\n"
			73746f7265202273220a             # store "s"
			72756e20227231220a               # run "r1"
			73657120360a                     # seq 6
			6865616420 ` + hex.EncodeToString([]byte(head2.String())) + ` 0a # head <head2 in hex>
			66696e616c0a                     # final`,
		check: func(t *testing.T, r *Record) {
			if r.Kind != KindErase || r.Run != "r1" || r.Seq != 6 || r.Final != head1 || r.Head != head2 || r.Deleted != 1 || r.Reason != "why" ||
				!bytes.Equal(r.Payload, append([]byte(EraseMark), 0x02, 0x03, 'w', 'h', 'y')) ||
				!bytes.Equal(r.Payload, AppendErasePayload(nil, 1, "why")) || !r.Kind.Deletes() {
				t.Fatalf("read back %+v", r)
			}
		},
	}, {
		name: "erase-key",
		got:  AppendEraseKey(nil, "r1", 4, head1, head2, 1, "k", []uint64{3, 200}, "why", delNote("r1", 4, head2, false)),
		want: `
			0d                               # kind erase-key
			02 7231                          # run id "r1"
			04                               # seq 4: the run's last seq when the key was erased
			` + hexHead + `                  # head: the run's head at seq 4
			` + hexHead2 + `                 # link: the erasure's, over the mark and what follows
			02                               # erased 1 (zigzag varint)
			01 6b                            # memory key "k"
			02 03 c801                       # 2 data keys: 3 and 200
			03 776879                        # reason "why"
			636f6e74696e75756d20636865636b706f696e742076310a # "continuum checkpoint v1\n"
			73746f7265202273220a             # store "s"
			72756e20227231220a               # run "r1"
			73657120340a                     # seq 4
			6865616420 ` + hex.EncodeToString([]byte(head2.String())) + ` 0a # head <head2 in hex>`,
		check: func(t *testing.T, r *Record) {
			if r.Kind != KindEraseKey || r.Run != "r1" || r.Seq != 4 || r.Final != head1 || r.Head != head2 || r.Deleted != 1 ||
				r.Key != "k" || !slices.Equal(r.KeyNos, []uint64{3, 200}) || r.Reason != "why" ||
				!bytes.Equal(r.Payload, AppendEraseKeyPayload(nil, 1, "k", []uint64{3, 200}, "why")) || r.Kind.Deletes() ||
				r.Checkpoint.Head != head2 || r.Checkpoint.Final {
				t.Fatalf("read back %+v", r)
			}
		},
	}, {
		name: "rollback",
		got:  AppendRollback(nil, "r1", 7, 2, head1, 1, goldenUndo),
		want: `
			0b                               # kind rollback
			02 7231                          # run id "r1"
			07                               # seq 7: the atom that completes it
			02                               # to: seq 2
			` + hexHead + `                  # head: the run's head at seq 6
			02                               # started 1 (zigzag varint)
			03                               # 3 undo entries, newest first:
			06 ` + hexFP + `                 #   seq 6, the action's fingerprint
			   03 706179                     #   tool "pay"
			   01                            #   a compensation, not idempotent:
			   06 726566756e64               #     tool "refund"
			   09 7b22657572223a357d         #     args {"eur":5}
			   03 726b31                     #     key "rk1"
			04 ` + hexFP + `                 #   seq 4, fingerprint
			   04 6d61696c                   #   tool "mail"
			   00                            #   not undone: no compensation
			03 ` + hexFP + `                 #   seq 3, fingerprint
			   01 62                         #   tool "b"
			   02                            #   an idempotent compensation:
			   01 75 00 02 6b32              #     tool "u", no args, key "k2"`,
		check: func(t *testing.T, r *Record) {
			if r.Run != "r1" || r.Seq != 7 || r.To != 2 || r.Head != head1 || r.Started != 1 || len(r.Undo) != 3 {
				t.Fatalf("read back %+v", r)
			}
			for i, u := range r.Undo {
				w := goldenUndo[i]
				if u.Seq != w.Seq || u.Action != w.Action || u.Tool != w.Tool || (u.Compensation == nil) != (w.Compensation == nil) {
					t.Fatalf("undo %d read back as %+v, want %+v", i, u, w)
				}
				if c := u.Compensation; c != nil && (c.Tool != w.Compensation.Tool || !bytes.Equal(c.Args, w.Compensation.Args) ||
					c.Key != w.Compensation.Key || c.Idempotent != w.Compensation.Idempotent) {
					t.Fatalf("undo %d compensation read back as %+v, want %+v", i, c, w.Compensation)
				}
			}
		},
	}, {
		name: "stream-chunk",
		got:  AppendStreamChunk(nil, "r1", 300, 2, "tok", 5, []byte("hi")),
		want: `
			12                               # kind stream-chunk (18)
			02 7231                          # run id "r1"
			ac02                             # seq 300: the atom that appended it
			02                               # attempt 2 of that atom
			03 746f6b                        # stream "tok"
			05                               # offset 5 in the stream
			6869                             # data "hi": the rest of the record`,
		check: func(t *testing.T, r *Record) {
			if r.Run != "r1" || r.Seq != 300 || r.Attempt != 2 || r.Stream != "tok" || r.Offset != 5 || string(r.Chunk) != "hi" {
				t.Fatalf("read back %+v", r)
			}
		},
	}, {
		name: "stream-abandon",
		got:  AppendStreamAbandon(nil, "r1", 300, 2),
		want: `
			13                               # kind stream-abandon (19)
			02 7231                          # run id "r1"
			ac02                             # seq 300
			02                               # attempts 1 to 2 of it did not commit`,
		check: func(t *testing.T, r *Record) {
			if r.Run != "r1" || r.Seq != 300 || r.Attempt != 2 {
				t.Fatalf("read back %+v", r)
			}
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			want := goldenhex.Decode(t, c.want)
			if !bytes.Equal(c.got, want) {
				t.Fatalf("%s record encoding changed:\n got %x\nwant %x", c.name, c.got, want)
			}
			var r Record
			d := &Decoder{Comp: comp, Ledger: true}
			if err := d.Decode(want, wal.Pos{Segment: 1, Offset: 64}, "seg", &r); err != nil {
				t.Fatal(err)
			}
			if kind, _, _ := strings.Cut(c.name, " with "); r.Kind.String() != kind {
				t.Fatalf("kind %v, want %s", r.Kind, c.name)
			}
			c.check(t, &r)
		})
	}
}

// TestGoldenNotes pins the framing of checkpoint and store-head records:
// the kind byte, then the chain's own encoding (pinned by package chain).
func TestGoldenNotes(t *testing.T) {
	cp := chain.MarshalCheckpoint(chain.Checkpoint{StoreID: "s", RunID: "r1", Seq: 7, Head: head1})
	rec := AppendNote(nil, KindCheckpoint, cp)
	if rec[0] != 0x06 || !bytes.Equal(rec[1:], cp) {
		t.Fatalf("checkpoint record %x", rec)
	}
	var r Record
	if err := (&Decoder{}).Decode(rec, wal.Pos{Segment: 1, Offset: 64}, "seg", &r); err != nil {
		t.Fatal(err)
	}
	if r.Kind != KindCheckpoint || r.Run != "r1" || r.Seq != 7 || r.Checkpoint.Head != head1 {
		t.Fatalf("read back %+v", r)
	}

	sh := chain.StoreHead{StoreID: "s", Runs: []chain.RunHead{{RunID: "r1", Seq: 7, Head: head1}}}
	rec = AppendNote(nil, KindStoreHead, chain.MarshalStoreHead(sh))
	if rec[0] != 0x07 {
		t.Fatalf("store head record %x", rec)
	}
	if err := (&Decoder{}).Decode(rec, wal.Pos{Segment: 1, Offset: 64}, "seg", &r); err != nil || r.Kind != KindStoreHead {
		t.Fatalf("store head read back %+v, %v", r, err)
	}
}
