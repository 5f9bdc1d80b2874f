package ledger

import (
	"bytes"
	"testing"

	"github.com/continuumdb/continuum/internal/goldenhex"
)

// goldenLedger holds two actions: one certified, one in doubt.
func goldenLedger() *Ledger {
	l := New()
	done, doubt := Fingerprint{0x01, 0x02}, Fingerprint{0x0a}
	l.ApplyIntent(&Intent{Fingerprint: done}, Loc{Segment: 1, Offset: 40})
	l.ApplyCertificate(&Certificate{Fingerprint: done, Status: StatusDone}, Loc{Segment: 1, Offset: 128}, false)
	l.ApplyIntent(&Intent{Fingerprint: doubt}, Loc{Segment: 2, Offset: 40})
	return l
}

// goldenEntriesV3 are goldenEntries in version 3's 48 bytes.
const goldenEntriesV3 = `
	0102000000000000 0000000000000000 0000000000000000 0000000000000000 # fingerprint 0102...
	01000000 28000040                  # intent at 1:40; status done (2 - 1 in the top two bits)
	01000000 80000000                  # certificate at 1:128
	0a00000000000000 0000000000000000 0000000000000000 0000000000000000 # fingerprint 0a...
	02000000 28000000                  # intent at 2:40; status intent (in doubt)
	00000000 00000000                  # no certificate
`

const goldenEntries = `
	0102000000000000 0000000000000000 0000000000000000 0000000000000000 # fingerprint 0102...
	02 00000000000000                  # status done, reserved
	0100000000000000 2800000000000000  # intent at 1:40
	0100000000000000 8000000000000000  # certificate at 1:128
	0a00000000000000 0000000000000000 0000000000000000 0000000000000000 # fingerprint 0a...
	01 00000000000000                  # status intent (in doubt), reserved
	0200000000000000 2800000000000000  # intent at 2:40
	0000000000000000 0000000000000000  # no certificate
`

// TestGoldenTable pins the table versions (format.go says they are
// frozen): version 1 (AppendTable, Checkpoint), version 2 (CheckpointAt
// before 2026-12-07), which names the checkpoint generation and log
// position it derives from, and version 3 (CheckpointAt), version 2 in
// 48-byte entries. All stay readable.
func TestGoldenTable(t *testing.T) {
	v1 := goldenhex.Decode(t, `
		434c4454           # "CLDT"
		0100               # version 1
		4800               # entry size 72
		0200000000000000   # 2 entries
		6790087b           # body crc
		0133aca0           # header crc of the 20 bytes before
	`+goldenEntries)
	v2 := goldenhex.Decode(t, `
		434c4454           # "CLDT"
		0200               # version 2
		4800               # entry size 72
		0200000000000000   # 2 entries
		0700000000000000   # checkpoint generation 7
		0300000000000000   # log position: segment 3
		0010000000000000   #               offset 4096
		6790087b           # body crc
		ee9b33e2           # header crc of the 44 bytes before
	`+goldenEntries)
	if got := goldenLedger().AppendTable(nil); !bytes.Equal(got, v1) {
		t.Fatalf("version 1 table changed:\n got %x\nwant %x", got, v1)
	}
	origin := TableOrigin{Gen: 7, Pos: Loc{Segment: 3, Offset: 4096}}
	v3 := goldenhex.Decode(t, `
		434c4454           # "CLDT"
		0300               # version 3
		3000               # entry size 48
		0200000000000000   # 2 entries
		0700000000000000   # checkpoint generation 7
		0300000000000000   # log position: segment 3
		0010000000000000   #               offset 4096
		527ebef0           # body crc
		d1bc58f1           # header crc of the 44 bytes before
	`+goldenEntriesV3)
	if got := goldenLedger().CheckpointAt(nil, func() TableOrigin { return origin }); !bytes.Equal(got, v3) {
		t.Fatalf("version 3 table changed:\n got %x\nwant %x", got, v3)
	}
	for _, tc := range []struct {
		b      []byte
		origin TableOrigin
	}{{v1, TableOrigin{}}, {v2, origin}, {v3, origin}} {
		o, err := ReadTableOrigin(tc.b)
		if err != nil || o != tc.origin {
			t.Fatalf("ReadTableOrigin: %+v, %v; want %+v", o, err, tc.origin)
		}
		l := New()
		if err := l.LoadTable(tc.b); err != nil {
			t.Fatal(err)
		}
		e, ok := l.Lookup(Fingerprint{0x01, 0x02})
		if !ok || e.Status != StatusDone || e.CertLoc != (Loc{Segment: 1, Offset: 128}) {
			t.Fatalf("entry read back as %+v", e)
		}
		if e, ok := l.Lookup(Fingerprint{0x0a}); !ok || e.Status != StatusIntent || e.IntentLoc != (Loc{Segment: 2, Offset: 40}) {
			t.Fatalf("entry read back as %+v", e)
		}
	}
	// Every byte of a version 2 and 3 header is covered by its checksum.
	for _, v := range [][]byte{v2, v3} {
		for i := 0; i < tableHeaderSizeV2; i++ {
			b := bytes.Clone(v)
			b[i] ^= 0x01
			if err := New().LoadTable(b); err == nil {
				t.Fatalf("version %d: a flipped byte %d of the header was accepted", v[4], i)
			}
		}
	}
}

// TestGoldenTableStatuses pins the table's other two statuses, failed and
// resolved, and locations whose offsets take more than one byte, in
// version 3 (written) and version 2 (read).
func TestGoldenTableStatuses(t *testing.T) {
	failed, resolved := Fingerprint{0x0b}, Fingerprint{0x0c}
	l := New()
	l.ApplyIntent(&Intent{Fingerprint: failed}, Loc{Segment: 4, Offset: 40})
	l.ApplyCertificate(&Certificate{Fingerprint: failed, Status: StatusFailed}, Loc{Segment: 4, Offset: 1000}, false)
	l.ApplyIntent(&Intent{Fingerprint: resolved}, Loc{Segment: 5, Offset: 40})
	l.ApplyCertificate(&Certificate{Fingerprint: resolved, Status: StatusResolved}, Loc{Segment: 300, Offset: 70000}, false)
	want := goldenhex.Decode(t, `
		434c4454           # "CLDT"
		0300               # version 3
		3000               # entry size 48
		0200000000000000   # 2 entries
		0900000000000000   # checkpoint generation 9
		2c01000000000000   # log position: segment 300
		c011010000000000   #               offset 70080
		2e0994fb           # body crc
		11349bd0           # header crc of the 44 bytes before
		0b00000000000000 0000000000000000 0000000000000000 0000000000000000 # fingerprint 0b...
		04000000 28000080                  # intent at 4:40; status failed (3 - 1 in the top two bits)
		04000000 e8030000                  # certificate at 4:1000
		0c00000000000000 0000000000000000 0000000000000000 0000000000000000 # fingerprint 0c...
		05000000 280000c0                  # intent at 5:40; status resolved (4 - 1)
		2c010000 70110100                  # certificate at 300:70000
	`)
	v2 := goldenhex.Decode(t, `
		434c4454           # "CLDT"
		0200               # version 2
		4800               # entry size 72
		0200000000000000   # 2 entries
		0900000000000000   # checkpoint generation 9
		2c01000000000000   # log position: segment 300
		c011010000000000   #               offset 70080
		4e6b4819           # body crc
		dd154429           # header crc of the 44 bytes before
		0b00000000000000 0000000000000000 0000000000000000 0000000000000000 # fingerprint 0b...
		03 00000000000000                  # status failed, reserved
		0400000000000000 2800000000000000  # intent at 4:40
		0400000000000000 e803000000000000  # certificate at 4:1000
		0c00000000000000 0000000000000000 0000000000000000 0000000000000000 # fingerprint 0c...
		04 00000000000000                  # status resolved, reserved
		0500000000000000 2800000000000000  # intent at 5:40
		2c01000000000000 7011010000000000  # certificate at 300:70000
	`)
	origin := TableOrigin{Gen: 9, Pos: Loc{Segment: 300, Offset: 70080}}
	if got := l.CheckpointAt(nil, func() TableOrigin { return origin }); !bytes.Equal(got, want) {
		t.Fatalf("table changed:\n got %x\nwant %x", got, want)
	}
	for _, b := range [][]byte{want, v2} {
		back := New()
		if err := back.LoadTable(b); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			fp           Fingerprint
			status       Status
			intent, cert Loc
		}{
			{failed, StatusFailed, Loc{Segment: 4, Offset: 40}, Loc{Segment: 4, Offset: 1000}},
			{resolved, StatusResolved, Loc{Segment: 5, Offset: 40}, Loc{Segment: 300, Offset: 70000}},
		} {
			e, ok := back.Lookup(c.fp)
			if !ok || e.Status != c.status || e.IntentLoc != c.intent || e.CertLoc != c.cert {
				t.Fatalf("version %d: entry %x read back as %+v, %v", b[4], c.fp[:1], e, ok)
			}
		}
		if o, err := ReadTableOrigin(b); err != nil || o != origin {
			t.Fatalf("ReadTableOrigin: %+v, %v; want %+v", o, err, origin)
		}
	}
}

const hexGoldenFP = "0a0000000000000000000000000000000000000000000000000000000000000b"

var goldenFP = Fingerprint{0x0a, 31: 0x0b}

// TestGoldenIntent pins the intent record (format.go says it is frozen):
// the flags, multi-byte varints, empty fields. Each is decoded back field
// by field.
func TestGoldenIntent(t *testing.T) {
	for _, c := range []struct {
		name string
		in   Intent
		hex  string
	}{{
		name: "not idempotent",
		in: Intent{Fingerprint: goldenFP, RunID: "run-1", Seq: 300, Index: 128, Tool: "mail.send",
			Args: []byte(`{"to":"ops"}`), Key: "mail-300"},
		hex: `
			4c49                       # "LI"
			01                         # version 1
			00                         # flags: not idempotent
			` + hexGoldenFP + `        # fingerprint
			ac02                       # seq 300
			8001                       # index 128
			05 72756e2d31              # run id "run-1"
			09 6d61696c2e73656e64      # tool "mail.send"
			0c 7b22746f223a226f7073227d # args {"to":"ops"}
			08 6d61696c2d333030        # key "mail-300"`,
	}, {
		name: "idempotent, no args",
		in:   Intent{Fingerprint: goldenFP, RunID: "r", Seq: 1, Index: 0, Tool: "t", Key: "k-1", Idempotent: true},
		hex: `
			4c49 01                    # "LI", version 1
			01                         # flags: idempotent (bit 0)
			` + hexGoldenFP + `        # fingerprint
			01 00                      # seq 1, index 0
			01 72                      # run id "r"
			01 74                      # tool "t"
			00                         # no args
			03 6b2d31                  # key "k-1"`,
	}, {
		name: "version 2: with an idempotent compensation, default key",
		in: Intent{Fingerprint: goldenFP, RunID: "r", Seq: 2, Index: 1, Tool: "pay", Args: []byte(`{"eur":5}`), Key: "k-2",
			Compensation: &Compensation{Tool: "refund", Args: []byte(`{"eur":5}`), Idempotent: true}},
		hex: `
			4c49 02                    # "LI", version 2
			06                         # flags: compensation (bit 1), compensation idempotent (bit 2)
			` + hexGoldenFP + `        # fingerprint
			02 01                      # seq 2, index 1
			01 72                      # run id "r"
			03 706179                  # tool "pay"
			09 7b22657572223a357d      # args {"eur":5}
			03 6b2d32                  # key "k-2"
			06 726566756e64            # compensation tool "refund"
			09 7b22657572223a357d      # compensation args {"eur":5}
			00                         # compensation key: "" (CompensationKey of the fingerprint)`,
	}, {
		name: "version 2: idempotent action, compensation with its own key",
		in: Intent{Fingerprint: goldenFP, RunID: "r", Seq: 3, Tool: "t", Key: "k", Idempotent: true,
			Compensation: &Compensation{Tool: "u", Key: "undo-k"}},
		hex: `
			4c49 02                    # "LI", version 2
			03                         # flags: idempotent (bit 0), compensation (bit 1), not idempotent
			` + hexGoldenFP + `        # fingerprint
			03 00 01 72 01 74 00 01 6b # seq 3, index 0, run "r", tool "t", no args, key "k"
			01 75                      # compensation tool "u"
			00                         # no compensation args
			06 756e646f2d6b            # compensation key "undo-k"`,
	}, {
		name: "version 2: a compensation, run by a rollback",
		in:   Intent{Fingerprint: goldenFP, RunID: "r", Seq: 9, Tool: "u", Key: "ckc1-ab", Undoes: Fingerprint{0xab, 31: 0xcd}},
		hex: `
			4c49 02                    # "LI", version 2
			08                         # flags: undoes (bit 3), not idempotent
			` + hexGoldenFP + `        # fingerprint
			09 00 01 72 01 75 00       # seq 9, index 0, run "r", tool "u", no args
			07 636b63312d6162          # key "ckc1-ab"
			ab000000000000000000000000000000000000000000000000000000000000cd # undoes: the compensated action's fingerprint`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			want := goldenhex.Decode(t, c.hex)
			if got := AppendIntent(nil, &c.in); !bytes.Equal(got, want) {
				t.Fatalf("intent encoding changed:\n got %x\nwant %x", got, want)
			}
			got, err := DecodeIntent(want)
			if err != nil {
				t.Fatal(err)
			}
			if got.Fingerprint != c.in.Fingerprint || got.RunID != c.in.RunID || got.Seq != c.in.Seq || got.Index != c.in.Index ||
				got.Tool != c.in.Tool || !bytes.Equal(got.Args, c.in.Args) || got.Key != c.in.Key || got.Idempotent != c.in.Idempotent ||
				got.Undoes != c.in.Undoes {
				t.Fatalf("read back as %+v, want %+v", got, c.in)
			}
			switch gc, wc := got.Compensation, c.in.Compensation; {
			case (gc == nil) != (wc == nil):
				t.Fatalf("compensation read back as %+v, want %+v", gc, wc)
			case gc != nil && (gc.Tool != wc.Tool || !bytes.Equal(gc.Args, wc.Args) || gc.Key != wc.Key || gc.Idempotent != wc.Idempotent):
				t.Fatalf("compensation read back as %+v, want %+v", gc, wc)
			}
		})
	}
}

// TestGoldenCertificate pins the certificate record in each status.
func TestGoldenCertificate(t *testing.T) {
	for _, c := range []struct {
		name string
		c    Certificate
		hex  string
	}{{
		name: "done",
		c:    Certificate{Fingerprint: goldenFP, RunID: "run-1", Seq: 300, Index: 128, Status: StatusDone, Result: []byte(`"sent"`)},
		hex: `
			4c43                       # "LC"
			01                         # version 1
			02                         # status done
			` + hexGoldenFP + `        # fingerprint
			ac02 8001                  # seq 300, index 128
			05 72756e2d31              # run id "run-1"
			06 2273656e7422            # result "sent" (JSON)
			00                         # no error`,
	}, {
		name: "failed",
		c:    Certificate{Fingerprint: goldenFP, RunID: "run-1", Seq: 7, Index: 2, Status: StatusFailed, Result: []byte{}, Err: "smtp: 550"},
		hex: `
			4c43 01                    # "LC", version 1
			03                         # status failed
			` + hexGoldenFP + `        # fingerprint
			07 02                      # seq 7, index 2
			05 72756e2d31              # run id "run-1"
			00                         # no result
			09 736d74703a20353530      # error "smtp: 550"`,
	}, {
		name: "resolved",
		c:    Certificate{Fingerprint: goldenFP, RunID: "r", Seq: 1, Index: 0, Status: StatusResolved, Result: []byte("ok")},
		hex: `
			4c43 01                    # "LC", version 1
			04                         # status resolved
			` + hexGoldenFP + `        # fingerprint
			01 00                      # seq 1, index 0
			01 72                      # run id "r"
			02 6f6b                    # result "ok"
			00                         # no error`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			want := goldenhex.Decode(t, c.hex)
			if got := AppendCertificate(nil, &c.c); !bytes.Equal(got, want) {
				t.Fatalf("certificate encoding changed:\n got %x\nwant %x", got, want)
			}
			got, err := DecodeCertificate(want)
			if err != nil {
				t.Fatal(err)
			}
			if got.Fingerprint != c.c.Fingerprint || got.RunID != c.c.RunID || got.Seq != c.c.Seq || got.Index != c.c.Index ||
				got.Status != c.c.Status || !bytes.Equal(got.Result, c.c.Result) || got.Result == nil || got.Err != c.c.Err {
				t.Fatalf("read back as %+v, want %+v", got, c.c)
			}
		})
	}
}
