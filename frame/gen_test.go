package frame

import (
	"flag"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/continuumdb/continuum/internal/agenttext"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var seedFlag = flag.Int64("seed", 0, "seed for random tests (0: time-based)")

// testSeed returns the seed of a random test and logs it so a failure can be
// replayed with -seed.
func testSeed(t testing.TB) int64 {
	s := *seedFlag
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -seed=%d)", s, s)
	return s
}

// frameCmp compares frames treating nil and empty alike (they encode alike).
var frameCmp = cmp.Options{cmpopts.EquateEmpty()}

// deltaCmp compares deltas by their ops.
var deltaCmp = cmp.Options{cmp.AllowUnexported(Delta{}, op{}, msgExt{}), cmpopts.EquateEmpty()}

// gen builds random but realistic frames and deltas.
type gen struct {
	r    *rand.Rand
	t    *agenttext.Gen
	next int // counter for fresh ids
}

func newGen(seed int64) *gen {
	return &gen{r: rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15)), t: agenttext.New(seed)}
}

func (g *gen) id(prefix string) string {
	g.next++
	return prefix + strconv.Itoa(g.next)
}

// delta returns a delta valid for f (Apply succeeds) of about 1-8 ops.
func (g *gen) delta(f *Frame) *Delta {
	d := &Delta{}
	sim := f.Clone()
	n := 1 + g.r.IntN(8)
	for i := 0; i < n; i++ {
		var one Delta
		switch g.r.IntN(17) {
		case 0:
			one.SetObjective(g.t.Sentence())
		case 1:
			one.AddSubgoal(g.id("sg"), g.t.Sentence())
		case 2:
			if len(sim.Subgoals) > 0 {
				one.SetSubgoalStatus(sim.Subgoals[g.r.IntN(len(sim.Subgoals))].ID, SubgoalStatus(g.r.IntN(int(subgoalMax)+1)))
			}
		case 3, 4:
			one.Set(g.t.Word()+"."+g.t.Word(), []byte(g.t.Message(g.r.IntN(120))))
		case 5:
			one.Delete(g.t.Word() + "." + g.t.Word())
		case 6:
			one.AppendScratch([]byte(g.t.Sentence()))
		case 7:
			if g.r.IntN(8) == 0 {
				one.ClearScratch()
			}
		case 8, 9:
			m := Message{Role: Role(g.r.IntN(3)), Content: g.t.Message(50 + g.r.IntN(500))}
			if g.r.IntN(4) == 0 {
				m.Tool, m.CallID = g.t.Tool(), g.id("call_")
			}
			one.AppendMessage(m)
		case 10:
			one.AddPending(Pending{CallID: g.id("call_"), Tool: g.t.Tool(), Args: g.t.ToolArgs(200), Key: g.id("key-")})
		case 11:
			if len(sim.Pending) > 0 {
				p := sim.Pending[g.r.IntN(len(sim.Pending))]
				one.ToolOutput(p.CallID, p.Tool, g.t.ToolResult(300))
			} else {
				one.ToolOutput(g.id("call_"), g.t.Tool(), g.t.ToolResult(100))
			}
		case 12:
			if len(sim.Pending) > 0 && g.r.IntN(3) == 0 {
				one.RemovePending(sim.Pending[g.r.IntN(len(sim.Pending))].CallID)
			}
		case 13:
			if len(sim.Messages) > 4 && g.r.IntN(4) == 0 {
				one.DropMessages(g.r.IntN(len(sim.Messages) / 2))
			}
		case 14, 15:
			one.AppendMessage(g.llmMessage())
		case 16:
			// A sealed value: random bytes as ciphertext looks, under a
			// key that may be plain already (set_sealed moves it).
			one.SetSealed(g.t.Word()+"."+g.t.Word(), g.sealed())
		}
		if err := sim.Apply(&one); err != nil {
			panic("generator built an invalid op: " + err.Error())
		}
		d.ops = append(d.ops, one.ops...)
	}
	return d
}

// sealed returns bytes shaped like a sealed value: a 12-byte nonce, the
// ciphertext, a 16-byte tag, none of it text.
func (g *gen) sealed() []byte {
	b := make([]byte, 28+g.r.IntN(100))
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return b
}

// frame returns a frame built by applying n random deltas to an empty one.
func (g *gen) frame(n int) *Frame {
	f := &Frame{}
	for i := 0; i < n; i++ {
		if err := f.Apply(g.delta(f)); err != nil {
			panic(err)
		}
	}
	return f
}

// call returns a tool call with JSON arguments (sometimes none).
func (g *gen) call() ToolCall {
	c := ToolCall{ID: g.id("call_"), Name: g.t.Tool()}
	if g.r.IntN(8) != 0 {
		c.Arguments = g.t.ToolArgs(40 + g.r.IntN(200))
	}
	return c
}

// llmMessage returns a message shaped like those of the OpenAI and
// Anthropic APIs: tool calls, parts of every kind, errors, the developer
// role.
func (g *gen) llmMessage() Message {
	switch g.r.IntN(6) {
	case 0: // OpenAI assistant turn with tool calls
		m := Message{Role: RoleAssistant}
		if g.r.IntN(2) == 0 {
			m.Content = g.t.Message(40 + g.r.IntN(200))
		}
		for n := 1 + g.r.IntN(3); n > 0; n-- {
			m.ToolCalls = append(m.ToolCalls, g.call())
		}
		return m
	case 1: // OpenAI tool message, maybe an error
		return Message{Role: RoleTool, CallID: g.id("call_"), Tool: g.t.Tool(),
			Content: string(g.t.ToolResult(60 + g.r.IntN(300))), IsError: g.r.IntN(3) == 0}
	case 2: // Anthropic assistant turn: text and tool_use blocks
		m := Message{Role: RoleAssistant, Parts: []Part{{Kind: PartText, Text: g.t.Message(30 + g.r.IntN(150))}}}
		for n := 1 + g.r.IntN(2); n > 0; n-- {
			m.Parts = append(m.Parts, Part{Kind: PartToolCall, Call: g.call()})
		}
		if g.r.IntN(4) == 0 {
			m.Parts = append(m.Parts, Part{Kind: PartJSON, JSON: []byte(`{"type":"thinking","thinking":"` + g.t.Sentence() + `","signature":"EqQBCgIYAhIM"}`)})
		}
		return m
	case 3: // Anthropic user turn: tool_result blocks
		m := Message{Role: RoleUser}
		for n := 1 + g.r.IntN(3); n > 0; n-- {
			p := Part{Kind: PartToolResult, CallID: g.id("toolu_"), IsError: g.r.IntN(4) == 0}
			switch g.r.IntN(3) {
			case 0:
				p.Text = string(g.t.ToolResult(50 + g.r.IntN(200)))
			case 1:
				p.JSON = []byte(`[{"type":"text","text":"` + g.t.Sentence() + `"}]`)
			}
			m.Parts = append(m.Parts, p)
		}
		if g.r.IntN(2) == 0 {
			m.Parts = append(m.Parts, Part{Kind: PartText, Text: g.t.Sentence()})
		}
		return m
	case 4: // content as parts, with an image
		return Message{Role: RoleUser, Parts: []Part{
			{Kind: PartText, Text: g.t.Message(20 + g.r.IntN(100))},
			{Kind: PartJSON, JSON: []byte(`{"type":"image_url","image_url":{"url":"https://example.com/` + g.t.Word() + `.png"}}`)},
		}}
	default:
		return Message{Role: RoleDeveloper, Content: g.t.Sentence()}
	}
}
