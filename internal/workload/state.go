package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Sentinel errors. Callers test with errors.Is.
var (
	// ErrOutOfOrder is returned by State.Apply for an atom that does not
	// follow the state's last seq, or belongs to another run.
	ErrOutOfOrder = errors.New("workload: atom out of order")
	// ErrCorrupt is returned when an encoded delta or state cannot be
	// decoded; the wrapping error says what and where.
	ErrCorrupt = errors.New("workload: corrupt encoding")
)

// Message is one tool message of a run's transcript: the call the
// assistant made and the result it got.
type Message struct {
	Seq    uint64          `json:"seq"`
	Tool   string          `json:"tool"`
	Key    string          `json:"key"`
	Args   json.RawMessage `json:"args"`
	Result json.RawMessage `json:"result"`
}

// State is the whole accumulated state of one run, as a plain agent
// framework keeps it: objective, subgoals, a memory map, every thought, and
// the tool messages. It grows by about a kilobyte per atom, and Apply costs
// O(1) amortized whatever the history (thoughts are a list, not a string
// rebuilt at every atom).
// The zero State with Run set is the state before the first atom.
type State struct {
	Run       string            `json:"run"`
	Seq       uint64            `json:"seq"` // last applied atom; 0 before the first
	Objective string            `json:"objective"`
	Subgoals  []string          `json:"subgoals"`
	Memory    map[string]string `json:"memory"`
	Thoughts  []string          `json:"thoughts"` // every thought, in order
	Messages  []Message         `json:"messages"`
}

// NewState returns the empty state of run.
func NewState(run string) *State {
	return &State{Run: run, Memory: map[string]string{}}
}

// Apply adds atom a to the state. a must be the next atom of the same run
// (a.Seq == s.Seq+1); otherwise Apply returns an error matching
// ErrOutOfOrder and leaves s unchanged.
func (s *State) Apply(a Atom) error {
	if a.Run != s.Run {
		return fmt.Errorf("%w: atom of run %q applied to run %q", ErrOutOfOrder, a.Run, s.Run)
	}
	if a.Seq != s.Seq+1 {
		return fmt.Errorf("%w: run %q at seq %d got atom seq %d", ErrOutOfOrder, s.Run, s.Seq, a.Seq)
	}
	args, err := rawJSON(a.Args)
	if err != nil {
		return fmt.Errorf("workload: run %q seq %d: tool args: %w", a.Run, a.Seq, err)
	}
	result, err := rawJSON(a.Result)
	if err != nil {
		return fmt.Errorf("workload: run %q seq %d: tool result: %w", a.Run, a.Seq, err)
	}
	s.Seq = a.Seq
	if a.Objective != "" {
		s.Objective = a.Objective
	}
	if a.Subgoal != "" {
		s.Subgoals = append(s.Subgoals, a.Subgoal)
	}
	if s.Memory == nil {
		s.Memory = map[string]string{}
	}
	if a.MemKey != "" {
		s.Memory[a.MemKey] = string(a.MemVal)
	}
	s.Thoughts = append(s.Thoughts, a.Thought)
	s.Messages = append(s.Messages, Message{Seq: a.Seq, Tool: a.Tool, Key: a.Key, Args: args, Result: result})
	return nil
}

// rawJSON returns b as a RawMessage, or an error if b is not valid JSON
// (json.Marshal would fail on it later, far from the cause).
func rawJSON(b []byte) (json.RawMessage, error) {
	if len(b) == 0 {
		return json.RawMessage("null"), nil
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("%w: not valid JSON (%d bytes)", ErrCorrupt, len(b))
	}
	return json.RawMessage(b), nil
}

// Encode returns the state as JSON, the form snapshots and checkpoints
// store. The caller owns the returned slice.
func (s *State) Encode() ([]byte, error) { return marshal(s) }

// marshal is json.Marshal without HTML escaping, so that JSON text held in
// RawMessage fields (tool args and results) keeps its bytes through an
// encode/decode round trip.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// DecodeState parses what Encode returned.
func DecodeState(b []byte) (*State, error) {
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: state (%d bytes): %v", ErrCorrupt, len(b), err)
	}
	if s.Memory == nil {
		s.Memory = map[string]string{}
	}
	if uint64(len(s.Messages)) > s.Seq || uint64(len(s.Thoughts)) > s.Seq {
		return nil, fmt.Errorf("%w: state of run %q at seq %d holds %d messages and %d thoughts",
			ErrCorrupt, s.Run, s.Seq, len(s.Messages), len(s.Thoughts))
	}
	return &s, nil
}

// delta is the JSON form of one atom's change to a State.
type delta struct {
	Run       string          `json:"run"`
	Seq       uint64          `json:"seq"`
	Tool      string          `json:"tool"`
	Key       string          `json:"key"`
	Idem      bool            `json:"idem,omitempty"`
	Args      json.RawMessage `json:"args"`
	Result    json.RawMessage `json:"result"`
	Thought   string          `json:"thought"`
	MemKey    string          `json:"mem_key,omitempty"`
	MemVal    string          `json:"mem_val,omitempty"`
	Subgoal   string          `json:"subgoal,omitempty"`
	Objective string          `json:"objective,omitempty"`
}

// EncodeDelta returns the JSON delta of atom a (everything State.Apply
// needs). It fails if a.Args or a.Result is not valid JSON, or a string
// field is not valid UTF-8 (JSON would silently replace its bytes).
func EncodeDelta(a Atom) ([]byte, error) {
	for _, f := range []struct{ name, v string }{
		{"tool", a.Tool}, {"key", a.Key}, {"thought", a.Thought}, {"mem_key", a.MemKey},
		{"mem_val", string(a.MemVal)}, {"subgoal", a.Subgoal}, {"objective", a.Objective}, {"run", a.Run},
	} {
		if !utf8.ValidString(f.v) {
			return nil, fmt.Errorf("workload: run %q seq %d: %s is not valid UTF-8", a.Run, a.Seq, f.name)
		}
	}
	args, err := rawJSON(a.Args)
	if err != nil {
		return nil, fmt.Errorf("workload: run %q seq %d: tool args: %w", a.Run, a.Seq, err)
	}
	result, err := rawJSON(a.Result)
	if err != nil {
		return nil, fmt.Errorf("workload: run %q seq %d: tool result: %w", a.Run, a.Seq, err)
	}
	return marshal(delta{
		Run: a.Run, Seq: a.Seq, Tool: a.Tool, Key: a.Key, Idem: a.Idempotent,
		Args: args, Result: result, Thought: a.Thought, MemKey: a.MemKey,
		MemVal: string(a.MemVal), Subgoal: a.Subgoal, Objective: a.Objective,
	})
}

// DecodeDelta parses what EncodeDelta returned. Bad input returns an error
// matching ErrCorrupt, never a panic.
func DecodeDelta(b []byte) (Atom, error) {
	var d delta
	if err := json.Unmarshal(b, &d); err != nil {
		return Atom{}, fmt.Errorf("%w: delta (%d bytes): %v", ErrCorrupt, len(b), err)
	}
	a := Atom{
		Run: d.Run, Seq: d.Seq, Tool: d.Tool, Key: d.Key, Idempotent: d.Idem,
		Thought: d.Thought, MemKey: d.MemKey, Subgoal: d.Subgoal, Objective: d.Objective,
	}
	if len(d.Args) > 0 && string(d.Args) != "null" {
		a.Args = []byte(d.Args)
	}
	if len(d.Result) > 0 && string(d.Result) != "null" {
		a.Result = []byte(d.Result)
	}
	if d.MemVal != "" {
		a.MemVal = []byte(d.MemVal)
	}
	return a, nil
}
