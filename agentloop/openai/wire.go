package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/continuumdb/continuum/agentloop"
	"github.com/continuumdb/continuum/frame"
)

// The request body is written by hand, not by encoding/json, which
// compacts every embedded JSON value it is given: the objects this
// package copies in (PartJSON blocks, tools' Parameters) must reach the
// server as they are.

// encodeRequest returns the body of the chat completions request for req.
func (c *Client) encodeRequest(req *agentloop.Request) ([]byte, error) {
	w := &writer{b: make([]byte, 0, 1024)}
	w.lit(`{"model":`)
	w.str(c.opts.Model)
	w.lit(`,"messages":[`)
	for i := range req.Messages {
		if i > 0 {
			w.lit(",")
		}
		if err := w.message(&req.Messages[i]); err != nil {
			return nil, fmt.Errorf("openai: message %d (%v): %w", i, req.Messages[i].Role, err)
		}
	}
	w.lit("]")
	if len(req.Tools) > 0 {
		w.lit(`,"tools":[`)
		for i, t := range req.Tools {
			if i > 0 {
				w.lit(",")
			}
			w.lit(`{"type":"function","function":{"name":`)
			w.str(t.Name)
			if t.Description != "" {
				w.lit(`,"description":`)
				w.str(t.Description)
			}
			if len(t.Parameters) > 0 {
				if err := w.object(`,"parameters":`, t.Parameters); err != nil {
					return nil, fmt.Errorf("openai: tool %q: Parameters: %w", t.Name, err)
				}
			}
			w.lit("}}")
		}
		w.lit("]")
		if p := c.opts.ParallelToolCalls; p != nil {
			w.lit(`,"parallel_tool_calls":` + strconv.FormatBool(*p))
		}
	}
	if t := c.opts.Temperature; t != nil {
		w.lit(`,"temperature":` + strconv.FormatFloat(*t, 'g', -1, 64))
	}
	if s := c.opts.Seed; s != nil {
		w.lit(`,"seed":` + strconv.FormatInt(*s, 10))
	}
	if n := c.opts.MaxCompletionTokens; n > 0 {
		w.lit(`,"max_completion_tokens":` + strconv.Itoa(n))
	}
	w.lit("}")
	return w.b, nil
}

type writer struct{ b []byte }

func (w *writer) lit(s string) { w.b = append(w.b, s...) }

// str appends s as a JSON string. Unlike encoding/json it leaves <, > and
// & as they are; like it, it writes invalid UTF-8 as U+FFFD.
func (w *writer) str(s string) {
	const hex = "0123456789abcdef"
	b := append(w.b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	w.b = append(b, '"')
}

// object appends key and raw, which must be one JSON object, verbatim.
func (w *writer) object(key string, raw []byte) error {
	if !json.Valid(raw) {
		return errors.New("not valid JSON")
	}
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return errors.New("not a JSON object")
	}
	w.lit(key)
	w.b = append(w.b, raw...)
	return nil
}

func (w *writer) call(c frame.ToolCall) {
	w.lit(`{"id":`)
	w.str(c.ID)
	w.lit(`,"type":"function","function":{"name":`)
	w.str(c.Name)
	w.lit(`,"arguments":`)
	w.str(string(c.Arguments))
	w.lit("}}")
}

func (w *writer) message(m *frame.Message) error {
	var role string
	switch m.Role {
	case frame.RoleSystem, frame.RoleDeveloper, frame.RoleUser, frame.RoleAssistant, frame.RoleTool:
		role = m.Role.String()
	default:
		return fmt.Errorf("role %v has no chat completions form", m.Role)
	}
	w.lit(`{"role":`)
	w.str(role)
	var calls []frame.ToolCall
	calls = append(calls, m.ToolCalls...)
	var content []frame.Part
	for _, p := range m.Parts {
		switch {
		case p.Kind == frame.PartToolCall && m.Role == frame.RoleAssistant:
			calls = append(calls, p.Call)
		case p.Kind == frame.PartToolResult:
			return errors.New("a tool_result part (Anthropic's shape) has no chat completions form: record tool answers as RoleTool messages")
		default:
			content = append(content, p)
		}
	}
	if m.Role == frame.RoleAssistant && len(calls) == 0 && m.Tool != "" && m.CallID != "" {
		calls = append(calls, frame.ToolCall{ID: m.CallID, Name: m.Tool, Arguments: []byte("{}")})
	}
	w.lit(`,"content":`)
	switch {
	case len(content) > 0:
		w.lit("[")
		for i, p := range content {
			if i > 0 {
				w.lit(",")
			}
			switch p.Kind {
			case frame.PartText:
				w.lit(`{"type":"text","text":`)
				w.str(p.Text)
				w.lit("}")
			case frame.PartJSON:
				if err := w.object("", p.JSON); err != nil {
					return fmt.Errorf("a json part: %w", err)
				}
			default:
				return fmt.Errorf("a %v part has no chat completions form", p.Kind)
			}
		}
		w.lit("]")
	case m.Content == "" && len(calls) > 0:
		w.lit("null")
	default:
		w.str(m.Content)
	}
	if len(calls) > 0 {
		if m.Role != frame.RoleAssistant {
			return errors.New("tool calls on a message that is not the assistant's")
		}
		w.lit(`,"tool_calls":[`)
		for i, c := range calls {
			if i > 0 {
				w.lit(",")
			}
			w.call(c)
		}
		w.lit("]")
	}
	if m.Role == frame.RoleTool {
		if m.CallID == "" {
			return errors.New("a tool message without CallID: the API needs the id of the call it answers")
		}
		w.lit(`,"tool_call_id":`)
		w.str(m.CallID)
	}
	w.lit("}")
	return nil
}

// chatResponse is the part of a chat completion this package reads.
type chatResponse struct {
	Choices []struct {
		Message struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			Refusal   *string         `json:"refusal"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
}

// decodeResponse returns the assistant turn of a chat completion.
func decodeResponse(b []byte) (frame.Message, error) {
	var r chatResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return frame.Message{}, fmt.Errorf("the response is not a chat completion: %w", err)
	}
	if len(r.Choices) == 0 {
		return frame.Message{}, errors.New("the response has no choices")
	}
	cm := &r.Choices[0].Message
	if cm.Role != "" && cm.Role != "assistant" {
		return frame.Message{}, fmt.Errorf("the response's message has role %q, not assistant", cm.Role)
	}
	m := frame.Message{Role: frame.RoleAssistant}
	content := bytes.TrimSpace(cm.Content)
	switch {
	case len(content) == 0 || string(content) == "null":
	case content[0] == '"':
		if err := json.Unmarshal(content, &m.Content); err != nil {
			return frame.Message{}, fmt.Errorf("the message's content: %w", err)
		}
	case content[0] == '[':
		var parts []json.RawMessage
		if err := json.Unmarshal(content, &parts); err != nil {
			return frame.Message{}, fmt.Errorf("the message's content: %w", err)
		}
		for i, raw := range parts {
			var p struct {
				Type string  `json:"type"`
				Text *string `json:"text"`
			}
			if err := json.Unmarshal(raw, &p); err != nil {
				return frame.Message{}, fmt.Errorf("the message's content part %d: %w", i, err)
			}
			if p.Type == "text" && p.Text != nil && onlyKeys(raw, "type", "text") {
				m.Parts = append(m.Parts, frame.Part{Kind: frame.PartText, Text: *p.Text})
			} else {
				m.Parts = append(m.Parts, frame.Part{Kind: frame.PartJSON, JSON: bytes.Clone(raw)})
			}
		}
	default:
		return frame.Message{}, fmt.Errorf("the message's content is neither a string, a list nor null (%.20s)", content)
	}
	if m.Content == "" && len(m.Parts) == 0 && cm.Refusal != nil {
		m.Content = *cm.Refusal
	}
	for _, tc := range cm.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return frame.Message{}, fmt.Errorf("tool call %q is of type %q; only function calls are supported", tc.ID, tc.Type)
		}
		var args []byte
		if tc.Function.Arguments != "" {
			args = []byte(tc.Function.Arguments)
		}
		m.ToolCalls = append(m.ToolCalls, frame.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	return m, nil
}

// onlyKeys reports whether the JSON object raw has no key besides keys.
func onlyKeys(raw []byte, keys ...string) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return false
	}
	for k := range obj {
		found := false
		for _, want := range keys {
			if k == want {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
