package frame

import (
	"encoding/base64"
	"encoding/json"
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
//	append_message      Role, Content, Tool, CallID
//	add_pending         CallID, Tool, Args, Key
//	tool_output         CallID, Tool, Content (the output)
//	remove_pending      CallID
//	drop_messages       Count
//
// Status and Role carry the names of SubgoalStatus and Role ("done",
// "assistant"). Byte slices alias the delta's: do not modify them.
type Op struct {
	Kind    string
	ID      string
	Text    string
	Status  string
	Key     string
	Value   []byte
	Role    string
	Content string
	Tool    string
	CallID  string
	Args    []byte
	Count   uint64
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
		case opSet:
			v.Key, v.Value = o.s1, o.b
		case opDelete:
			v.Key = o.s1
		case opAppendScratch:
			v.Value = o.b
		case opAppendMessage:
			v.Role, v.CallID, v.Content, v.Tool = Role(o.aux).String(), o.s1, o.s2, o.s3
		case opAddPending:
			v.CallID, v.Tool, v.Args, v.Key = o.s1, o.s2, o.b, o.s3
		case opToolOutput:
			v.CallID, v.Tool, v.Content = o.s1, o.s2, o.s3
		case opRemovePending:
			v.CallID = o.s1
		case opDropMessages:
			v.Count = o.n
		}
		out[i] = v
	}
	return out
}

// MarshalJSON writes the op as one object with "op" naming its kind and
// only the fields it uses. Value is a string when it is valid UTF-8, else
// "value_base64" holds it in standard base64; Args is embedded as JSON
// when it is valid JSON, else it is a string.
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
	if o.Value != nil || o.Kind == "set" || o.Kind == "append_scratch" {
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
		if json.Valid(o.Args) {
			add("args", json.RawMessage(o.Args), true)
		} else {
			add("args", string(o.Args), true)
		}
	}
	add("count", o.Count, o.Kind == "drop_messages")

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
