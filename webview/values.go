package webview

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/textclip"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/offline"
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
	v := messageView{Index: index, Role: m.Role.String(), Content: foldString(m.Content), Tool: m.Tool, CallID: m.CallID, IsError: m.IsError}
	for _, c := range m.ToolCalls {
		v.ToolCalls = append(v.ToolCalls, toolCallView{ID: c.ID, Name: c.Name, Args: fold(c.Arguments, 0)})
	}
	for _, p := range m.Parts {
		v.Parts = append(v.Parts, viewPart(p))
	}
	return v
}

func viewPart(p frame.Part) partView {
	pv := partView{Kind: p.Kind.String(), Text: foldString(p.Text), CallID: p.CallID, IsError: p.IsError, JSON: fold(p.JSON, 0)}
	if p.Kind == frame.PartToolCall {
		pv.Call = &toolCallView{ID: p.Call.ID, Name: p.Call.Name, Args: fold(p.Call.Arguments, 0)}
	}
	return pv
}

// field is one named value of an op.
type field struct {
	Name  string
	Value value
}

// opView is one delta op.
type opView struct {
	Kind    string
	Fields  []field
	Message *messageView // append_message
	Erased  []string     // memory keys whose values were erased
	Sealed  bool         // a sealed value the keyring did not open: not shown
	Note    string
}

func viewOp(op offline.ExportedOp) opView {
	v := opView{Kind: op.Kind, Erased: op.Erased}
	add := func(name string, b []byte) { v.Fields = append(v.Fields, field{name, fold(b, 0)}) }
	adds := func(name, s string) {
		if s != "" {
			add(name, []byte(s))
		}
	}
	switch op.Kind {
	case "set_objective":
		adds("text", op.Text)
	case "add_subgoal":
		adds("id", op.ID)
		adds("text", op.Text)
	case "set_subgoal_status":
		adds("id", op.ID)
		adds("status", op.Status)
	case "set":
		adds("key", op.Key)
		add("value", op.Value)
	case "set_sealed":
		adds("key", op.Key)
		switch {
		case op.Opened:
			add("value", op.Value)
		case len(op.Erased) > 0:
		default:
			v.Sealed = true // never the sealed bytes
		}
	case "delete":
		adds("key", op.Key)
	case "append_scratch":
		add("value", op.Value)
	case "append_message":
		m := frame.Message{Content: op.Content, Tool: op.Tool, CallID: op.CallID, ToolCalls: op.ToolCalls, Parts: op.Parts, IsError: op.IsError}
		mv := viewMessage(m, 0)
		mv.Role = op.Role
		for _, r := range op.Refs {
			mv.Refs = append(mv.Refs, fmt.Sprintf("%s is the result of action #%d", r.Path, r.Result))
		}
		v.Message = &mv
	case "tool_output_ref":
		adds("call", op.CallID)
		adds("tool", op.Tool)
		for _, r := range op.Refs {
			adds("output", fmt.Sprintf("%s is the result of action #%d", r.Path, r.Result))
		}
	case "add_pending":
		adds("call", op.CallID)
		adds("tool", op.Tool)
		adds("key", op.Key)
		add("args", op.Args)
	case "tool_output":
		adds("call", op.CallID)
		adds("tool", op.Tool)
		add("output", []byte(op.Content))
	case "remove_pending":
		adds("call", op.CallID)
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
	return actionView{Fingerprint: a.Fingerprint.String(), Seq: a.Seq, Index: a.Index, Tool: a.Tool, Key: a.Key,
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
