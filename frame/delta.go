package frame

import (
	"bytes"
	"strconv"
)

// op is one delta operation. Which fields mean what depends on kind:
//
//	set_objective       s1 objective
//	add_subgoal         s1 id, s2 text
//	set_subgoal_status  s1 id, aux status
//	set                 s1 key, b value
//	delete              s1 key
//	append_scratch      b data
//	clear_scratch       -
//	append_message      aux role, s1 call id, s2 content, s3 tool, ext the rest
//	add_pending         s1 call id, s2 tool, b args, s3 key
//	tool_output         s1 call id, s2 tool, s3 output
//	remove_pending      s1 call id
//	drop_messages       n count
//	tool_output_ref     s1 call id, s2 tool, n result index
//	replace_frame       b frame record
//	set_sealed          s1 key, b sealed value
//
// The byte slices (b, and those of ext) are owned by the op: builders copy
// their arguments, and DecodeDelta points them into a private copy of the
// record. ext is never changed once built: a derived delta (Resolve,
// ReferResults) gets a new one.
type op struct {
	kind       opKind
	aux        uint8
	n          uint64
	s1, s2, s3 string
	b          []byte
	ext        *msgExt
}

// msgExt is what an append_message op holds beyond a version 1 message
// (role, content, tool, call id). It is nil when there is nothing more, so
// that flags() != 0 exactly when ext is set.
type msgExt struct {
	calls   []ToolCall
	parts   []Part
	isError bool
	// contentRef, when not zero, says that the content is certified result
	// contentRef-1 of the atom's actions (s2 is then empty); partRefs is
	// nil or has one such reference per part, for the part's Text.
	contentRef uint64
	partRefs   []uint64
}

func (e *msgExt) flags() byte {
	if e == nil {
		return 0
	}
	var f byte
	if e.isError {
		f |= msgFlagError
	}
	if len(e.calls) > 0 {
		f |= msgFlagCalls
	}
	if len(e.parts) > 0 {
		f |= msgFlagParts
	}
	if e.contentRef != 0 {
		f |= msgFlagContentRef
	}
	return f
}

// partRef returns the reference of part j's text (0: none).
func (e *msgExt) partRef(j int) uint64 {
	if e == nil || e.partRefs == nil {
		return 0
	}
	return e.partRefs[j]
}

// message returns the message an append_message op appends (with empty
// texts where it holds references).
func (o *op) message() Message {
	m := Message{Role: Role(o.aux), Content: o.s2, Tool: o.s3, CallID: o.s1}
	if e := o.ext; e != nil {
		m.ToolCalls, m.Parts, m.IsError = e.calls, e.parts, e.isError
	}
	return m
}

// needsV2 reports whether o needs the version 2 encoding of a delta.
func (o *op) needsV2() bool {
	switch o.kind {
	case opToolOutputRef:
		return true
	case opAppendMessage:
		return o.aux > uint8(roleMaxV1) || o.ext != nil
	}
	return false
}

// hasRefs reports whether o refers to a certified result.
func (o *op) hasRefs() bool {
	return o.kind == opToolOutputRef || o.ext != nil && (o.ext.contentRef != 0 || o.ext.partRefs != nil)
}

// Delta is the change one atom makes to a frame: an ordered list of ops.
// The zero value is an empty delta, ready to use. Builder methods append one
// op and return the delta, for chaining:
//
//	var d frame.Delta
//	d.SetObjective("migrate billing").AddSubgoal("s1", "back up the db")
//
// Builders copy their byte-slice arguments, so the caller may reuse them.
// They never fail: an op that cannot apply (a status for an unknown
// subgoal, say) is reported by Frame.Apply. A Delta is not safe for
// concurrent mutation; once built it may be encoded and applied from any
// number of goroutines.
type Delta struct {
	ops []op
}

func cloneNonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}

// deltaOps is the room a Delta's first op reserves: an agent's delta
// holds a few ops (a message or two, a memory key), which then take one
// allocation rather than one per doubling (1, 2, 4).
const deltaOps = 4

func (d *Delta) add(o op) *Delta {
	if d.ops == nil {
		d.ops = make([]op, 0, deltaOps)
	}
	d.ops = append(d.ops, o)
	return d
}

// SetObjective replaces the objective.
func (d *Delta) SetObjective(s string) *Delta { return d.add(op{kind: opSetObjective, s1: s}) }

// AddSubgoal appends a subgoal in status SubgoalOpen. The id must be
// non-empty and new.
func (d *Delta) AddSubgoal(id, text string) *Delta {
	return d.add(op{kind: opAddSubgoal, s1: id, s2: text})
}

// SetSubgoalStatus sets the status of an existing subgoal.
func (d *Delta) SetSubgoalStatus(id string, st SubgoalStatus) *Delta {
	return d.add(op{kind: opSetSubgoalStatus, s1: id, aux: uint8(st)})
}

// Set stores val under key in working memory, replacing any value (a
// sealed one too).
func (d *Delta) Set(key string, val []byte) *Delta {
	return d.add(op{kind: opSet, s1: key, b: cloneNonEmpty(val)})
}

// SetSealed stores sealed under key in working memory as a sealed value
// (Frame.Sealed), replacing any value, plain or sealed: the value encrypted
// by the engine with the data key of key, opaque to this package. Set of
// the key later makes it plain again.
func (d *Delta) SetSealed(key string, sealed []byte) *Delta {
	return d.add(op{kind: opSetSealed, s1: key, b: cloneNonEmpty(sealed)})
}

// Delete removes key from working memory, plain or sealed; deleting a
// missing key is a no-op.
func (d *Delta) Delete(key string) *Delta { return d.add(op{kind: opDelete, s1: key}) }

// AppendScratch appends b to the scratchpad.
func (d *Delta) AppendScratch(b []byte) *Delta {
	return d.add(op{kind: opAppendScratch, b: cloneNonEmpty(b)})
}

// ClearScratch empties the scratchpad.
func (d *Delta) ClearScratch() *Delta { return d.add(op{kind: opClearScratch}) }

// AppendMessage appends a message to the conversation. It copies the
// message's tool calls and parts, and their byte slices.
func (d *Delta) AppendMessage(m Message) *Delta {
	o := op{kind: opAppendMessage, aux: uint8(m.Role), s1: m.CallID, s2: m.Content, s3: m.Tool}
	if len(m.ToolCalls) > 0 || len(m.Parts) > 0 || m.IsError {
		m.cloneBlocks()
		o.ext = &msgExt{calls: m.ToolCalls, parts: m.Parts, isError: m.IsError}
	}
	return d.add(o)
}

// AddPending records an in-flight action. Its CallID must be non-empty and
// not already pending.
func (d *Delta) AddPending(p Pending) *Delta {
	return d.add(op{kind: opAddPending, s1: p.CallID, s2: p.Tool, b: cloneNonEmpty(p.Args), s3: p.Key})
}

// ToolOutput appends a RoleTool message with that call id, tool and output
// as content, and removes the Pending with that CallID if there is one.
func (d *Delta) ToolOutput(callID, tool string, output []byte) *Delta {
	return d.add(op{kind: opToolOutput, s1: callID, s2: tool, s3: string(output)})
}

// ToolOutputResult is ToolOutput whose output is certified result number
// result of the atom's actions (the index of the action in its atom, in the
// order the atom first performed them), which the delta refers to instead
// of holding a copy. Such a delta applies with ApplyWith, given a resolver
// of the atom's results; ReferResults makes the same references from a
// delta that holds the output.
func (d *Delta) ToolOutputResult(callID, tool string, result int) *Delta {
	n := ^uint64(0) // a negative index: kept so that Apply reports it
	if result >= 0 {
		n = uint64(result)
	}
	return d.add(op{kind: opToolOutputRef, s1: callID, s2: tool, n: n})
}

// RemovePending removes the pending action with that call id without
// recording an output (the action was cancelled). The call must be pending.
func (d *Delta) RemovePending(callID string) *Delta {
	return d.add(op{kind: opRemovePending, s1: callID})
}

// ReplaceFrame replaces the whole frame with a copy of f (nil: the empty
// frame). It must be the delta's only op (Apply refuses a delta that holds
// it beside another), and f must be valid (Validate). It is how a rollback
// returns a run to the state of an earlier seq: no other op removes a
// subgoal or the newest messages. The delta holds f encoded (its size is
// the frame's), in format version 3.
func (d *Delta) ReplaceFrame(f *Frame) *Delta {
	return d.add(op{kind: opReplaceFrame, b: AppendFrame(nil, f)})
}

// DropMessages removes the n oldest messages of the conversation, as an
// agent does when it compacts its context (typically after a message that
// summarizes them). There must be at least n messages.
func (d *Delta) DropMessages(n int) *Delta {
	if n < 0 {
		// Keep the op so that Apply reports it instead of silently
		// dropping nothing: a negative count maps to an impossible one.
		return d.add(op{kind: opDropMessages, n: ^uint64(0)})
	}
	return d.add(op{kind: opDropMessages, n: uint64(n)})
}

// Len returns the number of ops in d.
func (d *Delta) Len() int {
	if d == nil {
		return 0
	}
	return len(d.ops)
}

// Reset empties d, keeping its storage for reuse.
func (d *Delta) Reset() {
	clear(d.ops)
	d.ops = d.ops[:0]
}

// String describes the ops of d, one per line, for debugging.
func (d *Delta) String() string {
	var b []byte
	for i := range d.ops {
		o := &d.ops[i]
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, o.kind.String()...)
		switch o.kind {
		case opSetObjective, opDelete, opRemovePending:
			b = appendQuoted(b, o.s1)
		case opAddSubgoal:
			b = appendQuoted(appendQuoted(b, o.s1), o.s2)
		case opSetSubgoalStatus:
			b = appendQuoted(b, o.s1)
			b = append(b, ' ')
			b = append(b, SubgoalStatus(o.aux).String()...)
		case opSet:
			b = appendQuoted(appendQuoted(b, o.s1), string(o.b))
		case opAppendScratch:
			b = appendQuoted(b, string(o.b))
		case opSetSealed:
			// Ciphertext says nothing to a reader: its length does.
			b = appendQuoted(b, o.s1)
			b = append(b, ' ')
			b = append(b, itoa(uint64(len(o.b)))...)
			b = append(b, " bytes"...)
		case opAppendMessage:
			b = append(b, ' ')
			b = append(b, Role(o.aux).String()...)
			if e := o.ext; e != nil && e.contentRef != 0 {
				b = appendResult(b, e.contentRef-1)
			} else {
				b = appendQuoted(b, o.s2)
			}
			b = appendQuoted(appendQuoted(b, o.s3), o.s1)
			b = appendExt(b, o.ext)
		case opToolOutputRef:
			b = appendResult(appendQuoted(appendQuoted(b, o.s1), o.s2), o.n)
		case opAddPending:
			b = appendQuoted(appendQuoted(appendQuoted(appendQuoted(b, o.s1), o.s2), string(o.b)), o.s3)
		case opToolOutput:
			b = appendQuoted(appendQuoted(appendQuoted(b, o.s1), o.s2), o.s3)
		case opDropMessages:
			b = append(b, ' ')
			b = append(b, itoa(o.n)...)
		case opReplaceFrame:
			b = append(b, ' ')
			b = append(b, itoa(uint64(len(o.b)))...)
			b = append(b, " bytes"...)
		}
	}
	return string(b)
}

func appendResult(b []byte, n uint64) []byte {
	b = append(b, " result#"...)
	return append(b, itoa(n)...)
}

// appendExt describes the error flag, tool calls and parts of a message.
func appendExt(b []byte, e *msgExt) []byte {
	if e == nil {
		return b
	}
	if e.isError {
		b = append(b, " error"...)
	}
	for _, c := range e.calls {
		b = describeCall(append(b, " call("...), &c)
		b = append(b, ')')
	}
	for j := range e.parts {
		p := &e.parts[j]
		b = append(b, " part("...)
		b = append(b, p.Kind.String()...)
		switch p.Kind {
		case PartToolCall:
			b = describeCall(append(b, ' '), &p.Call)
		case PartToolResult:
			b = appendQuoted(b, p.CallID)
			if p.IsError {
				b = append(b, " error"...)
			}
		}
		if r := e.partRef(j); r != 0 {
			b = appendResult(b, r-1)
		} else if p.Text != "" || p.Kind == PartText {
			b = appendQuoted(b, p.Text)
		}
		if len(p.JSON) > 0 {
			b = appendQuoted(b, string(p.JSON))
		}
		b = append(b, ')')
	}
	return b
}

func describeCall(b []byte, c *ToolCall) []byte {
	b = strconv.AppendQuote(b, c.ID)
	return appendQuoted(appendQuoted(b, c.Name), string(c.Arguments))
}
