package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/zeebo/blake3"
)

// The local stand-ins for the outside world: a model that speaks the chat
// completions API, scripted, and the shop's results. Both are pure
// functions of what they are asked, so a run killed any number of times
// can be compared with one that never was.

// stubTurn is one scripted turn: content, and tool calls whose arguments
// are written with white space, as models write them (the agent must give
// them back byte for byte).
type stubTurn struct {
	content string
	calls   [][2]string // name, arguments
}

// stubScript is the model's answer to a conversation with n assistant
// turns in it, given the tool messages' contents so far (oldest first).
func stubScript(n int, results []string) (stubTurn, bool) {
	switch n {
	case 0:
		return stubTurn{content: "I'll check the stock first.", calls: [][2]string{
			{"lookup_stock", `{"item": "coffee beans"}`},
			{"lookup_stock", `{"item": "paper filters"}`},
		}}, true
	case 1:
		return stubTurn{calls: [][2]string{
			{"place_order", `{"item": "coffee beans", "quantity": 2}`},
			{"place_order", `{"item": "paper filters", "quantity": 1}`},
		}}, true
	case 2:
		body := fmt.Sprintf("Orders %s and %s are placed.", field(results, 2, "order_id"), field(results, 3, "order_id"))
		args, _ := json.Marshal(map[string]string{"to": "ops@example.com", "subject": "Office order", "body": body})
		return stubTurn{calls: [][2]string{{"send_email", string(args)}}}, true
	case 3:
		return stubTurn{content: fmt.Sprintf("Ordered 2 bags of coffee beans (%s) and 1 pack of paper filters (%s); the receipt went to ops@example.com (%s).",
			field(results, 2, "order_id"), field(results, 3, "order_id"), field(results, 4, "message_id"))}, true
	}
	return stubTurn{}, false
}

// field is the string field name of the JSON object results[i], or "?".
func field(results []string, i int, name string) string {
	if i >= len(results) {
		return "?"
	}
	var obj map[string]any
	if json.Unmarshal([]byte(results[i]), &obj) != nil {
		return "?"
	}
	if s, ok := obj[name].(string); ok {
		return s
	}
	return "?"
}

// stubRequest is what the stub reads of a request.
type stubRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string  `json:"role"`
		Content    *string `json:"content"`
		ToolCallID string  `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// stubModel serves POST /v1/chat/completions. Before answering it checks
// the conversation: each assistant turn in it must be the one it gave,
// arguments byte for byte, and each call answered by a tool message with
// its id; otherwise it answers 400, as a real API answers a malformed
// conversation. before, if set, runs first with the step the request is
// for (1 + the assistant turns in it) and returns false to send no answer
// (the harness killed the agent).
func stubModel(before func(step int) bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req stubRequest
		body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err == nil {
			err = json.Unmarshal(body, &req)
		}
		if err != nil {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "the body is not JSON: "+err.Error())
			return
		}
		n := 0
		var results []string
		pending := map[string]bool{}
		for i, m := range req.Messages {
			switch m.Role {
			case "assistant":
				want, ok := stubScript(n, results)
				if !ok || len(want.calls) != len(m.ToolCalls) {
					apiError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("messages[%d]: not the turn the model gave", i))
					return
				}
				for j, c := range m.ToolCalls {
					if c.ID != callID(n, j) || c.Function.Name != want.calls[j][0] || c.Function.Arguments != want.calls[j][1] {
						apiError(w, http.StatusBadRequest, "invalid_request_error",
							fmt.Sprintf("messages[%d].tool_calls[%d]: %s %q is not the call the model made", i, j, c.Function.Name, c.Function.Arguments))
						return
					}
					pending[c.ID] = true
				}
				n++
			case "tool":
				if !pending[m.ToolCallID] {
					apiError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("messages[%d]: tool_call_id %q answers no call", i, m.ToolCallID))
					return
				}
				delete(pending, m.ToolCallID)
				if m.Content != nil {
					results = append(results, *m.Content)
				}
			}
		}
		if len(pending) > 0 {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "a tool call has no answer")
			return
		}
		if before != nil && !before(n+1) {
			return
		}
		turn, ok := stubScript(n, results)
		if !ok {
			turn = stubTurn{content: "I have nothing more to do."}
		}
		msg := map[string]any{"role": "assistant", "content": nil}
		if turn.content != "" {
			msg["content"] = turn.content
		}
		finish := "stop"
		if len(turn.calls) > 0 {
			finish = "tool_calls"
			var tcs []map[string]any
			for j, c := range turn.calls {
				tcs = append(tcs, map[string]any{"id": callID(n, j), "type": "function",
					"function": map[string]string{"name": c[0], "arguments": c[1]}})
			}
			msg["tool_calls"] = tcs
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": fmt.Sprintf("chatcmpl-stub-%d", n+1), "object": "chat.completion", "created": 1767225600, "model": req.Model,
			"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]int{"prompt_tokens": len(body) / 4, "completion_tokens": 20, "total_tokens": len(body)/4 + 20},
		})
	}
}

func callID(turn, j int) string { return fmt.Sprintf("call_%d_%d", turn+1, j+1) }

func apiError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": nil}})
}

// shopResult is the shop's answer to a call that takes effect: a pure
// function of the call, its ids derived from the idempotency key.
func shopResult(tool string, args []byte, key string) []byte {
	var a map[string]any
	_ = json.Unmarshal(args, &a)
	sum := blake3.Sum256([]byte(key))
	id := fmt.Sprintf("%x", sum[:4])
	var out any
	switch tool {
	case "lookup_stock":
		item, _ := a["item"].(string)
		out = map[string]any{"item": item, "in_stock": 3 + len(item)%7}
	case "place_order":
		out = map[string]any{"order_id": "ord_" + id, "item": a["item"], "quantity": a["quantity"], "status": "placed"}
	case "send_email":
		out = map[string]any{"message_id": "msg_" + id, "to": a["to"], "status": "sent"}
	default:
		out = map[string]any{"error": "no such tool: " + strings.ToLower(tool)}
	}
	b, _ := json.Marshal(out)
	return b
}
