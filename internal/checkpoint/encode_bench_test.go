package checkpoint

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/workload"
)

// agentFrame is the frame of a run of the agent workload after atoms
// atoms (as bench/peers builds it: a thought, the call's arguments as a
// message, the tool's output, a memory key, a subgoal every 10 atoms),
// and a dictionary trained on its deltas' encodings, as a store trains
// one on its records.
func agentFrame(tb testing.TB, atoms int) (raw []byte, dicts *frame.Dicts) {
	f := &frame.Frame{Memory: map[string][]byte{}}
	var samples [][]byte
	for seq := 1; seq <= atoms; seq++ {
		a := workload.Script("run-000", uint64(seq), 1)
		d := new(frame.Delta)
		if a.Objective != "" {
			d.SetObjective(a.Objective)
		}
		if a.Subgoal != "" {
			d.AddSubgoal(fmt.Sprintf("sg-%d", seq), a.Subgoal)
		}
		d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: a.Thought})
		d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: string(a.Args), Tool: a.Tool, CallID: a.Key})
		d.ToolOutput(a.Key, a.Tool, a.Result)
		d.Set(a.MemKey, a.MemVal)
		samples = append(samples, frame.AppendDelta(nil, d))
		if err := f.Apply(d); err != nil {
			tb.Fatal(err)
		}
	}
	dict, err := frame.TrainDict(samples, 16<<10)
	if err != nil {
		tb.Fatal(err)
	}
	dicts = frame.NewDicts()
	if err := dicts.Add(1, dict); err != nil {
		tb.Fatal(err)
	}
	return frame.AppendFrame(nil, f), dicts
}

// BenchmarkFrameFileCodec compares what a frame file's frame costs in s2
// (Encode's codec) and in zstd with the store's dictionary (a third fewer
// bytes, measured and not taken: bench/RESULTS-bytes-2026-12-06.md): bytes, the checkpoint's CPU to compress, and the
// restart's to decompress, for a 300-atom run of the agent workload.
//
//	go test -run '^$' -bench FrameFileCodec -count 5 ./internal/checkpoint
func BenchmarkFrameFileCodec(b *testing.B) {
	raw, dicts := agentFrame(b, 300)
	comp := frame.NewCompressor(dicts)
	for _, c := range []struct {
		name  string
		codec frame.Codec
		dict  uint32
	}{{"s2", frame.CodecS2, 0}, {"zstd-dict", frame.CodecZstd, 1}} {
		enc := comp.CompressWith(nil, raw, c.codec, c.dict)
		b.Run(c.name+"/decompress", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			buf := make([]byte, 0, len(raw))
			c0 := cpuNow()
			for b.Loop() {
				var err error
				if buf, err = comp.Decompress(buf[:0], enc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuNow()-c0).Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(len(enc)), "stored-B")
		})
		b.Run(c.name+"/compress", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			buf := make([]byte, 0, len(raw))
			c0 := cpuNow()
			for b.Loop() {
				buf = comp.CompressWith(buf[:0], raw, c.codec, c.dict)
			}
			b.ReportMetric(float64((cpuNow()-c0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuNow is the process's user and system CPU time: steadier than wall
// time on a shared machine.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
