package mailbox

import (
	"testing"

	"github.com/continuumdb/continuum/record"
	"github.com/google/go-cmp/cmp"
)

// TestAppendExts: the extensions decode to what was sent and consumed,
// in tag order, after what the buffers held; with neither, the buffers
// come back unchanged and nothing is allocated.
func TestAppendExts(t *testing.T) {
	sent := []record.SentMessage{{To: "r", Payload: []byte("hello")}, {To: "s", Payload: nil}}
	consumed := []record.MessageID{{From: "a", Seq: 3, Index: 1}}
	for _, c := range []struct {
		name     string
		sent     []record.SentMessage
		consumed []record.MessageID
		tags     []uint64
	}{
		{"both", sent, consumed, []uint64{record.ExtTagSent, record.ExtTagConsumed}},
		{"sent", sent, nil, []uint64{record.ExtTagSent}},
		{"consumed", nil, consumed, []uint64{record.ExtTagConsumed}},
	} {
		t.Run(c.name, func(t *testing.T) {
			prior := record.AtomExt{Tag: 99, Data: []byte("prior")}
			ext, exts := AppendExts([]byte("xyz"), []record.AtomExt{prior}, c.sent, c.consumed)
			if string(ext[:3]) != "xyz" || exts[0].Tag != 99 {
				t.Fatalf("what the buffers held was overwritten: %q, %v", ext[:3], exts[0])
			}
			exts = exts[1:]
			if len(exts) != len(c.tags) {
				t.Fatalf("%d extensions, want %d", len(exts), len(c.tags))
			}
			for i, e := range exts {
				if e.Tag != c.tags[i] {
					t.Fatalf("extension %d has tag %d, want %d", i, e.Tag, c.tags[i])
				}
				switch e.Tag {
				case record.ExtTagSent:
					got, err := record.DecodeSent(e.Data)
					if err != nil {
						t.Fatal(err)
					}
					if d := cmp.Diff(c.sent, got, cmp.Comparer(func(a, b []byte) bool { return string(a) == string(b) })); d != "" {
						t.Fatal(d)
					}
				case record.ExtTagConsumed:
					got, err := record.DecodeConsumed(e.Data)
					if err != nil {
						t.Fatal(err)
					}
					if d := cmp.Diff(c.consumed, got); d != "" {
						t.Fatal(d)
					}
				}
			}
		})
	}
	ext, exts := make([]byte, 2, 64), make([]record.AtomExt, 1, 4)
	if n := testing.AllocsPerRun(100, func() { ext, exts = AppendExts(ext, exts, nil, nil) }); n != 0 {
		t.Fatalf("%v allocations without messages", n)
	}
	if len(ext) != 2 || len(exts) != 1 {
		t.Fatalf("without messages the buffers changed: %d, %d", len(ext), len(exts))
	}
}
