package framebench

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agenttext"
)

// typicalDelta builds the delta of one ordinary atom: the agent read a tool
// result, wrote a short reasoning message, requested the next call, noted a
// fact and advanced a subgoal. About 500 bytes encoded.
func typicalDelta(g *agenttext.Gen, i int) *frame.Delta {
	return typicalAtom(g, i).delta()
}

// atom holds the values of one typical atom, so that the same change can be
// encoded by frame and by the JSON baseline.
type atom struct {
	OutputCall, OutputTool string
	Output                 []byte
	Message                frame.Message
	Pending                frame.Pending
	Key                    string
	Value                  []byte
	Subgoal                string
	Status                 frame.SubgoalStatus
}

func typicalAtom(g *agenttext.Gen, i int) atom {
	return atom{
		OutputCall: "call_prev_" + strconv.Itoa(i), OutputTool: g.Tool(), Output: g.ToolResult(90 + g.Intn(60)),
		Message: frame.Message{Role: frame.RoleAssistant, Content: g.Message(20 + g.Intn(40))},
		Pending: frame.Pending{CallID: g.CallID(), Tool: g.Tool(), Args: g.ToolArgs(60 + g.Intn(40)), Key: "run-7/" + strconv.Itoa(i) + "/0"},
		Key:     "last_" + g.Word(), Value: []byte(g.Word() + "-" + strconv.Itoa(g.Intn(1000))),
		Subgoal: "sg-" + strconv.Itoa(i%7), Status: frame.SubgoalActive,
	}
}

func (a atom) delta() *frame.Delta {
	var d frame.Delta
	d.ToolOutput(a.OutputCall, a.OutputTool, a.Output).
		AppendMessage(a.Message).
		AddPending(a.Pending).
		Set(a.Key, a.Value).
		SetSubgoalStatus(a.Subgoal, a.Status)
	return &d
}

// BenchmarkDeltaBaselineJSON is the obvious alternative to frame's codec:
// encoding/json of the same atom (field names on the wire, base64 bytes),
// uncompressed. Compare with BenchmarkDeltaEncode/none and DeltaDecode/none.
func BenchmarkDeltaBaselineJSON(b *testing.B) {
	g := agenttext.New(1)
	atoms := make([]atom, nDeltas)
	recs := make([][]byte, nDeltas)
	stored := 0
	for i := range atoms {
		atoms[i] = typicalAtom(g, i)
		var err error
		if recs[i], err = json.Marshal(&atoms[i]); err != nil {
			b.Fatal(err)
		}
		stored += len(recs[i])
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		cpu0 := cpuTime()
		for b.Loop() {
			if _, err := json.Marshal(&atoms[i%nDeltas]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		reportCPU(b, cpu0)
		b.ReportMetric(float64(stored)/nDeltas, "stored-B/rec")
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		cpu0 := cpuTime()
		for b.Loop() {
			var a atom
			if err := json.Unmarshal(recs[i%nDeltas], &a); err != nil {
				b.Fatal(err)
			}
			i++
		}
		reportCPU(b, cpu0)
	})
}

// deltaSet returns n encoded typical deltas of seed.
func deltaSet(seed int64, n int) [][]byte {
	g := agenttext.New(seed)
	out := make([][]byte, n)
	for i := range out {
		out[i] = frame.AppendDelta(nil, typicalDelta(g, i))
	}
	return out
}

// bigFrame builds a frame of about size bytes encoded, mostly conversation.
func bigFrame(seed int64, size int) *frame.Frame {
	g := agenttext.New(seed)
	f := &frame.Frame{}
	var d frame.Delta
	d.SetObjective(g.Sentence())
	for i := 0; i < 7; i++ {
		d.AddSubgoal("sg-"+strconv.Itoa(i), g.Sentence())
	}
	for i := 0; i < 20; i++ {
		d.Set("fact_"+strconv.Itoa(i)+"_"+g.Word(), []byte(g.Sentence()))
	}
	d.AppendScratch([]byte(g.Message(1000)))
	if err := f.Apply(&d); err != nil {
		panic(err)
	}
	for i := 0; frame.EncodedFrameSize(f) < size; i++ {
		d.Reset()
		switch i % 3 {
		case 0:
			d.AppendMessage(frame.Message{Role: frame.RoleUser, Content: g.Message(200 + g.Intn(300))})
		case 1:
			d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: g.Message(300 + g.Intn(400)), Tool: g.Tool(), CallID: "c" + strconv.Itoa(i)})
		default:
			d.ToolOutput("c"+strconv.Itoa(i-1), g.Tool(), g.ToolResult(300+g.Intn(300)))
		}
		if err := f.Apply(&d); err != nil {
			panic(err)
		}
	}
	return f
}

var dicts = sync.OnceValue(func() *frame.Dicts {
	// Train on deltas of other seeds than the ones measured.
	var samples [][]byte
	for s := int64(1000); s < 1004; s++ {
		samples = append(samples, deltaSet(s, 250)...)
	}
	d, err := frame.TrainDict(samples, 16<<10)
	if err != nil {
		panic(err)
	}
	ds := frame.NewDicts()
	if err := ds.Add(1, d); err != nil {
		panic(err)
	}
	return ds
})

type variant struct {
	name  string
	codec frame.Codec
	auto  bool // Compress's own choice
	dict  uint32
}

var variants = []variant{
	{"none", frame.CodecNone, false, 0},
	{"s2", frame.CodecS2, false, 0},
	{"zstd", frame.CodecZstd, false, 0},
	{"s2+dict", frame.CodecS2, false, 1},
	{"zstd+dict", frame.CodecZstd, false, 1},
	{"auto+dict", 0, true, 1},
}

func (v variant) compress(c *frame.Compressor, dst, src []byte) []byte {
	if v.auto {
		return c.Compress(dst, src, v.dict)
	}
	return c.CompressWith(dst, src, v.codec, v.dict)
}

const nDeltas = 512

// BenchmarkDeltaEncode: AppendDelta + Compress of a typical delta, buffers
// reused as the engine's commit path does.
func BenchmarkDeltaEncode(b *testing.B) {
	g := agenttext.New(1)
	deltas := make([]*frame.Delta, nDeltas)
	raw := 0
	for i := range deltas {
		deltas[i] = typicalDelta(g, i)
		raw += frame.EncodedDeltaSize(deltas[i])
	}
	c := frame.NewCompressor(dicts())
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			var enc, out []byte
			stored := 0
			for i := range deltas {
				enc = frame.AppendDelta(enc[:0], deltas[i])
				stored += len(v.compress(c, nil, enc))
			}
			b.SetBytes(int64(raw / nDeltas))
			b.ReportAllocs()
			i := 0
			cpu0 := cpuTime()
			for b.Loop() {
				enc = frame.AppendDelta(enc[:0], deltas[i%nDeltas])
				out = v.compress(c, out[:0], enc)
				i++
			}
			reportCPU(b, cpu0)
			b.ReportMetric(float64(stored)/nDeltas, "stored-B/rec")
			b.ReportMetric(float64(raw)/nDeltas, "raw-B/rec")
		})
	}
}

// BenchmarkDeltaEncodeParallel is BenchmarkDeltaEncode from GOMAXPROCS
// goroutines at once, as many runs commit concurrently.
func BenchmarkDeltaEncodeParallel(b *testing.B) {
	g := agenttext.New(1)
	deltas := make([]*frame.Delta, nDeltas)
	for i := range deltas {
		deltas[i] = typicalDelta(g, i)
	}
	c := frame.NewCompressor(dicts())
	for _, v := range variants[4:] {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			defer reportCPU(b, cpu0)
			b.RunParallel(func(pb *testing.PB) {
				var enc, out []byte
				i := 0
				for pb.Next() {
					enc = frame.AppendDelta(enc[:0], deltas[i%nDeltas])
					out = v.compress(c, out[:0], enc)
					i++
				}
			})
		})
	}
}

// BenchmarkDeltaDecode: Decompress + DecodeDelta of a typical delta.
func BenchmarkDeltaDecode(b *testing.B) {
	raws := deltaSet(1, nDeltas)
	c := frame.NewCompressor(dicts())
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			recs := make([][]byte, len(raws))
			raw := 0
			for i, r := range raws {
				recs[i] = v.compress(c, nil, r)
				raw += len(r)
			}
			b.SetBytes(int64(raw / nDeltas))
			b.ReportAllocs()
			var out []byte
			i := 0
			cpu0 := cpuTime()
			for b.Loop() {
				var err error
				out, err = c.Decompress(out[:0], recs[i%nDeltas])
				if err != nil {
					b.Fatal(err)
				}
				if _, err := frame.DecodeDelta(out); err != nil {
					b.Fatal(err)
				}
				i++
			}
			reportCPU(b, cpu0)
		})
	}
}

// BenchmarkFrameEncode: AppendFrame + Compress of a 100 KB frame (a snapshot).
func BenchmarkFrameEncode(b *testing.B) {
	for _, size := range []int{100 << 10} {
		f := bigFrame(2, size)
		c := frame.NewCompressor(dicts())
		raw := frame.AppendFrame(nil, f)
		for _, v := range variants {
			b.Run(fmt.Sprintf("%dKB/%s", size>>10, v.name), func(b *testing.B) {
				stored := len(v.compress(c, nil, raw))
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				var enc, out []byte
				cpu0 := cpuTime()
				for b.Loop() {
					enc = frame.AppendFrame(enc[:0], f)
					out = v.compress(c, out[:0], enc)
				}
				reportCPU(b, cpu0)
				b.ReportMetric(float64(stored), "stored-B/rec")
				b.ReportMetric(float64(len(raw))/float64(stored), "ratio")
			})
		}
	}
}

// BenchmarkFrameDecode: Decompress + DecodeFrame of a 100 KB frame.
func BenchmarkFrameDecode(b *testing.B) {
	for _, size := range []int{100 << 10} {
		f := bigFrame(2, size)
		c := frame.NewCompressor(dicts())
		raw := frame.AppendFrame(nil, f)
		for _, v := range variants {
			b.Run(fmt.Sprintf("%dKB/%s", size>>10, v.name), func(b *testing.B) {
				rec := v.compress(c, nil, raw)
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				var out []byte
				cpu0 := cpuTime()
				for b.Loop() {
					var err error
					out, err = c.Decompress(out[:0], rec)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := frame.DecodeFrame(out); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, cpu0)
			})
		}
	}
}

// BenchmarkApply: applying a typical delta to a frame of growing size must
// cost the same whatever the frame's size (requirement 4).
func BenchmarkApply(b *testing.B) {
	for _, size := range []int{10 << 10, 500 << 10} {
		b.Run(fmt.Sprintf("frame=%dKB", size>>10), func(b *testing.B) {
			base := bigFrame(3, size)
			g := agenttext.New(4)
			deltas := make([]*frame.Delta, 64)
			for i := range deltas {
				var d frame.Delta
				d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: g.Message(200)}).
					Set("last_"+g.Word(), []byte(g.Word())).
					SetSubgoalStatus("sg-"+strconv.Itoa(i%7), frame.SubgoalActive)
				deltas[i] = &d
			}
			f := base.Clone()
			b.ReportAllocs()
			i := 0
			cpu0 := cpuTime()
			for b.Loop() {
				if len(f.Messages) > len(base.Messages)+100000 {
					b.StopTimer()
					f = base.Clone()
					b.StartTimer()
				}
				if err := f.Apply(deltas[i%len(deltas)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			reportCPU(b, cpu0)
		})
	}
}

// reportCPU reports the process CPU time per iteration since cpu0.
func reportCPU(b *testing.B, cpu0 int64) {
	if b.N > 0 {
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	}
}
