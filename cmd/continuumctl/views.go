package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/textclip"
	"github.com/continuumdb/continuum/offline"
)

// JSON views of inspect --json. Their field names are a stable interface
// for analysis tools; atoms and actions are in the form export writes them
// (offline.ExportedAtom, offline.ExportedAction).

// text is a byte string that marshals as a JSON string when it is valid
// UTF-8, and as {"base64": ...} otherwise.
type text []byte

func (t text) MarshalJSON() ([]byte, error) {
	if utf8.Valid(t) {
		return json.Marshal(string(t))
	}
	return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(t)})
}

type subgoalView struct {
	ID     string `json:"id"`
	Text   string `json:"text"`
	Status string `json:"status"`
}

// messageView is every field of a frame.Message. Tool calls and parts
// have the shape export gives them in an append_message op (frame.Op's
// JSON): a call's arguments, and a part's json, are embedded as JSON when
// they are valid JSON, else they are strings.
type messageView struct {
	Role      string         `json:"role"`
	Content   string         `json:"content"`
	Tool      string         `json:"tool,omitempty"`
	CallID    string         `json:"call_id,omitempty"`
	ToolCalls []toolCallView `json:"tool_calls,omitempty"`
	Parts     []partView     `json:"parts,omitempty"`
	IsError   bool           `json:"is_error,omitempty"`
}

type toolCallView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments any    `json:"arguments,omitempty"`
}

type partView struct {
	Kind    string        `json:"kind"`
	Text    string        `json:"text,omitempty"`
	Call    *toolCallView `json:"call,omitempty"`
	CallID  string        `json:"call_id,omitempty"`
	IsError bool          `json:"is_error,omitempty"`
	JSON    any           `json:"json,omitempty"`
}

// rawOrString is b embedded as JSON when it is valid JSON, else as a
// string; nil when b is empty.
func rawOrString(b []byte) any {
	switch {
	case len(b) == 0:
		return nil
	case json.Valid(b):
		return json.RawMessage(b)
	default:
		return string(b)
	}
}

func viewToolCall(c frame.ToolCall) toolCallView {
	return toolCallView{ID: c.ID, Name: c.Name, Arguments: rawOrString(c.Arguments)}
}

func viewMessage(m frame.Message) messageView {
	v := messageView{Role: m.Role.String(), Content: m.Content, Tool: m.Tool, CallID: m.CallID, IsError: m.IsError}
	for _, c := range m.ToolCalls {
		v.ToolCalls = append(v.ToolCalls, viewToolCall(c))
	}
	for _, p := range m.Parts {
		pv := partView{Kind: p.Kind.String(), Text: p.Text, CallID: p.CallID, IsError: p.IsError, JSON: rawOrString(p.JSON)}
		if p.Kind == frame.PartToolCall {
			c := viewToolCall(p.Call)
			pv.Call = &c
		}
		v.Parts = append(v.Parts, pv)
	}
	return v
}

type pendingView struct {
	CallID string                `json:"call_id"`
	Tool   string                `json:"tool"`
	Args   offline.ExportedValue `json:"args,omitempty"`
	Key    string                `json:"key,omitempty"`
}

type frameView struct {
	Objective  string          `json:"objective"`
	Subgoals   []subgoalView   `json:"subgoals"`
	Memory     map[string]text `json:"memory"`
	Scratchpad text            `json:"scratchpad"`
	Messages   []messageView   `json:"messages"`
	Pending    []pendingView   `json:"pending"`
	// ErasedKeys are the memory keys whose values were erased (continuumctl
	// erase --memory-key): they are not in memory, and can never be read
	// again. Absent if none.
	ErasedKeys []string `json:"erased_keys,omitempty"`
}

// viewFrame is f (its sealed values opened: Inspector.StateAtWithErased)
// and the memory keys whose values were erased.
func viewFrame(f *frame.Frame, erased []string) frameView {
	v := frameView{Objective: f.Objective, Subgoals: []subgoalView{}, Memory: map[string]text{},
		Scratchpad: text(f.Scratchpad), Messages: []messageView{}, Pending: []pendingView{}, ErasedKeys: erased}
	for _, s := range f.Subgoals {
		v.Subgoals = append(v.Subgoals, subgoalView{ID: s.ID, Text: s.Text, Status: s.Status.String()})
	}
	for k, m := range f.Memory {
		v.Memory[k] = text(m)
	}
	for _, m := range f.Messages {
		v.Messages = append(v.Messages, viewMessage(m))
	}
	for _, p := range f.Pending {
		v.Pending = append(v.Pending, pendingView{CallID: p.CallID, Tool: p.Tool, Args: p.Args, Key: p.Key})
	}
	return v
}

// clip and clipBytes shorten a value to n runes for one-line display, on
// one line, reading it only as far as they need (package textclip, which
// the web view's previews use too).
func clip(s string, n int) string { return textclip.String(s, n) }

func clipBytes(b []byte, n int) string { return textclip.Bytes(b, n) }

// printFrame writes a frame for people: intent, memory, conversation. The
// memory keys whose values were erased (erased) follow the others, each
// on a line "KEY: erased".
func printFrame(w io.Writer, f *frame.Frame, erased []string, indent string) {
	fmt.Fprintf(w, "%sobjective: %s\n", indent, clip(f.Objective, 100))
	fmt.Fprintf(w, "%ssubgoals: %d\n", indent, len(f.Subgoals))
	for _, s := range f.Subgoals {
		fmt.Fprintf(w, "%s  [%s] %s: %s\n", indent, s.Status, s.ID, clip(s.Text, 80))
	}
	if len(erased) > 0 {
		fmt.Fprintf(w, "%smemory: %d keys, %d erased\n", indent, len(f.Memory), len(erased))
	} else {
		fmt.Fprintf(w, "%smemory: %d keys\n", indent, len(f.Memory))
	}
	for _, k := range sortedKeys(f.Memory) {
		fmt.Fprintf(w, "%s  %s = %s\n", indent, k, clipBytes(f.Memory[k], 80))
	}
	for _, k := range erased {
		fmt.Fprintf(w, "%s  %s: erased\n", indent, k)
	}
	fmt.Fprintf(w, "%sscratchpad: %d bytes\n", indent, len(f.Scratchpad))
	fmt.Fprintf(w, "%smessages: %d\n", indent, len(f.Messages))
	const lastN = 4
	from := max(0, len(f.Messages)-lastN)
	if from > 0 {
		fmt.Fprintf(w, "%s  ... %d earlier messages (all of them in --json)\n", indent, from)
	}
	for i, m := range f.Messages[from:] {
		tool := ""
		if m.Tool != "" {
			tool = " " + m.Tool
		}
		if m.CallID != "" {
			tool += " (" + m.CallID + ")"
		}
		if m.IsError {
			tool += " error"
		}
		fmt.Fprintf(w, "%s  #%d %s%s: %s\n", indent, from+i+1, m.Role, tool, clip(m.Content, 80))
		for _, c := range m.ToolCalls {
			fmt.Fprintf(w, "%s      calls %s (%s) %s\n", indent, c.Name, c.ID, clipBytes(c.Arguments, 60))
		}
		for j, p := range m.Parts {
			fmt.Fprintf(w, "%s      part %d %s\n", indent, j+1, describePart(p))
		}
	}
	fmt.Fprintf(w, "%spending actions: %d\n", indent, len(f.Pending))
	for _, p := range f.Pending {
		fmt.Fprintf(w, "%s  %s %s key %q\n", indent, p.CallID, p.Tool, p.Key)
	}
}

// describePart is a part of a message on one line.
func describePart(p frame.Part) string {
	s := p.Kind.String()
	if p.Kind == frame.PartToolCall {
		s += fmt.Sprintf(" %s (%s) %s", p.Call.Name, p.Call.ID, clipBytes(p.Call.Arguments, 60))
	}
	if p.CallID != "" {
		s += " for " + p.CallID
	}
	if p.IsError {
		s += " error"
	}
	if p.Text != "" {
		s += ": " + clip(p.Text, 60)
	}
	if len(p.JSON) > 0 {
		s += " " + clipBytes(p.JSON, 60)
	}
	return s
}

func printAction(w io.Writer, a engine.ActionInfo, indent string) {
	idem := ""
	if a.Idempotent {
		idem = ", idempotent"
	}
	fmt.Fprintf(w, "%s#%d %s [%s%s] key %q\n", indent, a.Index, a.Tool, a.StatusName(), idem, a.Key)
	fmt.Fprintf(w, "%s    fingerprint %s\n", indent, a.Fingerprint)
	if len(a.Args) > 0 {
		fmt.Fprintf(w, "%s    args:   %s\n", indent, clipBytes(a.Args, 100))
	}
	if len(a.Result) > 0 {
		fmt.Fprintf(w, "%s    result: %s\n", indent, clipBytes(a.Result, 100))
	}
	if len(a.Result) < a.ResultSize || len(a.Args) < a.ArgsSize {
		fmt.Fprintf(w, "%s    (cut: args %d bytes, result %d bytes in the store)\n", indent, a.ArgsSize, a.ResultSize)
	}
	if a.Err != "" {
		fmt.Fprintf(w, "%s    error:  %s\n", indent, a.Err)
	}
	if r := offline.NewExportedAction(a).Retry; r != nil {
		fmt.Fprintf(w, "%s    retry:  attempt %d of %s", indent, r.Attempts, attemptsBound(r.MaxAttempts))
		if r.GaveUp != "" {
			fmt.Fprintf(w, ", given up (%s)", r.GaveUp)
		} else if r.NextAttempt != "" {
			fmt.Fprintf(w, ", next attempt not before %s", r.NextAttempt)
		}
		if r.DeadlineMs > 0 {
			fmt.Fprintf(w, ", deadline %gms after %s", r.DeadlineMs, r.FirstAttempt)
		}
		fmt.Fprintln(w)
	}
	if e := offline.NewExportedAction(a); e.IntentPos != "" || e.CertPos != "" {
		fmt.Fprintf(w, "%s    intent at wal %s, certificate at wal %s\n", indent, orNone(e.IntentPos), orNone(e.CertPos))
	}
}

// attemptsBound names a retry policy's MaxAttempts (0: no bound).
func attemptsBound(n uint32) string {
	if n == 0 {
		return "unbounded"
	}
	return fmt.Sprint(n)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func timeString(t time.Time) string {
	if t.IsZero() || t.UnixNano() == 0 {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeRefs writes the texts of an op that are the atom's certified
// results: " refs=/content:#0,/parts/1/text:#2" (the JSON pointer in the
// op's message, and the result's index among the atom's actions).
func writeRefs(b *strings.Builder, refs []frame.ResultRef) {
	for i, r := range refs {
		sep := ","
		if i == 0 {
			sep = " refs="
		}
		fmt.Fprintf(b, "%s%s:#%d", sep, r.Path, r.Result)
	}
}

// describeOp writes one delta op on one line for people. A set_sealed op
// (a value of an erasable memory key) shows its value opened, or
// "erased"; a replace_frame op names the keys of its frame that were.
func describeOp(op offline.ExportedOp) string {
	var b strings.Builder
	b.WriteString(op.Kind)
	q := func(name, v string) { fmt.Fprintf(&b, " %s=%q", name, clip(v, 70)) }
	switch op.Kind {
	case "set_objective":
		q("text", op.Text)
	case "add_subgoal":
		q("id", op.ID)
		q("text", op.Text)
	case "set_subgoal_status":
		q("id", op.ID)
		fmt.Fprintf(&b, " status=%s", op.Status)
	case "set":
		q("key", op.Key)
		q("value", string(op.Value))
	case "set_sealed":
		q("key", op.Key)
		switch {
		case op.Opened:
			q("value", string(op.Value))
		case len(op.Erased) > 0:
			b.WriteString(" erased")
		default:
			fmt.Fprintf(&b, " sealed=%d bytes", len(op.Value))
		}
	case "replace_frame":
		if len(op.Erased) > 0 {
			q("erased", strings.Join(op.Erased, " "))
		}
	case "delete":
		q("key", op.Key)
	case "append_scratch":
		q("value", string(op.Value))
	case "append_message":
		fmt.Fprintf(&b, " role=%s", op.Role)
		if op.Tool != "" {
			q("tool", op.Tool)
		}
		if op.CallID != "" {
			q("call", op.CallID)
		}
		q("content", op.Content)
		if len(op.ToolCalls) > 0 {
			calls := make([]string, len(op.ToolCalls))
			for i, c := range op.ToolCalls {
				calls[i] = c.Name + "(" + c.ID + ")"
			}
			q("tool_calls", strings.Join(calls, " "))
		}
		if len(op.Parts) > 0 {
			fmt.Fprintf(&b, " parts=%d", len(op.Parts))
		}
		if op.IsError {
			b.WriteString(" is_error")
		}
		writeRefs(&b, op.Refs)
	case "tool_output_ref":
		q("call", op.CallID)
		q("tool", op.Tool)
		writeRefs(&b, op.Refs)
	case "add_pending":
		q("call", op.CallID)
		q("tool", op.Tool)
		q("key", op.Key)
		q("args", string(op.Args))
	case "tool_output":
		q("call", op.CallID)
		q("tool", op.Tool)
		q("output", op.Content)
	case "remove_pending":
		q("call", op.CallID)
	case "drop_messages":
		fmt.Fprintf(&b, " count=%d", op.Count)
	}
	return b.String()
}
