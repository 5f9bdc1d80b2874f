package frame

import (
	"bytes"
	"fmt"
)

// SubgoalStatus is where a subgoal stands. The zero value is SubgoalOpen.
type SubgoalStatus uint8

const (
	SubgoalOpen      SubgoalStatus = 0
	SubgoalActive    SubgoalStatus = 1
	SubgoalDone      SubgoalStatus = 2
	SubgoalFailed    SubgoalStatus = 3
	SubgoalAbandoned SubgoalStatus = 4
	subgoalMax                     = SubgoalAbandoned
)

// Valid reports whether s is one of the defined statuses.
func (s SubgoalStatus) Valid() bool { return s <= subgoalMax }

func (s SubgoalStatus) String() string {
	switch s {
	case SubgoalOpen:
		return "open"
	case SubgoalActive:
		return "active"
	case SubgoalDone:
		return "done"
	case SubgoalFailed:
		return "failed"
	case SubgoalAbandoned:
		return "abandoned"
	}
	return "status(" + itoa(uint64(s)) + ")"
}

// Role is who wrote a message.
type Role uint8

const (
	RoleSystem    Role = 0
	RoleUser      Role = 1
	RoleAssistant Role = 2
	RoleTool      Role = 3
	// RoleDeveloper is OpenAI's "developer" role: instructions from the
	// application, which newer models take in place of "system".
	RoleDeveloper Role = 4
	roleMax            = RoleDeveloper
	// roleMaxV1 is the last role the version 1 encoding can hold.
	roleMaxV1 = RoleTool
)

// Valid reports whether r is one of the defined roles.
func (r Role) Valid() bool { return r <= roleMax }

func (r Role) String() string {
	switch r {
	case RoleSystem:
		return "system"
	case RoleUser:
		return "user"
	case RoleAssistant:
		return "assistant"
	case RoleTool:
		return "tool"
	case RoleDeveloper:
		return "developer"
	}
	return "role(" + itoa(uint64(r)) + ")"
}

// Subgoal is one step of the objective. IDs are unique within a frame.
type Subgoal struct {
	ID     string
	Text   string
	Status SubgoalStatus
}

// Message is one turn of the conversation, shaped so that a message of
// OpenAI's chat completions or Anthropic's messages API maps to it field by
// field and back (doc.go has both mappings).
//
// Content is the text of the message; a message whose content is a list
// of blocks holds them in Parts instead (never both). An assistant message
// may request any number of tool calls, in ToolCalls (OpenAI's tool_calls)
// or as PartToolCall parts (Anthropic's tool_use blocks), not both. A tool
// message (RoleTool) answers the call whose id is CallID; Tool names the
// tool, and IsError says that the content is an error. Tool and CallID on
// an assistant message are the older way to name one requested call.
//
// Apply and Validate check these rules, the JSON of arguments and parts,
// and that ids are non-empty.
type Message struct {
	Role    Role
	Content string
	Tool    string
	CallID  string

	ToolCalls []ToolCall // assistant only: the calls requested, in order
	Parts     []Part     // the content as blocks, in order, when it is not one text
	IsError   bool       // tool messages only: Content reports a failure
}

// ToolCall is one tool call an assistant message requests: OpenAI's
// tool_calls[i] {id, function.name, function.arguments} or Anthropic's
// tool_use block {id, name, input}.
type ToolCall struct {
	ID   string // non-empty, unique within its message
	Name string // non-empty
	// Arguments is the call's JSON as the model wrote it, kept byte for
	// byte (not canonicalized): empty for none, else valid JSON.
	Arguments []byte
}

// PartKind says what a Part holds.
type PartKind uint8

const (
	// PartText is a block of text: Text.
	PartText PartKind = 0
	// PartToolCall is a tool call in an assistant message: Call
	// (Anthropic's tool_use block).
	PartToolCall PartKind = 1
	// PartToolResult answers a tool call, in a user or tool message: CallID,
	// IsError, and the result as Text or, when the result is a list of
	// blocks, as JSON (a JSON array) (Anthropic's tool_result block).
	PartToolResult PartKind = 2
	// PartJSON is any other block, kept as its JSON object, verbatim: an
	// image, a document, a thinking block with its signature, a text block
	// with citations or cache_control.
	PartJSON PartKind = 3
	partMax           = PartJSON
)

// Valid reports whether k is one of the defined part kinds.
func (k PartKind) Valid() bool { return k <= partMax }

func (k PartKind) String() string {
	switch k {
	case PartText:
		return "text"
	case PartToolCall:
		return "tool_call"
	case PartToolResult:
		return "tool_result"
	case PartJSON:
		return "json"
	}
	return "part(" + itoa(uint64(k)) + ")"
}

// Part is one block of a message's content. Which fields it uses depends
// on Kind; the others must be zero (they would not survive encoding).
//
//	PartText        Text
//	PartToolCall    Call
//	PartToolResult  CallID, IsError, and Text or JSON (not both)
//	PartJSON        JSON
type Part struct {
	Kind    PartKind
	Text    string
	Call    ToolCall
	CallID  string // non-empty in a PartToolResult
	IsError bool
	// JSON is kept byte for byte: a JSON object for PartJSON, a JSON
	// array (the result's blocks) for PartToolResult.
	JSON []byte
}

// Pending is an in-flight action: a tool call requested but whose output
// has not been recorded yet. CallIDs are unique and non-empty within a frame.
type Pending struct {
	CallID string
	Tool   string
	Args   []byte
	Key    string // idempotency key
}

// Frame is the semantic state of an agent: intent (Objective, Subgoals),
// working memory (Memory, Sealed, Scratchpad), conversation (Messages) and
// in-flight actions (Pending).
//
// Sealed holds the values of erasable memory keys: each value sealed
// (encrypted and authenticated) by the engine with its memory key's own
// data key, so that erasing that data key erases the key's values
// everywhere the run recorded them. The sealed bytes are opaque to this
// package, which carries them through deltas, frames and Apply and never
// sees a key; Unseal gives the frame with them opened. A memory key is in
// Memory or in Sealed, never both (Validate checks it). Sealed is nil when
// the frame holds no sealed value.
//
// A Frame is a plain value: not safe for concurrent mutation. Apply changes
// it in place and may keep references to the byte slices of the delta
// applied (never mutated by this package); Clone gives an independent copy.
type Frame struct {
	Objective  string
	Subgoals   []Subgoal
	Memory     map[string][]byte
	Scratchpad []byte
	Messages   []Message
	Pending    []Pending
	Sealed     map[string][]byte
}

// Clone returns a deep copy of f that shares no mutable memory with it
// (strings are immutable and shared). Clone of nil is nil.
func (f *Frame) Clone() *Frame {
	if f == nil {
		return nil
	}
	c := &Frame{
		Objective:  f.Objective,
		Scratchpad: bytes.Clone(f.Scratchpad),
	}
	if f.Subgoals != nil {
		c.Subgoals = append([]Subgoal(nil), f.Subgoals...)
	}
	if f.Memory != nil {
		c.Memory = make(map[string][]byte, len(f.Memory))
		for k, v := range f.Memory {
			c.Memory[k] = bytes.Clone(v)
		}
	}
	if f.Sealed != nil {
		c.Sealed = make(map[string][]byte, len(f.Sealed))
		for k, v := range f.Sealed {
			c.Sealed[k] = bytes.Clone(v)
		}
	}
	if f.Messages != nil {
		c.Messages = append([]Message(nil), f.Messages...)
		for i := range c.Messages {
			c.Messages[i].cloneBlocks()
		}
	}
	if f.Pending != nil {
		c.Pending = make([]Pending, len(f.Pending))
		for i, p := range f.Pending {
			p.Args = bytes.Clone(p.Args)
			c.Pending[i] = p
		}
	}
	return c
}

// Validate checks the invariants of a frame: subgoal ids non-empty and
// unique, statuses defined, no memory key both in Memory and in Sealed,
// every message well formed (the rules of Message and Part), pending call
// ids non-empty and unique. DecodeFrame returns only valid frames, and
// Apply keeps a frame valid.
func (f *Frame) Validate() error {
	if k, ok := bothMaps(f.Memory, f.Sealed); ok {
		return fmt.Errorf("%w: memory key %q is both plain (Memory) and sealed (Sealed)", ErrInvalidFrame, k)
	}
	if err := uniqueIDs(len(f.Subgoals), func(i int) string { return f.Subgoals[i].ID }, "subgoal"); err != nil {
		return err
	}
	for i, s := range f.Subgoals {
		if !s.Status.Valid() {
			return fmt.Errorf("%w: subgoal %d (%q) has unknown status %d", ErrInvalidFrame, i, s.ID, uint8(s.Status))
		}
	}
	for i := range f.Messages {
		if why := f.Messages[i].check(); why != "" {
			return fmt.Errorf("%w: message %d: %s", ErrInvalidFrame, i, why)
		}
	}
	return uniqueIDs(len(f.Pending), func(i int) string { return f.Pending[i].CallID }, "pending call")
}

// bothMaps returns the smallest key in both a and b, if there is one
// (the smallest, so that the error names the same key every time). It
// walks the smaller map.
func bothMaps(a, b map[string][]byte) (string, bool) {
	if len(a) > len(b) {
		a, b = b, a
	}
	var min string
	found := false
	for k := range a {
		if _, ok := b[k]; ok && (!found || k < min) {
			min, found = k, true
		}
	}
	return min, found
}

func uniqueIDs(n int, id func(int) string, what string) error {
	var seen map[string]int
	if n > 16 {
		seen = make(map[string]int, n)
	}
	for i := 0; i < n; i++ {
		s := id(i)
		if s == "" {
			return fmt.Errorf("%w: %s %d has an empty id", ErrInvalidFrame, what, i)
		}
		if seen != nil {
			if j, ok := seen[s]; ok {
				return fmt.Errorf("%w: %s %d repeats id %q of %s %d", ErrInvalidFrame, what, i, s, what, j)
			}
			seen[s] = i
			continue
		}
		for j := 0; j < i; j++ {
			if id(j) == s {
				return fmt.Errorf("%w: %s %d repeats id %q of %s %d", ErrInvalidFrame, what, i, s, what, j)
			}
		}
	}
	return nil
}

// Apply applies the ops of d to f, in order. It first checks every op
// against the state the earlier ops of d would leave; if one cannot apply
// (unknown subgoal, duplicate subgoal or pending id, undefined status or
// role, a malformed message, dropping more messages than there are) it
// returns an error matching ErrInvalidOp naming the op, and f is
// unchanged. A delta that refers to certified results (ToolOutputResult,
// ReferResults) applies only with ApplyWith: Apply reports it with an error
// that matches ErrUnresolved too.
//
// Apply works in place: it appends to the slices of f and updates its maps,
// so its cost is that of the delta, not of the frame (amortized; appending
// may grow a slice's backing array as append does). f keeps references to
// the delta's byte slices; neither is mutated afterwards by this package.
// A nil or empty delta is a no-op. CanApply runs the same checks alone.
func (f *Frame) Apply(d *Delta) error {
	if err := f.CanApply(d); err != nil {
		return err
	}
	if d == nil {
		return nil
	}
	for i := range d.ops {
		f.apply(&d.ops[i])
	}
	return nil
}

// hasSubgoal reports whether subgoal id exists once the ops of d before
// index i are applied. It scans instead of building a set, so that checking
// a typical delta allocates nothing; deltas are short.
func (f *Frame) hasSubgoal(d *Delta, i int, id string) bool {
	for j := range f.Subgoals {
		if f.Subgoals[j].ID == id {
			return true
		}
	}
	for j := 0; j < i; j++ {
		if o := &d.ops[j]; o.kind == opAddSubgoal && o.s1 == id {
			return true
		}
	}
	return false
}

// hasPending reports whether call id is pending once the ops of d before
// index i are applied: the latest earlier op that touches id decides, else
// the frame does.
func (f *Frame) hasPending(d *Delta, i int, id string) bool {
	for j := i - 1; j >= 0; j-- {
		o := &d.ops[j]
		if o.s1 != id {
			continue
		}
		switch o.kind {
		case opAddPending:
			return true
		case opRemovePending, opToolOutput, opToolOutputRef:
			return false
		}
	}
	for j := range f.Pending {
		if f.Pending[j].CallID == id {
			return true
		}
	}
	return false
}

func opErr(i int, o *op, format string, args ...any) error {
	return fmt.Errorf("%w: op %d (%s): %s", ErrInvalidOp, i, o.kind, fmt.Sprintf(format, args...))
}

func (f *Frame) check(d *Delta) error {
	messages := uint64(len(f.Messages))
	for i := range d.ops {
		o := &d.ops[i]
		switch o.kind {
		case opSetObjective, opSet, opSetSealed, opDelete, opAppendScratch, opClearScratch:
		case opToolOutput:
			messages++ // and removes the call from pending if it is there
		case opAddSubgoal:
			if o.s1 == "" {
				return opErr(i, o, "empty subgoal id")
			}
			if f.hasSubgoal(d, i, o.s1) {
				return opErr(i, o, "subgoal %q already exists", o.s1)
			}
		case opSetSubgoalStatus:
			if !SubgoalStatus(o.aux).Valid() {
				return opErr(i, o, "unknown status %d for subgoal %q", o.aux, o.s1)
			}
			if !f.hasSubgoal(d, i, o.s1) {
				return opErr(i, o, "unknown subgoal %q", o.s1)
			}
		case opAppendMessage:
			messages++
			if o.ext == nil { // a version 1 message: only its role can be wrong
				if !Role(o.aux).Valid() {
					return opErr(i, o, "unknown role %d", o.aux)
				}
				continue
			}
			if o.hasRefs() {
				return unresolvedErr(i, o)
			}
			m := o.message()
			if why := m.check(); why != "" {
				return opErr(i, o, "%s", why)
			}
		case opToolOutputRef:
			return unresolvedErr(i, o)
		case opAddPending:
			if o.s1 == "" {
				return opErr(i, o, "empty call id")
			}
			if f.hasPending(d, i, o.s1) {
				return opErr(i, o, "call %q is already pending", o.s1)
			}
		case opRemovePending:
			if !f.hasPending(d, i, o.s1) {
				return opErr(i, o, "no pending call %q", o.s1)
			}
		case opDropMessages:
			if o.n > messages {
				return opErr(i, o, "cannot drop %d of %d messages", o.n, messages)
			}
			messages -= o.n
		case opReplaceFrame:
			if len(d.ops) != 1 {
				return opErr(i, o, "a replace_frame op must be its delta's only op (this delta has %d)", len(d.ops))
			}
			if _, err := DecodeFrame(o.b); err != nil {
				return opErr(i, o, "%v", err)
			}
		default:
			return opErr(i, o, "unknown op kind %d", uint8(o.kind))
		}
	}
	return nil
}

// apply applies one op already checked by check.
func (f *Frame) apply(o *op) {
	switch o.kind {
	case opSetObjective:
		f.Objective = o.s1
	case opAddSubgoal:
		f.Subgoals = append(f.Subgoals, Subgoal{ID: o.s1, Text: o.s2})
	case opSetSubgoalStatus:
		for i := range f.Subgoals {
			if f.Subgoals[i].ID == o.s1 {
				f.Subgoals[i].Status = SubgoalStatus(o.aux)
				break
			}
		}
	case opSet:
		if f.Memory == nil {
			f.Memory = make(map[string][]byte)
		}
		f.Memory[o.s1] = o.b
		f.unseal(o.s1)
	case opSetSealed:
		if f.Sealed == nil {
			f.Sealed = make(map[string][]byte)
		}
		f.Sealed[o.s1] = o.b
		delete(f.Memory, o.s1)
	case opDelete:
		delete(f.Memory, o.s1)
		f.unseal(o.s1)
	case opAppendScratch:
		f.Scratchpad = append(f.Scratchpad, o.b...)
	case opClearScratch:
		f.Scratchpad = nil
	case opAppendMessage:
		f.Messages = append(f.Messages, o.message())
	case opAddPending:
		f.Pending = append(f.Pending, Pending{CallID: o.s1, Tool: o.s2, Args: o.b, Key: o.s3})
	case opToolOutput:
		f.Messages = append(f.Messages, Message{Role: RoleTool, Content: o.s3, Tool: o.s2, CallID: o.s1})
		if o.s1 != "" {
			f.removePending(o.s1)
		}
	case opRemovePending:
		f.removePending(o.s1)
	case opDropMessages:
		n := int(o.n)
		clear(f.Messages[:n]) // let the dropped contents be collected
		f.Messages = f.Messages[n:]
		if len(f.Messages) == 0 {
			f.Messages = nil
		}
	case opReplaceFrame:
		// check decoded it: the same bytes decode the same way.
		if nf, err := DecodeFrame(o.b); err == nil {
			*f = *nf
		}
	}
}

// unseal removes key from Sealed, which is nil again once it is empty.
func (f *Frame) unseal(key string) {
	if f.Sealed == nil {
		return
	}
	delete(f.Sealed, key)
	if len(f.Sealed) == 0 {
		f.Sealed = nil
	}
}

func (f *Frame) removePending(id string) {
	for i := range f.Pending {
		if f.Pending[i].CallID == id {
			copy(f.Pending[i:], f.Pending[i+1:])
			f.Pending[len(f.Pending)-1] = Pending{}
			f.Pending = f.Pending[:len(f.Pending)-1]
			if len(f.Pending) == 0 {
				f.Pending = nil
			}
			return
		}
	}
}
