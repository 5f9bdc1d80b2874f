package webview

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/textclip"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/record"
)

// Bounds of what one page shows: a value longer than foldAt is folded
// (a preview, the rest behind a click), and no value shows more than
// maxShown bytes (the page says how long it was). They bound a page's
// memory on a store whose values are huge.
const (
	foldAt   = 240
	preview  = 120
	maxShown = 16 << 10
)

// Bounds of the store's strings that are not values, as a page shows them
// (clip): a name, an id or a key (a tool's name, an idempotency key, a
// memory key, a call id, a subgoal id) is cut past maxName bytes, and a
// sentence that may quote the store (an error, a warning of the reader or
// of verify) past maxText. The engine bounds run ids, branch, wait and
// event names, sender ids and stream names to maxName or less (the
// decoders refuse longer ones), so clip never cuts those, and a page links
// to them by what it shows; the rest are bounded only by the record size
// (63 MiB).
const (
	maxName = 256
	maxText = 2 << 10
)

// The engine's bounds on the names a page links to: a compile error if
// one of them grows past maxName.
var _, _, _, _ = [1]struct{}{}[max(0, record.MaxRunIDLen-maxName)], [1]struct{}{}[max(0, record.MaxWaitName-maxName)],
	[1]struct{}{}[max(0, record.MaxSenderID-maxName)], [1]struct{}{}[max(0, record.MaxStreamNameLen-maxName)]

// clip returns s as a page shows a name, an id, a key or a sentence of the
// store: whole when it has at most n bytes; else its first n bytes or a
// little less (cut where a rune starts), then "…" and the whole size, so
// that the reader sees that it was cut. It copies no more of s than it
// keeps, so the result does not hold a huge s in memory.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && n-i < utf8.UTFMax-1 && !utf8.RuneStart(s[i]) {
		i-- // s[i] continues a rune that began before it (at most 3 bytes before)
	}
	return s[:i] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// value is a byte string of the store as a page shows it.
type value struct {
	Text    string // what is shown (at most maxShown bytes of the value)
	Preview string // the start of Text, for a folded value
	Size    int    // the whole value's size in bytes
	Long    bool   // folded
	Cut     bool   // Text is not all of it
	Binary  bool   // not UTF-8: Text is base64
	Empty   bool
}

// fold returns b for a page; whole is its size in the store when b was
// cut by the reader (offline cuts action values: ActionInfo.ResultSize),
// or 0. It reads no byte of b past the maxShown it may show.
func fold(b []byte, whole int) value {
	v := value{Size: max(len(b), whole), Empty: len(b) == 0 && whole == 0}
	v.Cut = whole > len(b)
	shown := b
	if len(shown) > maxShown {
		shown, v.Cut = shown[:maxShown], true
	}
	text := shown
	if v.Cut {
		text = trimPartialRune(shown) // a rune the cut went through
	}
	if utf8.Valid(text) {
		if !v.Cut && len(text) > 1 && (text[0] == '{' || text[0] == '[') && json.Valid(text) {
			var ind bytes.Buffer
			if json.Indent(&ind, text, "", "  ") == nil && ind.Len() <= maxShown {
				text = ind.Bytes()
			}
		}
		v.Text = string(text)
	} else {
		v.Binary = true
		v.Text = base64.StdEncoding.EncodeToString(shown)
	}
	if len(v.Text) > foldAt || strings.Count(v.Text, "\n") > 3 {
		v.Long = true
		v.Preview = textclip.String(v.Text, preview)
	}
	return v
}

// foldString is fold of a string, copying no more of it than fold shows.
func foldString(s string) value { return fold([]byte(s[:min(len(s), maxShown)]), len(s)) }

// trimPartialRune drops an incomplete rune at the end of b (a value cut
// in the middle of one).
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if r, n := utf8.DecodeLastRune(b); r != utf8.RuneError || n != 1 {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// toolCallView is a tool call an assistant message requests.
type toolCallView struct {
	ID, Name string
	Args     value
}

// partView is one block of a message's content.
type partView struct {
	Kind    string
	Text    value
	Call    *toolCallView
	CallID  string
	IsError bool
	JSON    value
}

// messageView is one message of a conversation, as a chat shows it.
type messageView struct {
	Index     int // its place in the frame's messages, from 1; 0 in a delta
	Role      string
	Content   value
	Tool      string
	CallID    string
	ToolCalls []toolCallView
	Parts     []partView
	IsError   bool
	Refs      []string // texts that are the atom's certified results (frame.ResultRef)
}

func viewMessage(m frame.Message, index int) messageView {
	v := messageView{Index: index, Role: m.Role.String(), Content: foldString(m.Content), Tool: clip(m.Tool, maxName),
		CallID: clip(m.CallID, maxName), IsError: m.IsError}
	for _, c := range m.ToolCalls {
		v.ToolCalls = append(v.ToolCalls, viewToolCall(c))
	}
	for _, p := range m.Parts {
		v.Parts = append(v.Parts, viewPart(p))
	}
	return v
}

func viewPart(p frame.Part) partView {
	pv := partView{Kind: p.Kind.String(), Text: foldString(p.Text), CallID: clip(p.CallID, maxName), IsError: p.IsError, JSON: fold(p.JSON, 0)}
	if p.Kind == frame.PartToolCall {
		c := viewToolCall(p.Call)
		pv.Call = &c
	}
	return pv
}

func viewToolCall(c frame.ToolCall) toolCallView {
	return toolCallView{ID: clip(c.ID, maxName), Name: clip(c.Name, maxName), Args: fold(c.Arguments, 0)}
}

// field is one named value of an op: a name of the store (Str, clipped)
// or a value.
type field struct {
	Name  string
	Str   string
	Value value
}

// opView is one delta op.
type opView struct {
	Kind    string
	Fields  []field
	Message *messageView // append_message
	Erased  []string     // memory keys whose values were erased (the first maxMemory)
	Sealed  bool         // a sealed value the keyring did not open: not shown
	Note    string
	// MoreErased counts the erased keys not in Erased.
	MoreErased int
}

func viewOp(op offline.ExportedOp) opView {
	v := opView{Kind: op.Kind, Erased: clipAll(op.Erased, maxMemory)}
	v.MoreErased = len(op.Erased) - len(v.Erased)
	add := func(name string, b []byte) { v.Fields = append(v.Fields, field{Name: name, Value: fold(b, 0)}) }
	adds := func(name, s string) {
		if s != "" {
			add(name, []byte(s))
		}
	}
	name := func(name, s string) { // a name, an id or a key
		if s != "" {
			v.Fields = append(v.Fields, field{Name: name, Str: clip(s, maxName)})
		}
	}
	switch op.Kind {
	case "set_objective":
		adds("text", op.Text)
	case "add_subgoal":
		name("id", op.ID)
		adds("text", op.Text)
	case "set_subgoal_status":
		name("id", op.ID)
		name("status", op.Status)
	case "set":
		name("key", op.Key)
		add("value", op.Value)
	case "set_sealed":
		name("key", op.Key)
		switch {
		case op.Opened:
			add("value", op.Value)
		case len(op.Erased) > 0:
		default:
			v.Sealed = true // never the sealed bytes
		}
	case "delete":
		name("key", op.Key)
	case "append_scratch":
		add("value", op.Value)
	case "append_message":
		m := frame.Message{Content: op.Content, Tool: op.Tool, CallID: op.CallID, ToolCalls: op.ToolCalls, Parts: op.Parts, IsError: op.IsError}
		mv := viewMessage(m, 0)
		mv.Role = op.Role
		for _, r := range op.Refs {
			mv.Refs = append(mv.Refs, refText(r))
		}
		v.Message = &mv
	case "tool_output_ref":
		name("call", op.CallID)
		name("tool", op.Tool)
		for _, r := range op.Refs {
			adds("output", refText(r))
		}
	case "add_pending":
		name("call", op.CallID)
		name("tool", op.Tool)
		name("key", op.Key)
		add("args", op.Args)
	case "tool_output":
		name("call", op.CallID)
		name("tool", op.Tool)
		add("output", []byte(op.Content))
	case "remove_pending":
		name("call", op.CallID)
	case "drop_messages":
		adds("count", fmt.Sprint(op.Count))
	case "replace_frame":
		if op.Frame != nil {
			v.Note = fmt.Sprintf("the whole frame, replaced (a rollback's): %d subgoals, %d memory keys, %d messages, %d pending",
				len(op.Frame.Subgoals), len(op.Frame.Memory)+len(op.Frame.Sealed), len(op.Frame.Messages), len(op.Frame.Pending))
		}
	}
	return v
}

// refText says which action's result a text of a message is (the
// path last: a name of the store is not followed by text it could
// reorder, see isolate).
func refText(r frame.ResultRef) string {
	return fmt.Sprintf("the result of action #%d: %s", r.Result, clip(r.Path, maxName))
}

// isolate returns s between U+2068 FIRST STRONG ISOLATE and U+2069 POP
// DIRECTIONAL ISOLATE, for the plain-text places of a page (its title, a
// tooltip) that CSS cannot isolate: a right-to-left override in s ends
// with it, and cannot reverse the text that follows. In the page itself
// app.css isolates the elements that hold the store's names and values.
func isolate(s string) string { return "\u2068" + s + "\u2069" }

// clipAll returns the first n strings of ss, each clipped to maxName.
func clipAll(ss []string, n int) []string { return clipEach(ss, n, maxName) }

// clipEach returns the first n strings of ss, each clipped to size bytes.
func clipEach(ss []string, n, size int) []string {
	var out []string
	for _, s := range ss[:min(len(ss), n)] {
		out = append(out, clip(s, size))
	}
	return out
}

// actionView is one action of the ledger.
type actionView struct {
	Fingerprint string
	Seq         uint64
	Index       uint32
	Tool        string
	Key         string
	Idempotent  bool
	Status      string
	Args        value
	Result      value
	Err         value
	Compensated uint64 // the seq of the completed rollback that undid it, 0: none
	// Retry describes an action with a retry policy: its attempts, and the
	// next attempt or why it was given up; "" without a policy.
	Retry string
}

func viewAction(a offline.ActionInfo) actionView {
	return actionView{Fingerprint: a.Fingerprint.String(), Seq: a.Seq, Index: a.Index, Tool: clip(a.Tool, maxName), Key: clip(a.Key, maxName),
		Idempotent: a.Idempotent, Status: a.StatusName(), Args: fold(a.Args, a.ArgsSize),
		Result: fold(a.Result, a.ResultSize), Err: foldString(a.Err), Retry: retryText(a.Retry)}
}

// retryText is the line the view gives an action's retries (r nil: "").
func retryText(r *offline.RetryInfo) string {
	if r == nil {
		return ""
	}
	s := fmt.Sprintf("attempt %d", r.Attempts)
	if r.Policy.MaxAttempts > 0 {
		s += fmt.Sprintf(" of %d", r.Policy.MaxAttempts)
	}
	switch {
	case r.GaveUp != ledger.NotGivenUp:
		s += ", given up: " + r.GaveUp.String()
	case !r.NextAttempt.IsZero():
		s += ", next not before " + r.NextAttempt.UTC().Format(time.RFC3339)
	}
	return s
}
