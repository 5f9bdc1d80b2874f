package frame

import (
	"encoding/binary"
	"strconv"
)

// Encoding and decoding of messages, their tool calls and parts (format.go
// has the layout). A message without flags and with a version 1 role
// encodes exactly as version 1 wrote it; the record's version is decided
// by the caller from the ops or messages it holds.

// roleByte is the role bits of a message head: the role, or 15 (which no
// decoder accepts) for a role the 4 bits cannot hold, so that a value
// Apply would reject never decodes as another, valid one.
func roleByte(role uint8) byte {
	if role > msgRoleMask {
		return msgRoleMask
	}
	return role
}

// partHead is the head byte of part p; ref says whether its text is a
// reference.
func partHead(p *Part, ref bool) byte {
	h := byte(p.Kind)
	if h > partKindMask {
		h = partKindMask // no decoder accepts kind 15
	}
	if p.IsError {
		h |= partFlagError
	}
	if ref {
		h |= partFlagRef
	}
	return h
}

func textSize(s string, ref uint64) int {
	if ref != 0 {
		return uvarintLen(ref - 1)
	}
	return strLen(len(s))
}

func appendText(b []byte, s string, ref uint64) []byte {
	if ref != 0 {
		return binary.AppendUvarint(b, ref-1)
	}
	return appendStr(b, s)
}

func callSize(c *ToolCall) int {
	return strLen(len(c.ID)) + strLen(len(c.Name)) + strLen(len(c.Arguments))
}

func appendCall(b []byte, c *ToolCall) []byte {
	return appendBytes(appendStr(appendStr(b, c.ID), c.Name), c.Arguments)
}

func partSize(p *Part, ref uint64) int {
	n := 1
	switch p.Kind {
	case PartText:
		n += textSize(p.Text, ref)
	case PartToolCall:
		n += callSize(&p.Call)
	case PartToolResult:
		n += strLen(len(p.CallID)) + textSize(p.Text, ref) + strLen(len(p.JSON))
	case PartJSON:
		n += strLen(len(p.JSON))
	}
	return n
}

func appendPart(b []byte, p *Part, ref uint64) []byte {
	b = append(b, partHead(p, ref != 0))
	switch p.Kind {
	case PartText:
		b = appendText(b, p.Text, ref)
	case PartToolCall:
		b = appendCall(b, &p.Call)
	case PartToolResult:
		b = appendBytes(appendText(appendStr(b, p.CallID), p.Text, ref), p.JSON)
	case PartJSON:
		b = appendBytes(b, p.JSON)
	}
	return b
}

// messageSize is the encoded size of a message; e may be nil.
func messageSize(content, tool, callID string, e *msgExt) int {
	fl := e.flags()
	n := 1
	if fl != 0 {
		n++
	}
	if fl&msgFlagContentRef != 0 {
		n += uvarintLen(e.contentRef - 1)
	} else {
		n += strLen(len(content))
	}
	if tool != "" {
		n += strLen(len(tool))
	}
	if callID != "" {
		n += strLen(len(callID))
	}
	if fl&msgFlagCalls != 0 {
		n += uvarintLen(uint64(len(e.calls)))
		for i := range e.calls {
			n += callSize(&e.calls[i])
		}
	}
	if fl&msgFlagParts != 0 {
		n += uvarintLen(uint64(len(e.parts)))
		for j := range e.parts {
			n += partSize(&e.parts[j], e.partRef(j))
		}
	}
	return n
}

// appendMessage appends a message; e may be nil. With e.flags() == 0 and
// a version 1 role the bytes are those of version 1.
func appendMessage(b []byte, role uint8, content, tool, callID string, e *msgExt) []byte {
	fl := e.flags()
	head := roleByte(role)
	if tool != "" {
		head |= msgHasTool
	}
	if callID != "" {
		head |= msgHasCallID
	}
	if fl != 0 {
		head |= msgHasFlags
		b = append(b, head, fl)
	} else {
		b = append(b, head)
	}
	if fl&msgFlagContentRef != 0 {
		b = binary.AppendUvarint(b, e.contentRef-1)
	} else {
		b = appendStr(b, content)
	}
	if tool != "" {
		b = appendStr(b, tool)
	}
	if callID != "" {
		b = appendStr(b, callID)
	}
	if fl&msgFlagCalls != 0 {
		b = binary.AppendUvarint(b, uint64(len(e.calls)))
		for i := range e.calls {
			b = appendCall(b, &e.calls[i])
		}
	}
	if fl&msgFlagParts != 0 {
		b = binary.AppendUvarint(b, uint64(len(e.parts)))
		for j := range e.parts {
			b = appendPart(b, &e.parts[j], e.partRef(j))
		}
	}
	return b
}

// frameExt returns the msgExt view of a frame's message for the encoders,
// in e, or nil for a message that has no more than version 1 holds.
func frameExt(m *Message, e *msgExt) *msgExt {
	if len(m.ToolCalls) == 0 && len(m.Parts) == 0 && !m.IsError {
		return nil
	}
	e.calls, e.parts, e.isError = m.ToolCalls, m.Parts, m.IsError
	return e
}

// msgRefs are the references of a decoded message: result index + 1 of its
// content, and nil or one per part (0: none).
type msgRefs struct {
	content uint64
	parts   []uint64
}

// message decodes one message of a record of version 2 if v2, else 1,
// into m, which must be zero, and returns its flags byte (0 if it has
// none) and whether the message needs version 2. refs, when not nil, is
// where references to certified results go (deltas); with refs nil (a
// frame) a reference is corrupt.
func (d *decoder) message(v2 bool, m *Message, refs *msgRefs) (flags byte, needsV2 bool) {
	start := d.off
	head := d.byte1("message head")
	if d.err != nil {
		return
	}
	reserved, maxRole := byte(msgReserved), roleMaxV1
	if v2 {
		reserved, maxRole = msgReservedV2, roleMax
	}
	if head&reserved != 0 {
		d.fail(start, "message head 0x"+strconv.FormatUint(uint64(head), 16)+" has reserved bits set")
		return
	}
	m.Role = Role(head & msgRoleMask)
	if m.Role > maxRole {
		d.fail(start, "unknown message role "+strconv.Itoa(int(m.Role)))
		return
	}
	if head&msgHasFlags != 0 {
		st := d.off
		flags = d.byte1("message flags")
		switch {
		case d.err != nil:
			return
		case flags == 0:
			d.fail(st, "message flags byte is zero (it is present only when a flag is set)")
			return
		case flags&msgFlagReserved != 0:
			d.fail(st, "message flags 0x"+strconv.FormatUint(uint64(flags), 16)+" have reserved bits set")
			return
		case flags&msgFlagContentRef != 0 && refs == nil:
			d.fail(st, "a frame's message refers to a certified result (frames hold resolved content)")
			return
		}
	}
	if flags&msgFlagContentRef != 0 {
		refs.content = d.result("message content") + 1
		if d.scan {
			d.refs = addRef(d.refs, refs.content-1)
		}
	} else {
		m.Content = d.str("message content")
	}
	if head&msgHasTool != 0 {
		m.Tool = d.nonEmptyStr("message tool")
	}
	if head&msgHasCallID != 0 {
		m.CallID = d.nonEmptyStr("message call id")
	}
	m.IsError = flags&msgFlagError != 0
	if flags&msgFlagCalls != 0 {
		// A call takes at least 3 bytes: three empty fields.
		if n := d.presentCount("tool call count", 3); n > 0 && d.scan {
			var c ToolCall
			for range n {
				d.call(&c, &messageCall)
			}
		} else if n > 0 {
			m.ToolCalls = make([]ToolCall, n)
			for i := range m.ToolCalls {
				d.call(&m.ToolCalls[i], &messageCall)
			}
		}
	}
	if flags&msgFlagParts != 0 {
		// A part takes at least 2 bytes: a head and an empty text.
		if n := d.presentCount("part count", 2); n > 0 && d.scan {
			var p Part
			for j := 0; j < n && d.err == nil; j++ {
				p = Part{}
				if r := d.part(&p, refs != nil); r != 0 {
					d.refs = addRef(d.refs, r-1)
				}
			}
		} else if n > 0 {
			m.Parts = make([]Part, n)
			for j := 0; j < n && d.err == nil; j++ {
				if r := d.part(&m.Parts[j], refs != nil); r != 0 {
					if refs.parts == nil {
						refs.parts = make([]uint64, n)
					}
					refs.parts[j] = r
				}
			}
		}
	}
	return flags, flags != 0 || m.Role > roleMaxV1
}

// presentCount is count for a list flagged present, which is not empty.
func (d *decoder) presentCount(what string, minSize int) int {
	start := d.off
	n := d.count(what, minSize)
	if d.err == nil && n == 0 {
		d.fail(start, what+" is 0 but flagged present")
	}
	return n
}

// callFields names the fields of a call in errors; constant, so that the
// decoding path builds no string.
type callFields struct{ id, name, args string }

var (
	messageCall = callFields{"tool call id", "tool call name", "tool call arguments"}
	partCall    = callFields{"part tool call id", "part tool call name", "part tool call arguments"}
)

func (d *decoder) call(c *ToolCall, f *callFields) {
	c.ID = d.str(f.id)
	c.Name = d.str(f.name)
	c.Arguments = d.span(f.args)
}

// part decodes one part into p and returns the reference of its text
// (result index + 1), or 0.
func (d *decoder) part(p *Part, refs bool) uint64 {
	start := d.off
	h := d.byte1("part head")
	if d.err != nil {
		return 0
	}
	if h&partReservedBit != 0 {
		d.fail(start, "part head 0x"+strconv.FormatUint(uint64(h), 16)+" has reserved bits set")
		return 0
	}
	p.Kind = PartKind(h & partKindMask)
	if !p.Kind.Valid() {
		d.fail(start, "unknown part kind "+strconv.Itoa(int(p.Kind)))
		return 0
	}
	if h&partFlagError != 0 {
		if p.Kind != PartToolResult {
			d.fail(start, "is_error flag on a "+p.Kind.String()+" part (only tool_result carries it)")
			return 0
		}
		p.IsError = true
	}
	isRef := h&partFlagRef != 0
	if isRef {
		switch {
		case p.Kind != PartText && p.Kind != PartToolResult:
			d.fail(start, "reference flag on a "+p.Kind.String()+" part (only text and tool_result have a text)")
			return 0
		case !refs:
			d.fail(start, "a frame's part refers to a certified result (frames hold resolved content)")
			return 0
		}
	}
	var ref uint64
	text := func(what string) {
		if isRef {
			ref = d.result(what) + 1
		} else {
			p.Text = d.str(what)
		}
	}
	switch p.Kind {
	case PartText:
		text("part text")
	case PartToolCall:
		d.call(&p.Call, &partCall)
	case PartToolResult:
		p.CallID = d.str("part call id")
		text("part result text")
		p.JSON = d.span("part result json")
	case PartJSON:
		p.JSON = d.span("part json")
	}
	if d.err != nil {
		return 0
	}
	return ref
}

// result reads the index of a certified result.
func (d *decoder) result(what string) uint64 {
	start := d.off
	v := d.uvarintOf(what, " result index")
	if d.err == nil && v > maxResultIndex {
		d.fail(start, what+" result index "+strconv.FormatUint(v, 10)+" exceeds "+strconv.FormatUint(maxResultIndex, 10))
	}
	return v
}
