package frame

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// check returns why m breaks a rule of Message and Part, or "" if it is
// well formed. The rules keep a message meaningful in both APIs it maps to,
// and make sure that everything it holds survives encoding: a field that a
// part's kind does not carry is an error, not silently lost, so a frame
// rebuilt from the log always equals the live one. A message without
// tool calls, parts or IsError costs one comparison.
func (m *Message) check() string {
	if !m.Role.Valid() {
		return "unknown role " + itoa(uint64(m.Role))
	}
	if len(m.ToolCalls) == 0 && len(m.Parts) == 0 && !m.IsError {
		return ""
	}
	if m.IsError && m.Role != RoleTool {
		return "IsError on a message of role " + m.Role.String() + ": only tool messages carry it (a tool_result part has its own)"
	}
	if len(m.ToolCalls) > 0 && m.Role != RoleAssistant {
		return "tool calls on a message of role " + m.Role.String() + ": only assistant messages request them"
	}
	if m.Content != "" && len(m.Parts) > 0 {
		return "both Content and Parts: the content is one text or a list of parts, not both"
	}
	for j := range m.ToolCalls {
		if why := checkCall(&m.ToolCalls[j]); why != "" {
			return fmt.Sprintf("tool call %d: %s", j, why)
		}
	}
	partCalls := 0
	for j := range m.Parts {
		p := &m.Parts[j]
		if why := m.checkPart(p); why != "" {
			return fmt.Sprintf("part %d (%s): %s", j, p.Kind, why)
		}
		if p.Kind == PartToolCall {
			partCalls++
		}
	}
	if partCalls > 0 && len(m.ToolCalls) > 0 {
		return "tool calls both in ToolCalls and in parts: use one or the other"
	}
	if len(m.ToolCalls) > 1 {
		if i, j := firstRepeat(len(m.ToolCalls), func(i int) string { return m.ToolCalls[i].ID }); i >= 0 {
			return fmt.Sprintf("tool call %d repeats id %q of tool call %d", i, m.ToolCalls[i].ID, j)
		}
	}
	if partCalls > 1 {
		var idx []int
		for j := range m.Parts {
			if m.Parts[j].Kind == PartToolCall {
				idx = append(idx, j)
			}
		}
		if i, j := firstRepeat(len(idx), func(i int) string { return m.Parts[idx[i]].Call.ID }); i >= 0 {
			return fmt.Sprintf("part %d repeats tool call id %q of part %d", idx[i], m.Parts[idx[i]].Call.ID, idx[j])
		}
	}
	return ""
}

// checkPart returns why p cannot be a part of m, or "".
func (m *Message) checkPart(p *Part) string {
	callSet := p.Call.ID != "" || p.Call.Name != "" || len(p.Call.Arguments) > 0
	switch p.Kind {
	case PartText:
		switch {
		case callSet:
			return "sets Call, which only a tool_call part carries"
		case p.CallID != "":
			return "sets CallID, which only a tool_result part carries"
		case p.IsError:
			return "sets IsError, which only a tool_result part carries"
		case len(p.JSON) > 0:
			return "sets JSON, which only tool_result and json parts carry"
		}
	case PartToolCall:
		switch {
		case m.Role != RoleAssistant:
			return "in a message of role " + m.Role.String() + ": only assistant messages request tool calls"
		case p.Text != "":
			return "sets Text, which a tool_call part does not carry"
		case p.CallID != "":
			return "sets CallID, which only a tool_result part carries (the call's id is Call.ID)"
		case p.IsError:
			return "sets IsError, which only a tool_result part carries"
		case len(p.JSON) > 0:
			return "sets JSON, which only tool_result and json parts carry"
		}
		return checkCall(&p.Call)
	case PartToolResult:
		switch {
		case m.Role != RoleUser && m.Role != RoleTool:
			return "in a message of role " + m.Role.String() + ": tool results go in user or tool messages"
		case p.CallID == "":
			return "empty CallID: a tool result names the call it answers"
		case callSet:
			return "sets Call, which only a tool_call part carries"
		case p.Text != "" && len(p.JSON) > 0:
			return "sets both Text and JSON: the result is one text or a JSON array of blocks"
		case len(p.JSON) > 0:
			return checkJSON(p.JSON, '[', "JSON (the result's blocks)", "a JSON array")
		}
	case PartJSON:
		switch {
		case p.Text != "":
			return "sets Text, which a json part does not carry (it is in the JSON)"
		case callSet:
			return "sets Call, which only a tool_call part carries"
		case p.CallID != "":
			return "sets CallID, which only a tool_result part carries"
		case p.IsError:
			return "sets IsError, which only a tool_result part carries"
		case len(p.JSON) == 0:
			return "empty JSON: a json part holds its block as a JSON object"
		}
		return checkJSON(p.JSON, '{', "JSON", "a JSON object")
	default:
		return "unknown part kind " + itoa(uint64(p.Kind))
	}
	return ""
}

// checkCall returns why c is not a valid tool call, or "".
func checkCall(c *ToolCall) string {
	if c.ID == "" {
		return "empty id"
	}
	if c.Name == "" {
		return fmt.Sprintf("call %q has an empty name", c.ID)
	}
	if len(c.Arguments) > 0 {
		if why := checkJSON(c.Arguments, 0, "arguments", "JSON"); why != "" {
			return fmt.Sprintf("call %q: %s", c.ID, why)
		}
	}
	return ""
}

// checkJSON returns why b is not valid JSON whose first byte (after white
// space) is open (0: any value), or "". what names the field, shape what
// it must be.
func checkJSON(b []byte, open byte, what, shape string) string {
	if !validJSON(b) {
		// The error path only: find where the syntax breaks.
		var raw json.RawMessage
		err := json.Unmarshal(b, &raw)
		if se, ok := err.(*json.SyntaxError); ok {
			return fmt.Sprintf("%s not valid JSON: %v (at byte %d of %d)", what, se, se.Offset, len(b))
		}
		return fmt.Sprintf("%s not valid JSON: %v", what, err)
	}
	if open != 0 {
		if t := bytes.TrimLeft(b, " \t\r\n"); t[0] != open {
			return fmt.Sprintf("%s is not %s (it begins with %q)", what, shape, t[0])
		}
	}
	return ""
}

// firstRepeat returns the first i whose id equals that of an earlier j,
// and j; or -1, -1. It builds a set only for long lists.
func firstRepeat(n int, id func(int) string) (int, int) {
	if n > 16 {
		seen := make(map[string]int, n)
		for i := 0; i < n; i++ {
			if j, ok := seen[id(i)]; ok {
				return i, j
			}
			seen[id(i)] = i
		}
		return -1, -1
	}
	for i := 1; i < n; i++ {
		for j := 0; j < i; j++ {
			if id(i) == id(j) {
				return i, j
			}
		}
	}
	return -1, -1
}

// needsV2 reports whether m holds anything the version 1 encoding cannot.
func (m *Message) needsV2() bool {
	return m.Role > roleMaxV1 || m.IsError || len(m.ToolCalls) > 0 || len(m.Parts) > 0
}

// cloneBlocks gives m its own copies of its tool calls and parts and of
// their byte slices (strings are immutable and shared), with no spare
// capacity that an append could share; empty lists become nil, as they
// decode.
func (m *Message) cloneBlocks() {
	if len(m.ToolCalls) == 0 {
		m.ToolCalls = nil
	} else {
		m.ToolCalls = slices.Clip(append([]ToolCall(nil), m.ToolCalls...))
		for i := range m.ToolCalls {
			m.ToolCalls[i].Arguments = cloneNonEmpty(m.ToolCalls[i].Arguments)
		}
	}
	if len(m.Parts) == 0 {
		m.Parts = nil
	} else {
		m.Parts = slices.Clip(append([]Part(nil), m.Parts...))
		for i := range m.Parts {
			p := &m.Parts[i]
			p.Call.Arguments = cloneNonEmpty(p.Call.Arguments)
			p.JSON = cloneNonEmpty(p.JSON)
		}
	}
}
