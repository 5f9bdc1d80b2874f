package frame

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"unicode/utf8"
)

// Op is an exported, read-only view of one delta operation, for tools that
// print or export deltas (continuumctl export). Which fields are set
// depends on Kind, the op's stable snake_case name:
//
//	set_objective       Text
//	add_subgoal         ID, Text
//	set_subgoal_status  ID, Status
//	set                 Key, Value
//	delete              Key
//	append_scratch      Value
//	clear_scratch       -
//	append_message      Role, Content, Tool, CallID, ToolCalls, Parts, IsError, Refs
//	add_pending         CallID, Tool, Args, Key
//	tool_output         CallID, Tool, Content (the output)
//	remove_pending      CallID
//	drop_messages       Count
//	tool_output_ref     CallID, Tool, Refs (the output: one, path "/content")
//	replace_frame       Frame (the whole frame it replaces the run's with;
//	                    nil for a builder's invalid frame, which Apply refuses)
//	set_sealed          Key, Value (the sealed bytes, opaque)
//
// Status and Role carry the names of SubgoalStatus and Role ("done",
// "assistant"). A text that refers to a certified result is empty, and
// Refs says which result stands for it. Byte slices and the ToolCalls and
// Parts lists alias the delta's: do not modify them.
type Op struct {
	Kind      string
	ID        string
	Text      string
	Status    string
	Key       string
	Value     []byte
	Role      string
	Content   string
	Tool      string
	CallID    string
	Args      []byte
	Count     uint64
	ToolCalls []ToolCall
	Parts     []Part
	IsError   bool
	Refs      []ResultRef
	Frame     *Frame
}

// ResultRef says that a text of an op is certified result Result of the
// atom's actions: Path is a JSON pointer into the message the op appends,
// "/content" or "/parts/N/text".
type ResultRef struct {
	Path   string
	Result int
}

// Ops returns the ops of d in order, as exported views. A nil delta has
// none.
func (d *Delta) Ops() []Op {
	if d == nil {
		return nil
	}
	out := make([]Op, len(d.ops))
	for i := range d.ops {
		o := &d.ops[i]
		v := Op{Kind: o.kind.String()}
		switch o.kind {
		case opSetObjective:
			v.Text = o.s1
		case opAddSubgoal:
			v.ID, v.Text = o.s1, o.s2
		case opSetSubgoalStatus:
			v.ID, v.Status = o.s1, SubgoalStatus(o.aux).String()
		case opSet, opSetSealed:
			v.Key, v.Value = o.s1, o.b
		case opDelete:
			v.Key = o.s1
		case opAppendScratch:
			v.Value = o.b
		case opAppendMessage:
			v.Role, v.CallID, v.Content, v.Tool = Role(o.aux).String(), o.s1, o.s2, o.s3
			if e := o.ext; e != nil {
				v.ToolCalls, v.Parts, v.IsError = e.calls, e.parts, e.isError
				if e.contentRef != 0 {
					v.Refs = append(v.Refs, ResultRef{Path: "/content", Result: int(e.contentRef - 1)})
				}
				for j, r := range e.partRefs {
					if r != 0 {
						v.Refs = append(v.Refs, ResultRef{Path: "/parts/" + itoa(uint64(j)) + "/text", Result: int(r - 1)})
					}
				}
			}
		case opToolOutputRef:
			v.CallID, v.Tool = o.s1, o.s2
			v.Refs = []ResultRef{{Path: "/content", Result: int(o.n)}}
		case opAddPending:
			v.CallID, v.Tool, v.Args, v.Key = o.s1, o.s2, o.b, o.s3
		case opToolOutput:
			v.CallID, v.Tool, v.Content = o.s1, o.s2, o.s3
		case opRemovePending:
			v.CallID = o.s1
		case opDropMessages:
			v.Count = o.n
		case opReplaceFrame:
			// Nil if it does not decode: a builder's invalid frame, which
			// Apply refuses (a decoded delta's always decodes).
			v.Frame, _ = DecodeFrame(o.b)
		}
		out[i] = v
	}
	return out
}

// MarshalJSON writes the op as one object with "op" naming its kind and
// only the fields it uses. Value is a string when it is valid UTF-8, else
// "value_base64" holds it in standard base64; the sealed bytes of a
// set_sealed op are always "sealed_base64", in standard base64 (they are
// ciphertext, and a reader must not take them for a value); Args, a tool call's
// "arguments" and a part's "json" are embedded as JSON when they are valid
// JSON, else they are strings. Tool calls are {"id", "name", "arguments"};
// parts {"kind", and "text", "call", "call_id", "is_error", "json" as the
// kind uses them}; refs {"path", "result"}.
func (o Op) MarshalJSON() ([]byte, error) {
	type field struct {
		name string
		val  any
	}
	fs := []field{{"op", o.Kind}}
	add := func(name string, v any, set bool) {
		if set {
			fs = append(fs, field{name, v})
		}
	}
	add("id", o.ID, o.ID != "")
	add("text", o.Text, o.Text != "" || o.Kind == "set_objective")
	add("status", o.Status, o.Status != "")
	add("key", o.Key, o.Key != "")
	if o.Kind == "set_sealed" {
		add("sealed_base64", base64.StdEncoding.EncodeToString(o.Value), true)
	} else if o.Value != nil || o.Kind == "set" || o.Kind == "append_scratch" {
		if utf8.Valid(o.Value) {
			add("value", string(o.Value), true)
		} else {
			add("value_base64", base64.StdEncoding.EncodeToString(o.Value), true)
		}
	}
	add("role", o.Role, o.Role != "")
	add("content", o.Content, o.Content != "" || o.Kind == "append_message" || o.Kind == "tool_output")
	add("tool", o.Tool, o.Tool != "")
	add("call_id", o.CallID, o.CallID != "")
	if o.Args != nil {
		if validJSON(o.Args) {
			add("args", json.RawMessage(o.Args), true)
		} else {
			add("args", string(o.Args), true)
		}
	}
	add("count", o.Count, o.Kind == "drop_messages")
	if len(o.ToolCalls) > 0 {
		calls := make([]any, len(o.ToolCalls))
		for i := range o.ToolCalls {
			calls[i] = callJSON(&o.ToolCalls[i])
		}
		add("tool_calls", calls, true)
	}
	if len(o.Parts) > 0 {
		parts := make([]any, len(o.Parts))
		for i := range o.Parts {
			parts[i] = partJSON(&o.Parts[i])
		}
		add("parts", parts, true)
	}
	add("is_error", o.IsError, o.IsError)
	if o.Frame != nil {
		// The frame as the ops that build it from the empty frame.
		add("frame", BuildOps(o.Frame), true)
	}
	if len(o.Refs) > 0 {
		refs := make([]any, len(o.Refs))
		for i, r := range o.Refs {
			refs[i] = struct {
				Path   string `json:"path"`
				Result int    `json:"result"`
			}{r.Path, r.Result}
		}
		add("refs", refs, true)
	}

	b := []byte{'{'}
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(f.name)
		v, err := json.Marshal(f.val)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// BuildOps returns the ops that build f from the empty frame, in the
// frame's order: objective, subgoals (and their statuses), memory in key
// order, scratchpad, messages, pending actions, sealed memory values in
// key order (as set_sealed ops). Export writes a
// replace_frame op's frame as this list.
func BuildOps(f *Frame) []Op {
	var d Delta
	if f.Objective != "" {
		d.SetObjective(f.Objective)
	}
	for _, sg := range f.Subgoals {
		d.AddSubgoal(sg.ID, sg.Text)
		if sg.Status != SubgoalOpen {
			d.SetSubgoalStatus(sg.ID, sg.Status)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(f.Memory)) {
		d.Set(k, f.Memory[k])
	}
	if len(f.Scratchpad) > 0 {
		d.AppendScratch(f.Scratchpad)
	}
	for _, m := range f.Messages {
		d.AppendMessage(m)
	}
	for _, p := range f.Pending {
		d.AddPending(p)
	}
	for _, k := range slices.Sorted(maps.Keys(f.Sealed)) {
		d.SetSealed(k, f.Sealed[k])
	}
	return d.Ops()
}

// rawOrString embeds b as JSON if it is valid JSON, else as a string.
func rawOrString(b []byte) any {
	if validJSON(b) {
		return json.RawMessage(b)
	}
	return string(b)
}

func callJSON(c *ToolCall) any {
	v := struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments any    `json:"arguments,omitempty"`
	}{ID: c.ID, Name: c.Name}
	if len(c.Arguments) > 0 {
		v.Arguments = rawOrString(c.Arguments)
	}
	return v
}

func partJSON(p *Part) any {
	v := struct {
		Kind    string `json:"kind"`
		Text    string `json:"text,omitempty"`
		Call    any    `json:"call,omitempty"`
		CallID  string `json:"call_id,omitempty"`
		IsError bool   `json:"is_error,omitempty"`
		JSON    any    `json:"json,omitempty"`
	}{Kind: p.Kind.String(), Text: p.Text, CallID: p.CallID, IsError: p.IsError}
	if p.Kind == PartToolCall {
		v.Call = callJSON(&p.Call)
	}
	if len(p.JSON) > 0 {
		v.JSON = rawOrString(p.JSON)
	}
	return v
}
