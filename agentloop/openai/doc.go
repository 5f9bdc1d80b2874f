// Package openai is an agentloop.ModelFunc for OpenAI's chat completions
// API and the many servers that speak it (vLLM, llama.cpp's server,
// Ollama, LiteLLM, OpenRouter, Azure OpenAI's v1 endpoint). It uses only
// the standard library: linking it adds no dependency.
//
//	c, err := openai.New(openai.Options{
//		BaseURL: "https://api.openai.com/v1", // the default
//		APIKey:  os.Getenv("OPENAI_API_KEY"),
//		Model:   "gpt-4o-mini",
//	})
//	loop := &agentloop.Loop{Run: run, Model: c.Complete, ModelID: c.ID(), ...}
//
// # What is sent
//
// POST {BaseURL}/chat/completions with the conversation and the tools,
// non-streaming; the request's idempotency key in an Idempotency-Key
// header (servers that do not know it ignore it). Each frame.Message maps
// as frame's package documentation describes:
//
//	role             system, developer, user, assistant, tool
//	Content          content (a string; null for an assistant turn of calls only)
//	Parts            content as a list: PartText as {"type":"text"}, PartJSON
//	                 verbatim (image_url, input_audio, file, refusal); an
//	                 assistant's PartToolCall parts as tool_calls
//	ToolCalls        tool_calls: {id, type "function", function {name, arguments}}
//	CallID           tool_call_id (tool messages)
//	Tool, CallID     of an assistant turn without ToolCalls (the older way to
//	                 name one call): one tool call with arguments "{}"
//
// A tool message's IsError has no field in this API: the content says it.
// PartToolResult parts (Anthropic's tool_result blocks) cannot be sent:
// Complete refuses them rather than drop them.
//
// # What comes back
//
// The first choice's message: content (a string, null, or a list of
// parts: text parts as PartText, others verbatim as PartJSON) and
// tool_calls. A refusal with no content becomes the content. Tool call
// arguments are kept byte for byte as the server wrote them, and sent
// back so: JSON objects given verbatim (a PartJSON, a tool's Parameters)
// are copied into the request unchanged, not re-encoded.
//
// # Errors
//
// A response other than 2xx is an *APIError with the status, the API's
// error type, code and message, and Retry-After. agentloop retries a
// failed model call per its Retry policy, whatever the error.
//
// # Caveats
//
//   - Only function tools; no streaming, no n > 1, no audio output.
//   - Usage, finish_reason and the response id are not returned: a
//     frame.Message has no place for them.
package openai
