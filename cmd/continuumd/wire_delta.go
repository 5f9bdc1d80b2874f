package main

// Deltas and frames on the wire: the ops a commit carries, decoded into a
// frame.Delta, and a frame written as JSON.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/continuumdb/continuum/frame"
)

// wireOp is one op of a commit's delta, in the form frame.Op's MarshalJSON
// writes (continuumctl export and GET .../atoms/{seq} print the same).
// Pointers tell a field given empty from one not given.
type wireOp struct {
	Op          string          `json:"op"`
	ID          *string         `json:"id"`
	Text        *string         `json:"text"`
	Status      *string         `json:"status"`
	Key         *string         `json:"key"`
	Value       *string         `json:"value"`
	ValueBase64 *string         `json:"value_base64"`
	Role        *string         `json:"role"`
	Content     *string         `json:"content"`
	Tool        *string         `json:"tool"`
	CallID      *string         `json:"call_id"`
	Args        json.RawMessage `json:"args"`
	Count       *uint64         `json:"count"`
	ToolCalls   []wireToolCall  `json:"tool_calls"`
	Parts       []wirePart      `json:"parts"`
	IsError     *bool           `json:"is_error"`
}

// wireToolCall is a tool call an assistant message requests
// (frame.ToolCall): OpenAI's tool_calls[i], Anthropic's tool_use.
type wireToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// wirePart is one block of a message's content (frame.Part).
type wirePart struct {
	Kind    string          `json:"kind"` // text, tool_call, tool_result, json
	Text    string          `json:"text"`
	Call    *wireToolCall   `json:"call"`
	CallID  string          `json:"call_id"`
	IsError bool            `json:"is_error"`
	JSON    json.RawMessage `json:"json"`
}

var partKinds = map[string]frame.PartKind{
	"text": frame.PartText, "tool_call": frame.PartToolCall, "tool_result": frame.PartToolResult, "json": frame.PartJSON,
}

// opFields lists, per op, the fields it takes: required ones first, then
// optional ones after "|". Any other field is refused.
var opFields = map[string]string{
	"set_objective":      "text",
	"add_subgoal":        "id text",
	"set_subgoal_status": "id status",
	"set":                "key value",
	"delete":             "key",
	"append_scratch":     "value",
	"clear_scratch":      "",
	"append_message":     "role | content tool call_id tool_calls parts is_error",
	"add_pending":        "call_id tool | args key",
	"tool_output":        "call_id tool | content",
	"remove_pending":     "call_id",
	"drop_messages":      "count",
}

// opFieldNames are the fields an op may carry besides op, sorted: an
// op's fields are a bit set of their indexes here (wireOp.givenFields).
var opFieldNames = []string{"args", "call_id", "content", "count", "id", "is_error", "key", "parts", "role", "status", "text", "tool", "tool_calls", "value"}

// opSpec is an op's entry of opFields as bit sets of opFieldNames.
type opSpec struct {
	required []int // in opFields' order, which the errors follow
	allowed  uint32
}

// opSpecs is opFields parsed once.
var opSpecs = func() map[string]opSpec {
	index := map[string]int{}
	for i, f := range opFieldNames {
		index[f] = i
	}
	specs := map[string]opSpec{}
	for op, spec := range opFields {
		required, optional, _ := strings.Cut(spec, "|")
		var sp opSpec
		for _, f := range strings.Fields(required) {
			sp.required = append(sp.required, index[f])
			sp.allowed |= 1 << index[f]
		}
		for _, f := range strings.Fields(optional) {
			sp.allowed |= 1 << index[f]
		}
		specs[op] = sp
	}
	return specs
}()

// givenFields is the set of o's fields given (value_base64 counts as
// value), as bits of opFieldNames' indexes.
func (o *wireOp) givenFields() uint32 {
	var g uint32
	set := func(i int, given bool) {
		if given {
			g |= 1 << i
		}
	}
	set(0, o.Args != nil)
	set(1, o.CallID != nil)
	set(2, o.Content != nil)
	set(3, o.Count != nil)
	set(4, o.ID != nil)
	set(5, o.IsError != nil)
	set(6, o.Key != nil)
	set(7, o.Parts != nil)
	set(8, o.Role != nil)
	set(9, o.Status != nil)
	set(10, o.Text != nil)
	set(11, o.Tool != nil)
	set(12, o.ToolCalls != nil)
	set(13, o.Value != nil || o.ValueBase64 != nil)
	return g
}

var subgoalStatuses = map[string]frame.SubgoalStatus{
	"open": frame.SubgoalOpen, "active": frame.SubgoalActive, "done": frame.SubgoalDone,
	"failed": frame.SubgoalFailed, "abandoned": frame.SubgoalAbandoned,
}

var roles = map[string]frame.Role{
	"system": frame.RoleSystem, "user": frame.RoleUser, "assistant": frame.RoleAssistant, "tool": frame.RoleTool,
}

// decodeDelta builds the frame delta of a commit request. Each op is
// checked on its own (its kind, its fields, their values) with errors
// naming delta[i].field; whether the delta applies to the run's frame is
// the engine's to say at commit.
func decodeDelta(ops []json.RawMessage) (*frame.Delta, *apiError) {
	d := new(frame.Delta)
	for i, raw := range ops {
		at := "delta[" + strconv.Itoa(i) + "]"
		var o wireOp
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return nil, jsonError(err, at)
		}
		if err := applyOp(d, &o, at); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func applyOp(d *frame.Delta, o *wireOp, at string) *apiError {
	spec, ok := opFields[o.Op]
	if !ok {
		if o.Op == "" {
			return badRequest(at+".op", "%s.op is required: one of %s", at, opNames())
		}
		return badRequest(at+".op", "unknown op %q: one of %s", o.Op, opNames())
	}
	op := opSpecs[o.Op]
	given := o.givenFields()
	for _, f := range op.required {
		if given&(1<<f) == 0 {
			return badRequest(at+"."+opFieldNames[f], "%s (%s) needs %s", at, o.Op, opFieldNames[f])
		}
	}
	if extra := given &^ op.allowed; extra != 0 {
		name := opFieldNames[bits.TrailingZeros32(extra)] // the first by name, as they are sorted
		if name == "value" && o.Value == nil {
			name = "value_base64"
		}
		return badRequest(at+"."+name, "%s is not a field of %s (it takes %s)", name, o.Op, fieldList(spec))
	}
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	switch o.Op {
	case "set_objective":
		d.SetObjective(*o.Text)
	case "add_subgoal":
		if *o.ID == "" {
			return badRequest(at+".id", "%s.id must not be empty", at)
		}
		d.AddSubgoal(*o.ID, *o.Text)
	case "set_subgoal_status":
		st, ok := subgoalStatuses[*o.Status]
		if !ok {
			return badRequest(at+".status", "unknown subgoal status %q: one of open, active, done, failed, abandoned", *o.Status)
		}
		d.SetSubgoalStatus(*o.ID, st)
	case "set":
		v, _, err := pickBytes(at+".value", o.Value, o.ValueBase64)
		if err != nil {
			return err
		}
		d.Set(*o.Key, v)
	case "delete":
		d.Delete(*o.Key)
	case "append_scratch":
		v, _, err := pickBytes(at+".value", o.Value, o.ValueBase64)
		if err != nil {
			return err
		}
		d.AppendScratch(v)
	case "clear_scratch":
		d.ClearScratch()
	case "append_message":
		r, ok := roles[*o.Role]
		if !ok {
			return badRequest(at+".role", "unknown role %q: one of system, user, assistant, tool", *o.Role)
		}
		m, err := o.message(r, at)
		if err != nil {
			return err
		}
		d.AppendMessage(m)
	case "add_pending":
		if *o.CallID == "" {
			return badRequest(at+".call_id", "%s.call_id must not be empty", at)
		}
		var args []byte
		if o.Args != nil {
			args = compactJSON(o.Args)
		}
		d.AddPending(frame.Pending{CallID: *o.CallID, Tool: *o.Tool, Args: args, Key: s(o.Key)})
	case "tool_output":
		d.ToolOutput(*o.CallID, *o.Tool, []byte(s(o.Content)))
	case "remove_pending":
		d.RemovePending(*o.CallID)
	case "drop_messages":
		if *o.Count > 1<<31 {
			return badRequest(at+".count", "%s.count %d is too large", at, *o.Count)
		}
		d.DropMessages(int(*o.Count))
	}
	return nil
}

func opNames() string { return strings.Join(sortedKeys(opFields), ", ") }

func fieldList(spec string) string {
	required, optional, _ := strings.Cut(spec, "|")
	var parts []string
	if r := strings.Fields(required); len(r) > 0 {
		parts = append(parts, strings.Join(r, ", "))
	}
	if o := strings.Fields(optional); len(o) > 0 {
		parts = append(parts, "optionally "+strings.Join(o, ", "))
	}
	if len(parts) == 0 {
		return "no fields"
	}
	return strings.Join(parts, "; ")
}

// frameJSON is the answer of GET /v1/runs/{run}/state: the run's frame at
// seq. Memory values, the scratchpad and every text travel as strings,
// or NAME_base64 when not UTF-8 (memory: memory_base64, a second map).
func frameJSON(run string, seq uint64, f *frame.Frame) map[string]any {
	o := map[string]any{"run": run, "seq": seq}
	putText(o, "objective", f.Objective)
	subgoals := make([]map[string]any, 0, len(f.Subgoals))
	for _, sg := range f.Subgoals {
		m := map[string]any{"status": sg.Status.String()}
		putText(m, "id", sg.ID)
		putText(m, "text", sg.Text)
		subgoals = append(subgoals, m)
	}
	o["subgoals"] = subgoals
	mem, mem64 := map[string]string{}, map[string]string{}
	for k, v := range f.Memory {
		if utf8.Valid(v) && utf8.ValidString(k) {
			mem[k] = string(v)
		} else {
			mem64[k] = base64.StdEncoding.EncodeToString(v)
		}
	}
	o["memory"] = mem
	if len(mem64) > 0 {
		o["memory_base64"] = mem64
	}
	putBytes(o, "scratchpad", f.Scratchpad)
	msgs := make([]map[string]any, 0, len(f.Messages))
	for _, m := range f.Messages {
		mm := map[string]any{"role": m.Role.String()}
		putText(mm, "content", m.Content)
		if m.Tool != "" {
			putText(mm, "tool", m.Tool)
		}
		if m.CallID != "" {
			putText(mm, "call_id", m.CallID)
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]any, len(m.ToolCalls))
			for i := range m.ToolCalls {
				calls[i] = toolCallJSON(&m.ToolCalls[i])
			}
			mm["tool_calls"] = calls
		}
		if len(m.Parts) > 0 {
			parts := make([]any, len(m.Parts))
			for i := range m.Parts {
				parts[i] = partJSON(&m.Parts[i])
			}
			mm["parts"] = parts
		}
		if m.IsError {
			mm["is_error"] = true
		}
		msgs = append(msgs, mm)
	}
	o["messages"] = msgs
	pend := make([]map[string]any, 0, len(f.Pending))
	for _, p := range f.Pending {
		pm := map[string]any{}
		putText(pm, "call_id", p.CallID)
		putText(pm, "tool", p.Tool)
		putText(pm, "key", p.Key)
		if json.Valid(p.Args) {
			pm["args"] = json.RawMessage(p.Args)
		} else if len(p.Args) > 0 {
			putBytes(pm, "args", p.Args)
		}
		pend = append(pend, pm)
	}
	o["pending"] = pend
	return o
}

// rawOrText embeds b as JSON when it is valid JSON, else as text.
func rawOrText(b []byte) any {
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	return string(b)
}

// toolCallJSON and partJSON write a message's tool calls and parts as
// frame.Op's MarshalJSON does (and as append_message takes them).
func toolCallJSON(c *frame.ToolCall) map[string]any {
	o := map[string]any{"id": c.ID, "name": c.Name}
	if len(c.Arguments) > 0 {
		o["arguments"] = rawOrText(c.Arguments)
	}
	return o
}

func partJSON(p *frame.Part) map[string]any {
	o := map[string]any{"kind": p.Kind.String()}
	if p.Text != "" {
		o["text"] = p.Text
	}
	if p.Kind == frame.PartToolCall {
		o["call"] = toolCallJSON(&p.Call)
	}
	if p.CallID != "" {
		o["call_id"] = p.CallID
	}
	if p.IsError {
		o["is_error"] = true
	}
	if len(p.JSON) > 0 {
		o["json"] = rawOrText(p.JSON)
	}
	return o
}

func (c *wireToolCall) toolCall() frame.ToolCall {
	return frame.ToolCall{ID: c.ID, Name: c.Name, Arguments: []byte(c.Arguments)}
}

// message builds the frame message of an append_message op; the rules of
// its fields (ids, JSON, which kind takes what) are Apply's to check.
func (o *wireOp) message(r frame.Role, at string) (frame.Message, *apiError) {
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	m := frame.Message{Role: r, Content: s(o.Content), Tool: s(o.Tool), CallID: s(o.CallID), IsError: o.IsError != nil && *o.IsError}
	for _, c := range o.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, c.toolCall())
	}
	for i, p := range o.Parts {
		k, ok := partKinds[p.Kind]
		if !ok {
			return m, badRequest(fmt.Sprintf("%s.parts[%d].kind", at, i), "unknown part kind %q: one of text, tool_call, tool_result, json", p.Kind)
		}
		part := frame.Part{Kind: k, Text: p.Text, CallID: p.CallID, IsError: p.IsError, JSON: []byte(p.JSON)}
		if p.Call != nil {
			part.Call = p.Call.toolCall()
		}
		m.Parts = append(m.Parts, part)
	}
	return m, nil
}
