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
	roleMax            = RoleTool
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
	}
	return "role(" + itoa(uint64(r)) + ")"
}

// Subgoal is one step of the objective. IDs are unique within a frame.
type Subgoal struct {
	ID     string
	Text   string
	Status SubgoalStatus
}

// Message is one turn of the conversation. Tool and CallID are set on tool
// messages (RoleTool) and on assistant messages that request a tool call.
type Message struct {
	Role    Role
	Content string
	Tool    string
	CallID  string
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
// working memory (Memory, Scratchpad), conversation (Messages) and in-flight
// actions (Pending).
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
	if f.Messages != nil {
		c.Messages = append([]Message(nil), f.Messages...)
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
// unique, statuses and roles defined, pending call ids non-empty and unique.
// DecodeFrame returns only valid frames, and Apply keeps a frame valid.
func (f *Frame) Validate() error {
	if err := uniqueIDs(len(f.Subgoals), func(i int) string { return f.Subgoals[i].ID }, "subgoal"); err != nil {
		return err
	}
	for i, s := range f.Subgoals {
		if !s.Status.Valid() {
			return fmt.Errorf("%w: subgoal %d (%q) has unknown status %d", ErrInvalidFrame, i, s.ID, uint8(s.Status))
		}
	}
	for i, m := range f.Messages {
		if !m.Role.Valid() {
			return fmt.Errorf("%w: message %d has unknown role %d", ErrInvalidFrame, i, uint8(m.Role))
		}
	}
	return uniqueIDs(len(f.Pending), func(i int) string { return f.Pending[i].CallID }, "pending call")
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
// role, dropping more messages than there are) it returns an error matching
// ErrInvalidOp naming the op, and f is unchanged.
//
// Apply works in place: it appends to the slices of f and updates its map,
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
		case opRemovePending, opToolOutput:
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
		case opSetObjective, opSet, opDelete, opAppendScratch, opClearScratch:
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
			if !Role(o.aux).Valid() {
				return opErr(i, o, "unknown role %d", o.aux)
			}
			messages++
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
	case opDelete:
		delete(f.Memory, o.s1)
	case opAppendScratch:
		f.Scratchpad = append(f.Scratchpad, o.b...)
	case opClearScratch:
		f.Scratchpad = nil
	case opAppendMessage:
		f.Messages = append(f.Messages, Message{Role: Role(o.aux), Content: o.s2, Tool: o.s3, CallID: o.s1})
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
