package framebench

import (
	"strconv"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agenttext"
)

// BenchmarkToolResultDelta: the delta that records a tool's result as a
// tool message, with the result inline (the only way before) or as a
// reference to the certificate that already holds it (ReferResults).
// raw-B/rec is the encoded delta, stored-B/rec the record after Compress
// with the dictionary (auto+dict, what the engine writes); the time is
// AppendDelta + Compress. "typical" is the typical atom of
// BenchmarkDeltaEncode, whose tool output is the certified result.
func BenchmarkToolResultDelta(b *testing.B) {
	c := frame.NewCompressor(dicts())
	type set struct {
		name    string
		deltas  []*frame.Delta
		results [][]byte
	}
	var sets []set
	for _, size := range []int{200, 2000, 20000} {
		g := agenttext.New(int64(size))
		s := set{name: strconv.Itoa(size) + "B"}
		for i := 0; i < 64; i++ {
			res := g.ToolResult(size)
			var d frame.Delta
			d.AppendMessage(frame.Message{Role: frame.RoleTool, CallID: g.CallID(), Tool: g.Tool(), Content: string(res)})
			s.deltas = append(s.deltas, &d)
			s.results = append(s.results, res)
		}
		sets = append(sets, s)
	}
	g := agenttext.New(1)
	typical := set{name: "typical"}
	for i := 0; i < nDeltas; i++ {
		a := typicalAtom(g, i)
		typical.deltas = append(typical.deltas, a.delta())
		typical.results = append(typical.results, a.Output)
	}
	sets = append(sets, typical)

	for _, s := range sets {
		for _, mode := range []string{"inline", "ref"} {
			b.Run(s.name+"/"+mode, func(b *testing.B) {
				deltas := s.deltas
				if mode == "ref" {
					deltas = make([]*frame.Delta, len(s.deltas))
					for i, d := range s.deltas {
						deltas[i] = d.ReferResults(s.results[i : i+1])
						if len(deltas[i].Refs()) != 1 {
							b.Fatalf("delta %d: no reference made", i)
						}
					}
				}
				raw, stored := 0, 0
				for _, d := range deltas {
					enc := frame.AppendDelta(nil, d)
					raw += len(enc)
					stored += len(c.Compress(nil, enc, 1))
				}
				b.ReportAllocs()
				var enc, out []byte
				i := 0
				cpu0 := cpuTime()
				for b.Loop() {
					enc = frame.AppendDelta(enc[:0], deltas[i%len(deltas)])
					out = c.Compress(out[:0], enc, 1)
					i++
				}
				reportCPU(b, cpu0)
				b.ReportMetric(float64(raw)/float64(len(deltas)), "raw-B/rec")
				b.ReportMetric(float64(stored)/float64(len(deltas)), "stored-B/rec")
			})
		}
	}
}

// llmTurn is one turn of a tool-calling agent: the model's text, two tool
// calls with JSON arguments, and the two results.
type llmTurn struct {
	text    string
	calls   [2]frame.ToolCall
	results [2][]byte
}

func newTurn(g *agenttext.Gen, i int) llmTurn {
	t := llmTurn{text: g.Message(60 + g.Intn(60))}
	for k := range t.calls {
		t.calls[k] = frame.ToolCall{ID: "call_" + strconv.Itoa(i) + "_" + strconv.Itoa(k), Name: g.Tool(), Arguments: g.ToolArgs(80 + g.Intn(60))}
		t.results[k] = g.ToolResult(150 + g.Intn(150))
	}
	return t
}

// newShape records the turn as this package now holds it: one assistant
// message with its tool calls, one tool message per result.
func (t llmTurn) newShape() *frame.Delta {
	var d frame.Delta
	d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: t.text, ToolCalls: t.calls[:]})
	for k, c := range t.calls {
		d.AppendMessage(frame.Message{Role: frame.RoleTool, CallID: c.ID, Tool: c.Name, Content: string(t.results[k])})
	}
	return &d
}

// oldShape records the same turn as the converter that was needed before
// did: the text, then one assistant message per call holding its name, id
// and arguments, then the results.
func (t llmTurn) oldShape() *frame.Delta {
	var d frame.Delta
	d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: t.text})
	for _, c := range t.calls {
		d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: string(c.Arguments), Tool: c.Name, CallID: c.ID})
	}
	for k, c := range t.calls {
		d.AppendMessage(frame.Message{Role: frame.RoleTool, CallID: c.ID, Tool: c.Name, Content: string(t.results[k])})
	}
	return &d
}

// BenchmarkLLMTurn: encoding (AppendDelta), decoding (DecodeDelta) and
// applying (Apply, which checks the JSON of the arguments in the new
// shape) the delta of a turn of two tool calls, in the new message shape
// and in the shape of the converter needed before, in the same process;
// and DecodeFrame (which checks every message) of a frame of 100 such
// turns, as a restart reads it. Uncompressed: this is the codec's own cost.
func BenchmarkLLMTurn(b *testing.B) {
	g := agenttext.New(5)
	const n = 256
	shapes := map[string][]*frame.Delta{}
	for i := 0; i < n; i++ {
		t := newTurn(g, i)
		shapes["old"] = append(shapes["old"], t.oldShape())
		shapes["new"] = append(shapes["new"], t.newShape())
	}
	for _, shape := range []string{"old", "new"} {
		f := &frame.Frame{}
		for _, d := range shapes[shape][:100] {
			if err := f.Apply(d); err != nil {
				b.Fatal(err)
			}
		}
		rec := frame.AppendFrame(nil, f)
		b.Run("frame-decode/"+shape, func(b *testing.B) {
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := frame.DecodeFrame(rec); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu0)
			b.ReportMetric(float64(len(rec)), "raw-B/rec")
		})
	}
	for _, op := range []string{"encode", "decode", "apply"} {
		for _, shape := range []string{"old", "new"} {
			deltas := shapes[shape]
			recs := make([][]byte, n)
			raw := 0
			for i, d := range deltas {
				recs[i] = frame.AppendDelta(nil, d)
				raw += len(recs[i])
			}
			b.Run(op+"/"+shape, func(b *testing.B) {
				b.SetBytes(int64(raw / n))
				b.ReportAllocs()
				var enc []byte
				f := &frame.Frame{}
				i := 0
				cpu0 := cpuTime()
				for b.Loop() {
					switch op {
					case "encode":
						enc = frame.AppendDelta(enc[:0], deltas[i%n])
					case "decode":
						if _, err := frame.DecodeDelta(recs[i%n]); err != nil {
							b.Fatal(err)
						}
					case "apply":
						if len(f.Messages) > 4096 {
							f.Messages = f.Messages[:0]
						}
						if err := f.Apply(deltas[i%n]); err != nil {
							b.Fatal(err)
						}
					}
					i++
				}
				reportCPU(b, cpu0)
				b.ReportMetric(float64(raw)/n, "raw-B/rec")
			})
		}
	}
}
