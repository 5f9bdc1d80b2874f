package agentloop

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/continuumdb/continuum/frame"
	"github.com/zeebo/blake3"
)

// ModelFunc is the language model: it returns the assistant's next turn
// for the conversation in req. The turn must be a RoleAssistant message;
// its tool calls (ToolCalls, or PartToolCall parts) are the calls the loop
// makes next, and a turn without any is the final answer.
//
// The loop calls it through the ledger as an idempotent action: its
// response is certified before any tool runs, so an atom begun again after
// a crash gets the same response back and never calls the model twice for
// a step that got an answer. A call the crash caught before its
// certificate is made again (no tool acted on its answer). An error fails
// the step, which is retried (Loop.Retry).
//
// req and what it holds are read-only and valid only during the call.
type ModelFunc func(ctx context.Context, req *Request) (frame.Message, error)

// Request is what the model is asked.
type Request struct {
	// Messages is the conversation so far: the run's frame's messages (the
	// prompt, then each step's assistant turn and tool messages).
	Messages []frame.Message
	// Tools are the tools on offer, sorted by name.
	Tools []ToolSpec
	// Key is the call's idempotency key: the same for the same step
	// however often it is retried or resumed. An API that deduplicates
	// requests by key may be given it.
	Key string
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the call's arguments (a JSON
	// object), as the model is to see it; empty for none.
	Parameters []byte
}

// ModelTool is the ledger's tool name of the model call, which a Loop's
// tools may not take.
const ModelTool = "agentloop.model"

// modelArgs returns the ledger arguments of the model call for req: the
// model's id and a digest of the request (conversation and tools), conv
// holding the conversation's digest so far and tools the tools' digest
// (toolsDigest of req.Tools). The conversation itself is not stored again
// (the frame has it); the digest makes the call's fingerprint depend on
// it, so that a fork of the run whose conversation differs from its
// parent's at this step asks the model anew, and one whose conversation is
// the same gets the parent's certified answer (I10).
//
// The digest is frozen (the fingerprints of certified model calls depend
// on it): BLAKE3-256 of C || T, where C is BLAKE3-256 of "continuum
// agentloop conversation v1\x00" followed, for each message, by the
// length (8 bytes, little endian) and bytes of frame.AppendFrame of a
// frame holding that message alone; and T is BLAKE3-256 of "continuum
// agentloop tools v1\x00" followed, for each tool, by its name,
// description and parameters, each length-prefixed so.
func modelArgs(modelID string, req *Request, conv *convDigest, tools [32]byte) ([]byte, error) {
	var buf [64]byte
	conv.absorb(req.Messages).Sum(buf[:0])
	copy(buf[32:], tools[:])
	sum := blake3.Sum256(buf[:])
	args := struct {
		Model    string `json:"model"`
		Request  string `json:"request"`
		Messages int    `json:"messages"`
		Tools    int    `json:"tools"`
	}{modelID, hex.EncodeToString(sum[:]), len(req.Messages), len(req.Tools)}
	return json.Marshal(args)
}

// toolsDigest is the T of modelArgs's digest.
func toolsDigest(tools []ToolSpec) [32]byte {
	h := blake3.New()
	_, _ = h.WriteString("continuum agentloop tools v1\x00")
	var n [8]byte
	for _, t := range tools {
		for _, b := range [][]byte{[]byte(t.Name), []byte(t.Description), t.Parameters} {
			binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
			_, _ = h.Write(n[:])
			_, _ = h.Write(b)
		}
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// convDigest is the C of modelArgs's digest after the conversation's
// first n messages: a step hashes only the messages added since the last
// one. The zero value has absorbed nothing.
type convDigest struct {
	h   *blake3.Hasher
	n   int
	buf []byte
}

// absorb brings the digest up to msgs, which must extend the messages
// absorbed so far (it starts over otherwise), and returns its hasher, to
// be read with Sum (which leaves it as it is).
func (c *convDigest) absorb(msgs []frame.Message) *blake3.Hasher {
	if c.h == nil || len(msgs) < c.n {
		c.h, c.n = blake3.New(), 0
		_, _ = c.h.WriteString("continuum agentloop conversation v1\x00")
	}
	var n [8]byte
	for i := c.n; i < len(msgs); i++ {
		c.buf = frame.AppendFrame(c.buf[:0], &frame.Frame{Messages: msgs[i : i+1]})
		binary.LittleEndian.PutUint64(n[:], uint64(len(c.buf)))
		_, _ = c.h.Write(n[:])
		_, _ = c.h.Write(c.buf)
	}
	c.n = len(msgs)
	return c.h
}

// The certified form of a model response, the result of the model call's
// certificate: a JSON object (readable in continuumctl inspect and
// export) from which the loop rebuilds the assistant message exactly.
// Texts, names, ids and tool-call arguments are JSON strings, so every
// byte comes back as it was (they must be valid UTF-8, which a JSON API's
// answer always is); empty fields are left out.
//
//	{"v":1,"content":"...","tool_calls":[{"id":"..","name":"..","arguments":"{...}"}],
//	 "parts":[{"type":"text","text":".."},{"type":"tool_call","id":"..","name":"..","arguments":".."},
//	          {"type":"json","json":"{...}"}]}
const responseVersion = 1

type wireResponse struct {
	V         int        `json:"v"`
	Content   string     `json:"content,omitempty"`
	ToolCalls []wireCall `json:"tool_calls,omitempty"`
	Parts     []wirePart `json:"parts,omitempty"`
}

type wireCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitempty"`
}

type wirePart struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	JSON      string `json:"json,omitempty"`
}

// encodeResponse returns the certified form of m, an assistant turn. It
// refuses what the form cannot carry exactly: another role, Tool, CallID
// or IsError, tool_result parts, and text that is not valid UTF-8.
func encodeResponse(m *frame.Message) ([]byte, error) {
	switch {
	case m.Role != frame.RoleAssistant:
		return nil, fmt.Errorf("the model's turn has role %v, not assistant", m.Role)
	case m.Tool != "" || m.CallID != "":
		return nil, fmt.Errorf("the model's turn sets Tool or CallID, which name one call the old way: use ToolCalls")
	case m.IsError:
		return nil, fmt.Errorf("the model's turn sets IsError, which only tool messages carry")
	}
	w := wireResponse{V: responseVersion, Content: m.Content}
	strs := []string{m.Content}
	for _, c := range m.ToolCalls {
		w.ToolCalls = append(w.ToolCalls, wireCall{ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)})
		strs = append(strs, c.ID, c.Name, string(c.Arguments))
	}
	for i, p := range m.Parts {
		var wp wirePart
		switch p.Kind {
		case frame.PartText:
			wp = wirePart{Type: "text", Text: p.Text}
		case frame.PartToolCall:
			wp = wirePart{Type: "tool_call", ID: p.Call.ID, Name: p.Call.Name, Arguments: string(p.Call.Arguments)}
		case frame.PartJSON:
			wp = wirePart{Type: "json", JSON: string(p.JSON)}
		default:
			return nil, fmt.Errorf("the model's turn holds a %v part (%d), which an assistant turn does not carry", p.Kind, i)
		}
		w.Parts = append(w.Parts, wp)
		strs = append(strs, wp.Text, wp.ID, wp.Name, wp.Arguments, wp.JSON)
	}
	for _, s := range strs {
		if !validUTF8(s) {
			return nil, fmt.Errorf("the model's turn holds text that is not valid UTF-8 (%.40q), which its certificate cannot keep exactly", s)
		}
	}
	return json.Marshal(w)
}

// decodeResponse rebuilds the assistant turn from its certified form.
func decodeResponse(b []byte) (frame.Message, error) {
	var w wireResponse
	if err := strictUnmarshal(b, &w); err != nil {
		return frame.Message{}, fmt.Errorf("%w: %v", ErrBadResponse, err)
	}
	if w.V != responseVersion {
		return frame.Message{}, fmt.Errorf("%w: version %d, this package reads %d", ErrBadResponse, w.V, responseVersion)
	}
	m := frame.Message{Role: frame.RoleAssistant, Content: w.Content}
	for _, c := range w.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, frame.ToolCall{ID: c.ID, Name: c.Name, Arguments: bytesOf(c.Arguments)})
	}
	for i, p := range w.Parts {
		switch p.Type {
		case "text":
			m.Parts = append(m.Parts, frame.Part{Kind: frame.PartText, Text: p.Text})
		case "tool_call":
			m.Parts = append(m.Parts, frame.Part{Kind: frame.PartToolCall,
				Call: frame.ToolCall{ID: p.ID, Name: p.Name, Arguments: bytesOf(p.Arguments)}})
		case "json":
			m.Parts = append(m.Parts, frame.Part{Kind: frame.PartJSON, JSON: bytesOf(p.JSON)})
		default:
			return frame.Message{}, fmt.Errorf("%w: part %d has type %q", ErrBadResponse, i, p.Type)
		}
	}
	return m, nil
}

// calls returns the tool calls m requests, in order: its ToolCalls, or
// its PartToolCall parts (a message holds one or the other).
func calls(m *frame.Message) []frame.ToolCall {
	if len(m.ToolCalls) > 0 {
		return m.ToolCalls
	}
	var out []frame.ToolCall
	for _, p := range m.Parts {
		if p.Kind == frame.PartToolCall {
			out = append(out, p.Call)
		}
	}
	return out
}

// finalText is the text of a final answer: its Content, or its text
// parts joined.
func finalText(m *frame.Message) []byte {
	if m.Content != "" || len(m.Parts) == 0 {
		return []byte(m.Content)
	}
	var b []byte
	for _, p := range m.Parts {
		if p.Kind == frame.PartText {
			b = append(b, p.Text...)
		}
	}
	return b
}

// sortedSpecs returns the specs of tools, sorted by name.
func sortedSpecs(tools map[string]Tool) []ToolSpec {
	specs := make([]ToolSpec, 0, len(tools))
	for name, t := range tools {
		specs = append(specs, ToolSpec{Name: name, Description: t.Description, Parameters: t.Parameters})
	}
	slices.SortFunc(specs, func(a, b ToolSpec) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return specs
}

func bytesOf(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}
