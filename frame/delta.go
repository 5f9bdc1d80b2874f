package frame

import "bytes"

// op is one delta operation. Which fields mean what depends on kind:
//
//	set_objective       s1 objective
//	add_subgoal         s1 id, s2 text
//	set_subgoal_status  s1 id, aux status
//	set                 s1 key, b value
//	delete              s1 key
//	append_scratch      b data
//	clear_scratch       -
//	append_message      aux role, s1 call id, s2 content, s3 tool
//	add_pending         s1 call id, s2 tool, b args, s3 key
//	tool_output         s1 call id, s2 tool, s3 output
//	remove_pending      s1 call id
//	drop_messages       n count
//
// The byte slice b is owned by the op: builders copy their argument, and
// DecodeDelta points it into a private copy of the record.
type op struct {
	kind       opKind
	aux        uint8
	n          uint64
	s1, s2, s3 string
	b          []byte
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

func (d *Delta) add(o op) *Delta {
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

// Set stores val under key in working memory, replacing any value.
func (d *Delta) Set(key string, val []byte) *Delta {
	return d.add(op{kind: opSet, s1: key, b: cloneNonEmpty(val)})
}

// Delete removes key from working memory; deleting a missing key is a no-op.
func (d *Delta) Delete(key string) *Delta { return d.add(op{kind: opDelete, s1: key}) }

// AppendScratch appends b to the scratchpad.
func (d *Delta) AppendScratch(b []byte) *Delta {
	return d.add(op{kind: opAppendScratch, b: cloneNonEmpty(b)})
}

// ClearScratch empties the scratchpad.
func (d *Delta) ClearScratch() *Delta { return d.add(op{kind: opClearScratch}) }

// AppendMessage appends a message to the conversation.
func (d *Delta) AppendMessage(m Message) *Delta {
	return d.add(op{kind: opAppendMessage, aux: uint8(m.Role), s1: m.CallID, s2: m.Content, s3: m.Tool})
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

// RemovePending removes the pending action with that call id without
// recording an output (the action was cancelled). The call must be pending.
func (d *Delta) RemovePending(callID string) *Delta {
	return d.add(op{kind: opRemovePending, s1: callID})
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
		case opAppendMessage:
			b = append(b, ' ')
			b = append(b, Role(o.aux).String()...)
			b = appendQuoted(appendQuoted(appendQuoted(b, o.s2), o.s3), o.s1)
		case opAddPending:
			b = appendQuoted(appendQuoted(appendQuoted(appendQuoted(b, o.s1), o.s2), string(o.b)), o.s3)
		case opToolOutput:
			b = appendQuoted(appendQuoted(appendQuoted(b, o.s1), o.s2), o.s3)
		case opDropMessages:
			b = append(b, ' ')
			b = append(b, itoa(o.n)...)
		}
	}
	return string(b)
}
