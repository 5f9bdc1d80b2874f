package fuzz

import (
	"bytes"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agenttext"
)

// frameSeedFrame builds a realistic frame through the frame API: intent,
// memory, scratchpad, a conversation with tool calls, and pending actions.
func frameSeedFrame(seed int64, turns int) *frame.Frame {
	g := agenttext.New(seed)
	f := &frame.Frame{}
	var d frame.Delta
	d.SetObjective(g.Sentence()).AddSubgoal("sg-0", g.Sentence()).AddSubgoal("sg-1", g.Sentence()).
		SetSubgoalStatus("sg-0", frame.SubgoalActive).Set("region", []byte("eu-west-1")).
		AppendScratch([]byte(g.Sentence()))
	if err := f.Apply(&d); err != nil {
		panic(err)
	}
	for i := 0; i < turns; i++ {
		f.Apply(frameSeedDelta(g, f, i))
	}
	return f
}

// frameSeedDelta builds one ordinary atom's delta valid for f.
func frameSeedDelta(g *agenttext.Gen, f *frame.Frame, i int) *frame.Delta {
	var d frame.Delta
	for _, p := range f.Pending {
		d.ToolOutput(p.CallID, p.Tool, g.ToolResult(120))
	}
	d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: g.Message(80)}).
		AddPending(frame.Pending{CallID: g.CallID(), Tool: g.Tool(), Args: g.ToolArgs(100), Key: "k" + strconv.Itoa(i)}).
		Set("step", []byte(strconv.Itoa(i))).
		SetSubgoalStatus("sg-1", frame.SubgoalStatus(i%5))
	if i%4 == 3 {
		d.Delete("region").ClearScratch().DropMessages(1).AddSubgoal("sg-x"+strconv.Itoa(i), g.Sentence())
	}
	return &d
}

// frameSeedLLM returns a delta of the shapes of LLM conversations: an
// assistant turn of tool calls, tool results as messages and as parts (two
// of them referring to certified results 0 and 1), content as parts, the
// developer role; and a resolver of those results.
func frameSeedLLM(g *agenttext.Gen) (*frame.Delta, frame.Resolver) {
	results := [][]byte{g.ToolResult(120), g.ToolResult(80)}
	var d frame.Delta
	d.AppendMessage(frame.Message{Role: frame.RoleDeveloper, Content: g.Sentence()}).
		AppendMessage(frame.Message{Role: frame.RoleUser, Parts: []frame.Part{
			{Kind: frame.PartText, Text: g.Message(60)},
			{Kind: frame.PartJSON, JSON: []byte(`{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}`)}}}).
		AppendMessage(frame.Message{Role: frame.RoleAssistant, ToolCalls: []frame.ToolCall{
			{ID: "call_a", Name: g.Tool(), Arguments: g.ToolArgs(80)}, {ID: "call_b", Name: g.Tool(), Arguments: []byte(`{}`)}}}).
		AppendMessage(frame.Message{Role: frame.RoleTool, CallID: "call_a", Content: string(results[0])}).
		AppendMessage(frame.Message{Role: frame.RoleTool, CallID: "call_b", Content: "denied", IsError: true}).
		AppendMessage(frame.Message{Role: frame.RoleAssistant, Parts: []frame.Part{
			{Kind: frame.PartText, Text: g.Sentence()},
			{Kind: frame.PartToolCall, Call: frame.ToolCall{ID: "toolu_1", Name: g.Tool(), Arguments: g.ToolArgs(60)}}}}).
		AppendMessage(frame.Message{Role: frame.RoleUser, Parts: []frame.Part{
			{Kind: frame.PartToolResult, CallID: "toolu_1", Text: string(results[1])},
			{Kind: frame.PartToolResult, CallID: "toolu_2", JSON: []byte(`[{"type":"text","text":"boom"}]`), IsError: true}}}).
		ToolOutput("call_c", g.Tool(), results[0])
	return d.ReferResults(results), func(i int) ([]byte, error) {
		if i < 0 || i >= len(results) {
			return nil, errors.New("no such certified result")
		}
		return results[i], nil
	}
}

var frameFuzzDicts = sync.OnceValue(func() *frame.Dicts {
	g := agenttext.New(99)
	f := frameSeedFrame(98, 2)
	var samples [][]byte
	// Few samples: every fuzz worker trains its own dictionary, with
	// coverage instrumentation slowing the builder down.
	for i := 0; i < 24; i++ {
		d := frameSeedDelta(g, f, i)
		samples = append(samples, frame.AppendDelta(nil, d))
		f.Apply(d)
	}
	dict, err := frame.TrainDict(samples, 2<<10)
	if err != nil {
		panic(err)
	}
	ds := frame.NewDicts()
	if err := ds.Add(1, dict); err != nil {
		panic(err)
	}
	if err := ds.Add(2, []byte("raw dictionary: deploy the service in us-east-1, then email the report")); err != nil {
		panic(err)
	}
	return ds
})

// FuzzFrameDecode decodes arbitrary bytes as a frame. It must never panic;
// what decodes must be valid and re-encode to exactly the input (the
// decoder accepts only canonical encodings).
func FuzzFrameDecode(f *testing.F) {
	for _, turns := range []int{0, 1, 3, 8} {
		f.Add(frame.AppendFrame(nil, frameSeedFrame(int64(turns), turns)))
	}
	f.Add(frame.AppendFrame(nil, &frame.Frame{}))
	llm := frameSeedFrame(7, 2)
	d, res := frameSeedLLM(agenttext.New(7))
	if err := llm.ApplyWith(d, res); err != nil {
		panic(err)
	}
	f.Add(frame.AppendFrame(nil, llm))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := frame.DecodeFrame(b)
		if err != nil {
			if !errors.Is(err, frame.ErrCorrupt) && !errors.Is(err, frame.ErrVersion) {
				t.Fatalf("error matches no sentinel: %v", err)
			}
			return
		}
		if err := fr.Validate(); err != nil {
			t.Fatalf("decoded an invalid frame: %v", err)
		}
		if got := frame.AppendFrame(nil, fr); !bytes.Equal(got, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, got)
		}
		owned, err := frame.DecodeFrameOwned(bytes.Clone(b))
		if err != nil {
			t.Fatalf("DecodeFrame accepted what DecodeFrameOwned rejects: %v", err)
		}
		if got := frame.AppendFrame(nil, owned); !bytes.Equal(got, b) {
			t.Fatalf("DecodeFrameOwned re-encodes differently:\n in %x\nout %x", b, got)
		}
		if got := frame.AppendFrame(nil, fr.Clone()); !bytes.Equal(got, b) {
			t.Fatal("clone encodes differently")
		}
	})
}

// FuzzDeltaDecode decodes arbitrary bytes as a delta. It must never panic;
// what decodes re-encodes to the input, and applying it to a frame either
// succeeds or fails leaving the frame byte-for-byte unchanged.
func FuzzDeltaDecode(f *testing.F) {
	g := agenttext.New(1)
	base := frameSeedFrame(2, 3)
	for i := 0; i < 6; i++ {
		f.Add(frame.AppendDelta(nil, frameSeedDelta(g, base, i)))
	}
	var bad frame.Delta
	f.Add(frame.AppendDelta(nil, bad.SetSubgoalStatus("nope", frame.SubgoalDone)))
	f.Add(frame.AppendDelta(nil, &frame.Delta{}))
	f.Add(frame.AppendDelta(nil, new(frame.Delta).ReplaceFrame(frameSeedFrame(1, 2)))) // version 3
	llm, res := frameSeedLLM(agenttext.New(8))
	f.Add(frame.AppendDelta(nil, llm))
	baseEnc := frame.AppendFrame(nil, base)
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := frame.DecodeDelta(b)
		if err != nil {
			if !errors.Is(err, frame.ErrCorrupt) && !errors.Is(err, frame.ErrVersion) {
				t.Fatalf("error matches no sentinel: %v", err)
			}
			return
		}
		if got := frame.AppendDelta(nil, d); !bytes.Equal(got, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, got)
		}
		fr := base.Clone()
		// References to certified results resolve to results 0 and 1;
		// any other index fails, as a missing certificate would.
		if err := fr.ApplyWith(d, res); err != nil {
			if !errors.Is(err, frame.ErrInvalidOp) && !errors.Is(err, frame.ErrUnresolved) {
				t.Fatalf("Apply error matches no sentinel: %v", err)
			}
			if !bytes.Equal(frame.AppendFrame(nil, fr), baseEnc) {
				t.Fatalf("failed Apply changed the frame: %v", err)
			}
			return
		}
		if err := fr.Validate(); err != nil {
			t.Fatalf("Apply made an invalid frame: %v", err)
		}
		enc := frame.AppendFrame(nil, fr)
		back, err := frame.DecodeFrame(enc)
		if err != nil {
			t.Fatalf("frame after Apply does not decode: %v", err)
		}
		if !bytes.Equal(frame.AppendFrame(nil, back), enc) {
			t.Fatal("frame after Apply does not round-trip")
		}
	})
}

// FuzzCompressDecompress decompresses arbitrary bytes. It must never panic
// nor return more than MaxDecompressedSize; errors match a sentinel.
func FuzzCompressDecompress(f *testing.F) {
	ds := frameFuzzDicts()
	c := frame.NewCompressor(ds)
	g := agenttext.New(3)
	fr := frameSeedFrame(4, 2)
	for i := 0; i < 3; i++ {
		rec := frame.AppendDelta(nil, frameSeedDelta(g, fr, i))
		for _, codec := range []frame.Codec{frame.CodecNone, frame.CodecS2, frame.CodecZstd} {
			for _, id := range []uint32{0, 1, 2} {
				f.Add(c.CompressWith(nil, rec, codec, id))
			}
		}
	}
	f.Add(c.Compress(nil, frame.AppendFrame(nil, frameSeedFrame(5, 30)), 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := c.Decompress(nil, b)
		if err != nil {
			for _, s := range []error{frame.ErrCorrupt, frame.ErrUnknownCodec, frame.ErrUnknownDict, frame.ErrTooLarge} {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error matches no sentinel: %v", err)
		}
		if len(out) > frame.MaxDecompressedSize {
			t.Fatalf("decompressed %d bytes", len(out))
		}
	})
}

// FuzzCompressRoundTrip compresses arbitrary bytes with each codec and
// dictionary (including an unknown one) and checks they come back.
func FuzzCompressRoundTrip(f *testing.F) {
	ds := frameFuzzDicts()
	c := frame.NewCompressor(ds)
	g := agenttext.New(6)
	f.Add([]byte(g.Message(600)), uint32(1))
	f.Add(g.ToolResult(300), uint32(0))
	f.Add([]byte{}, uint32(2))
	f.Add(bytes.Repeat([]byte{0}, 5000), uint32(7))
	f.Fuzz(func(t *testing.T, b []byte, id uint32) {
		check := func(name string, rec []byte) {
			out, err := c.Decompress([]byte{1, 2}, rec)
			if err != nil {
				t.Fatalf("%s, dict %d: %v", name, id, err)
			}
			if !bytes.Equal(out[2:], b) || out[0] != 1 || out[1] != 2 {
				t.Fatalf("%s, dict %d: round trip differs", name, id)
			}
		}
		rec := c.Compress(nil, b, id)
		if len(rec) > len(b)+2 {
			t.Fatalf("Compress grew %d bytes into %d", len(b), len(rec))
		}
		check("auto", rec)
		for _, codec := range []frame.Codec{frame.CodecNone, frame.CodecS2, frame.CodecZstd} {
			check(codec.String(), c.CompressWith(nil, b, codec, id))
		}
	})
}
