package record

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/goldenhex"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
)

func segName(uint64) string { return "seg" }

var fp2 = ledger.Fingerprint{0x77, 31: 0x88}

const hexFP2 = "7700000000000000000000000000000000000000000000000000000000000088"

// refAtom is an atom of run r1 at seq 7 with two actions whose delta
// records the second one's certified result as a tool message: the body
// refers to result 1 instead of holding "listing".
func refAtom(t testing.TB) (rec []byte, inline *frame.Delta, results [][]byte) {
	t.Helper()
	results = [][]byte{[]byte("ok"), []byte("listing")}
	inline = new(frame.Delta)
	inline.AppendMessage(frame.Message{Role: frame.RoleTool, CallID: "c", Tool: "ls", Content: "listing"})
	stored := inline.ReferResults(results)
	body := AppendAtomBody(nil, []ledger.Fingerprint{fp1, fp2}, frame.AppendDelta(nil, stored))
	return newRaw().Compress(AppendAtomHeader(nil, "r1", 7, head1), body, 0), inline, results
}

// TestGoldenAtomWithReference pins an atom body whose delta refers to a
// certified result of the atom, and applies it with the results resolved
// by fingerprint: the frame is the inline delta's.
func TestGoldenAtomWithReference(t *testing.T) {
	rec, inline, results := refAtom(t)
	want := goldenhex.Decode(t, `
		04                               # kind atom
		02 7231                          # run id "r1"
		07                               # seq 7
		`+hexHead+`                      # head after the atom
		00 00                            # compressed: raw codec, no dictionary
		01                               # atom body version 1
		02                               # 2 actions
		`+hexFP+`                        # action 0
		`+hexFP2+`                       # action 1
		d2 01                            # delta v2, 1 op
		08 73 08                         # append_message head=tool|tool|callid|flags, flags=content ref
		01                               #   content: certified result 1 (action 1's), not "listing"
		02 6c73 01 63                    #   tool "ls", call id "c"`)
	if !bytes.Equal(rec, want) {
		t.Fatalf("atom record with a reference changed:\n got %x\nwant %x", rec, want)
	}
	var r Record
	if err := (&Decoder{}).Decode(rec, wal.Pos{Segment: 1, Offset: 64}, "seg", &r); err != nil {
		t.Fatal(err)
	}
	byFP := map[ledger.Fingerprint][]byte{fp1: results[0], fp2: results[1]}
	var asked []ledger.Fingerprint
	f := &frame.Frame{}
	err := ApplyAtom(newRaw(), f, &r, segName, func(fp ledger.Fingerprint) ([]byte, error) {
		asked = append(asked, fp)
		return byFP[fp], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0] != fp2 {
		t.Fatalf("resolved %x, want only action 1's fingerprint", asked)
	}
	g := &frame.Frame{}
	if err := g.Apply(inline); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(frame.AppendFrame(nil, f), frame.AppendFrame(nil, g)) {
		t.Fatalf("frame from the stored atom %+v, from the inline delta %+v", f.Messages, g.Messages)
	}
}

// TestApplyAtomUnresolved: a reference that the atom cannot have is
// damage of the atom (file, offset, run, seq); a resolver that fails for
// another reason is not, and the frame is unchanged either way.
func TestApplyAtomUnresolved(t *testing.T) {
	rec, _, results := refAtom(t)
	var r Record
	if err := (&Decoder{}).Decode(rec, wal.Pos{Segment: 1, Offset: 64}, "seg", &r); err != nil {
		t.Fatal(err)
	}
	ioErr := errors.New("disk on fire")
	// One action only: result 1 names no action of the atom.
	short := newRaw().Compress(AppendAtomHeader(nil, "r1", 7, head1),
		AppendAtomBody(nil, []ledger.Fingerprint{fp1}, r.Body[2+1+1+2*32:]), 0)
	var rs Record
	if err := (&Decoder{}).Decode(short, wal.Pos{Segment: 1, Offset: 64}, "seg", &rs); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		rec     *Record
		results Results
		corrupt bool
		say     string
	}{
		{"no such action", &rs, func(ledger.Fingerprint) ([]byte, error) { return results[1], nil }, true, "the atom lists 1 actions"},
		{"no certificate", &r, func(fp ledger.Fingerprint) ([]byte, error) {
			return nil, fmt.Errorf("%w: action %x", ErrNoCertificate, fp[:8])
		}, true, "77000000"},
		{"damaged certificate", &r, func(ledger.Fingerprint) ([]byte, error) {
			return nil, &CorruptionError{File: "seg", Offset: 10, Reason: "bad certificate"}
		}, true, "bad certificate"},
		{"no resolver", &r, nil, false, "no certificates were given"},
		{"read error", &r, func(ledger.Fingerprint) ([]byte, error) { return nil, ioErr }, false, "disk on fire"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &frame.Frame{}
			err := ApplyAtom(newRaw(), f, c.rec, segName, c.results)
			if err == nil {
				t.Fatal("applied")
			}
			if !strings.Contains(err.Error(), c.say) {
				t.Errorf("error %q does not say %q", err, c.say)
			}
			var ce *CorruptionError
			if got := errors.As(err, &ce) && ce.File == "seg" && ce.Offset == 64 && ce.Run == "r1" && ce.Seq == 7; got != c.corrupt {
				t.Errorf("error %v: damage of the atom at seg offset 64 run r1 seq 7 is %v, want %v", err, got, c.corrupt)
			}
			if c.name == "read error" && !errors.Is(err, ioErr) {
				t.Errorf("error %v does not wrap the resolver's", err)
			}
			if len(f.Messages) != 0 {
				t.Errorf("frame changed: %+v", f.Messages)
			}
		})
	}
}

// FuzzApplyAtom applies fuzzed atom bodies with their references resolved
// by fingerprint: it never panics, every failure is the atom's damage (the
// resolver only fails with ErrNoCertificate) and leaves the frame as it
// was, and a success gives the frame of the delta with its references
// replaced by the results they name.
func FuzzApplyAtom(f *testing.F) {
	comp := newRaw()
	rec, _, _ := refAtom(f)
	var r Record
	if err := (&Decoder{}).Decode(rec, wal.Pos{Segment: 1, Offset: 64}, "seg", &r); err != nil {
		f.Fatal(err)
	}
	plain, err := comp.Decompress(nil, r.Body)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(plain)
	f.Add(AppendAtomBody(nil, []ledger.Fingerprint{fp1}, frame.AppendDelta(nil, new(frame.Delta).ToolOutputResult("c", "t", 0))))
	f.Add(AppendAtomBody(nil, nil, frame.AppendDelta(nil, new(frame.Delta).ToolOutputResult("c", "t", 3))))
	f.Add(append(AppendAtomBodyHeaderExt(nil, []ledger.Fingerprint{fp1}, []AtomExt{{Tag: ExtTagBase, Data: []byte{1}}, {Tag: ExtTagSent, Data: []byte("m")}}),
		frame.AppendDelta(nil, new(frame.Delta).ToolOutputResult("c", "t", 0))...))
	f.Add(AppendAtomBody(nil, []ledger.Fingerprint{fp1, fp2}, frame.AppendDelta(nil, new(frame.Delta).
		AppendMessage(frame.Message{Role: frame.RoleUser, Parts: []frame.Part{{Kind: frame.PartToolResult, CallID: "a", Text: "listing"}}}).
		ReferResults([][]byte{nil, []byte("listing")}))))
	byFP := map[ledger.Fingerprint][]byte{fp1: []byte("ok"), fp2: []byte("listing")}
	results := func(fp ledger.Fingerprint) ([]byte, error) {
		if r, ok := byFP[fp]; ok {
			return r, nil
		}
		return nil, fmt.Errorf("%w: %x", ErrNoCertificate, fp[:8])
	}
	f.Fuzz(func(t *testing.T, plain []byte) {
		a := &Record{Kind: KindAtom, Run: "r1", Seq: 7, Pos: wal.Pos{Segment: 1, Offset: 64}, Body: comp.Compress(nil, plain, 0)}
		fr := &frame.Frame{Memory: map[string][]byte{"k": []byte("v")}}
		before := frame.AppendFrame(nil, fr)
		err := ApplyAtom(comp, fr, a, segName, results)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not the atom's damage", err)
			}
			if !bytes.Equal(frame.AppendFrame(nil, fr), before) {
				t.Fatal("a failed ApplyAtom changed the frame")
			}
			return
		}
		body, err := DecodeAtomBody(plain)
		if err != nil {
			t.Fatalf("applied a body that does not decode: %v", err)
		}
		d, err := frame.DecodeDelta(body.Delta)
		if err != nil {
			t.Fatalf("applied a delta that does not decode: %v", err)
		}
		inline, err := d.Resolve(func(i int) ([]byte, error) { return byFP[body.Actions[i]], nil })
		if err != nil {
			t.Fatal(err)
		}
		g := &frame.Frame{Memory: map[string][]byte{"k": []byte("v")}}
		if err := g.Apply(inline); err != nil {
			t.Fatalf("the resolved delta does not apply: %v", err)
		}
		if !bytes.Equal(frame.AppendFrame(nil, fr), frame.AppendFrame(nil, g)) {
			t.Fatal("ApplyAtom gives another frame than the resolved delta")
		}
	})
}
