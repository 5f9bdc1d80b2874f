// Package agentloopbench measures what agentloop costs per step beside the
// same steps written by hand with Begin, Do and Commit, in one process, on
// the same store options:
//
//	go test -run '^$' -bench Step -benchtime 2000x -count 6 ./bench/agentloop
//
// A step: the model call (in memory: a fixed assistant turn of ~250 bytes
// with two tool calls), two tool calls (in memory, ~150-byte results),
// one commit of the turn and the two tool messages. A run has S steps (the
// last one the answer) and ends; b.N steps make b.N/S runs. The
// hand-written baseline is the leanest loop a developer would write: it
// certifies the model's turn as JSON, keeps the conversation in memory
// (no State copy per step), and ends the run the same way. What the loop
// adds: hashing the conversation for the model call's args, checking and
// normalizing the turn, its response form, and applying each delta to its
// own frame. fsync is off (NoSync) for the CPU comparison, on ("disk")
// for the figure an agent sees on this machine's disk.
//
// Runs of the two alternate in one store, so that both see the same load.
// Metrics, per step: loop- and hand-µs/step (wall time), loop- and
// hand-cpu-µs/step (the process's CPU time, getrusage, background
// goroutines included), and the ratios loop/hand of each; ns/op counts
// both.
package agentloopbench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuumdb/continuum/agentloop"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

var ctx = context.Background()

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var (
	thought = strings.Repeat("I should check the order's status before I mail the customer. ", 3)
	result1 = []byte(`{"order_id":"ord_4e35cbf1","item":"coffee beans","quantity":2,"status":"shipped","carrier":"DHL","tracking":"JD014600006281430377"}`)
	result2 = []byte(`{"message_id":"msg_1781c48c","to":"customer@example.com","status":"sent","queued_at":"2026-12-01T10:00:00Z","size":1834}`)
	prompt  = []frame.Message{
		{Role: frame.RoleSystem, Content: "You are the shop's support agent. Use the tools; answer in one sentence when done."},
		{Role: frame.RoleUser, Content: "Where is my order ord_4e35cbf1? Please mail me the tracking number."},
	}
)

// turn is the model's answer at step i (from 0) of a run of n steps.
func turn(i, n int) frame.Message {
	if i == n-1 {
		return frame.Message{Role: frame.RoleAssistant, Content: "Your order has shipped; the tracking number is in your mail."}
	}
	return frame.Message{Role: frame.RoleAssistant, Content: thought, ToolCalls: []frame.ToolCall{
		{ID: fmt.Sprintf("call_%d_1", i), Name: "order_status", Arguments: []byte(`{"order_id": "ord_4e35cbf1", "fields": ["status", "tracking"]}`)},
		{ID: fmt.Sprintf("call_%d_2", i), Name: "send_email", Arguments: []byte(`{"to": "customer@example.com", "template": "tracking", "order_id": "ord_4e35cbf1"}`)},
	}}
}

func assistantTurns(msgs []frame.Message) int {
	n := 0
	for i := range msgs {
		if msgs[i].Role == frame.RoleAssistant {
			n++
		}
	}
	return n
}

func tools() map[string]agentloop.Tool {
	return map[string]agentloop.Tool{
		"order_status": {Idempotent: true, Parameters: []byte(`{"type":"object"}`),
			Func: func(context.Context, frame.ToolCall, string) ([]byte, error) { return result1, nil }},
		"send_email": {Parameters: []byte(`{"type":"object"}`),
			Func: func(context.Context, frame.ToolCall, string) ([]byte, error) { return result2, nil }},
	}
}

// viaLoop drives one run of n steps with agentloop.
func viaLoop(b *testing.B, run *engine.Run, n int) {
	loop := &agentloop.Loop{
		Run: run, ModelID: "bench", Tools: tools(), Prompt: prompt, MaxSteps: n,
		Model: func(_ context.Context, req *agentloop.Request) (frame.Message, error) {
			return turn(assistantTurns(req.Messages), n), nil
		},
	}
	st, _, err := loop.Drive(ctx)
	if err != nil || st != engine.StatusCompleted {
		b.Fatalf("Drive = %v, %v", st, err)
	}
}

// wireTurn is the hand-written loop's certified form of a turn.
type wireTurn struct {
	Content string `json:"content,omitempty"`
	Calls   []struct {
		ID, Name string
		Args     json.RawMessage
	} `json:"calls,omitempty"`
}

// byHand drives one run of n steps with Begin, Do and Commit.
func byHand(b *testing.B, run *engine.Run, n int) {
	tl := tools()
	conv := append([]frame.Message(nil), prompt...)
	for i := 0; i < n; i++ {
		atom, err := run.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		args := fmt.Appendf(nil, `{"model":"bench","messages":%d}`, len(conv))
		raw, err := atom.Do(ctx, ledger.Action{Tool: "model", Args: args, Idempotent: true},
			func(context.Context, string) ([]byte, error) {
				m := turn(assistantTurns(conv), n)
				w := wireTurn{Content: m.Content}
				for _, c := range m.ToolCalls {
					w.Calls = append(w.Calls, struct {
						ID, Name string
						Args     json.RawMessage
					}{c.ID, c.Name, c.Arguments})
				}
				return json.Marshal(w)
			})
		if err != nil {
			b.Fatal(err)
		}
		var w wireTurn
		if err := json.Unmarshal(raw, &w); err != nil {
			b.Fatal(err)
		}
		m := frame.Message{Role: frame.RoleAssistant, Content: w.Content}
		d := new(frame.Delta)
		if i == 0 {
			for _, p := range prompt {
				d.AppendMessage(p)
			}
		}
		var answers []frame.Message
		for _, c := range w.Calls {
			m.ToolCalls = append(m.ToolCalls, frame.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Args})
			t := tl[c.Name]
			res, err := atom.Do(ctx, ledger.Action{Tool: c.Name, Args: c.Args, Idempotent: t.Idempotent},
				func(ctx context.Context, key string) ([]byte, error) {
					return t.Func(ctx, frame.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Args}, key)
				})
			if err != nil {
				b.Fatal(err)
			}
			answers = append(answers, frame.Message{Role: frame.RoleTool, CallID: c.ID, Tool: c.Name, Content: string(res)})
		}
		d.AppendMessage(m)
		for _, a := range answers {
			d.AppendMessage(a)
		}
		if err := atom.Commit(ctx, d); err != nil {
			b.Fatal(err)
		}
		conv = append(conv, m)
		conv = append(conv, answers...)
		if len(w.Calls) == 0 {
			if err := run.End(ctx, engine.StatusCompleted, []byte(m.Content)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkStep(b *testing.B) {
	for _, sync := range []string{"nosync", "disk"} {
		for _, steps := range []int{10, 100} {
			b.Run(fmt.Sprintf("%s/steps=%d", sync, steps), func(b *testing.B) {
				opts := &engine.Options{NoSync: sync == "nosync", Logger: slog.New(slog.DiscardHandler)}
				db, err := engine.Open(filepath.Join(b.TempDir(), "s"), opts)
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				// Runs of the loop and of the hand-written steps alternate
				// in one store, so that both see the same machine load.
				impls := []func(*testing.B, *engine.Run, int){viaLoop, byHand}
				var wall, cpu [2]time.Duration
				runs := (b.N + steps - 1) / steps
				b.ResetTimer()
				for r := 0; r < 2*runs; r++ {
					k := r % 2
					run, err := db.Run(ctx, fmt.Sprintf("run-%d", r))
					if err != nil {
						b.Fatal(err)
					}
					w0, c0 := time.Now(), cpuTime()
					impls[k](b, run, steps)
					wall[k] += time.Since(w0)
					cpu[k] += cpuTime() - c0
				}
				b.StopTimer()
				per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(runs*steps) }
				b.ReportMetric(per(wall[0]), "loop-µs/step")
				b.ReportMetric(per(wall[1]), "hand-µs/step")
				b.ReportMetric(per(cpu[0]), "loop-cpu-µs/step")
				b.ReportMetric(per(cpu[1]), "hand-cpu-µs/step")
				b.ReportMetric(float64(wall[0])/float64(wall[1]), "wall-ratio")
				b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "cpu-ratio")
			})
		}
	}
}
