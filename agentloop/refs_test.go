package agentloop_test

import (
	"encoding/binary"
	"testing"

	"github.com/continuumdb/continuum/frame"
)

// TestToolMessagesReferToCertificates: the loop's tool messages hold the
// result exactly as its certificate does, so the engine stores each as a
// reference to the certificate: an atom's stored body is smaller than its
// delta with the results inline by about their length, and reads back
// with the text.
func TestToolMessagesReferToCertificates(t *testing.T) {
	db, _ := openDisk(t)
	const id = "errand-refs"
	run := newRun(t, db, id)
	w, m := newWorld(), &scripted{}
	if _, _, err := scriptLoop(run, m, w).Drive(ctx); err != nil {
		t.Fatal(err)
	}
	var tools int
	for seq := uint64(1); seq <= run.LastSeq(); seq++ {
		info, err := run.Atom(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		var resultBytes int
		for _, o := range info.Delta.Ops() {
			if o.Kind == "append_message" && o.Role == "tool" {
				if len(o.Refs) != 0 || o.Content == "" {
					t.Fatalf("seq %d: tool message read back as %+v, want its text", seq, o)
				}
				resultBytes += len(o.Content)
				tools++
			}
		}
		// The body as stored: version, action count, fingerprints, delta.
		hdr := 1 + uvarintLen(uint64(len(id))) + len(id) + uvarintLen(seq) + 32
		stored := info.RawSize - hdr
		inline := 1 + uvarintLen(uint64(len(info.Actions))) + 32*len(info.Actions) + frame.EncodedDeltaSize(info.Delta)
		if saved := inline - stored; saved < resultBytes-4*len(info.Actions) {
			t.Fatalf("seq %d: the stored body is %d bytes, %d less than with its %d bytes of tool results inline: they are stored twice",
				seq, stored, saved, resultBytes)
		}
	}
	if tools != 3 {
		t.Fatalf("%d tool messages, want the script's 3", tools)
	}
}

func uvarintLen(v uint64) int { return len(binary.AppendUvarint(nil, v)) }
