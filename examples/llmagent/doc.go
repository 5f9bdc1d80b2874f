// Command llmagent is an LLM agent on package agentloop, killed in the
// middle of its steps and resumed: it orders office supplies through a
// fake shop (check stock, place two orders, mail a receipt) with an
// OpenAI-compatible chat completions model.
//
//	go run ./examples/llmagent                       # the local stub model
//	OPENAI_API_KEY=sk-... go run ./examples/llmagent --url https://api.openai.com/v1 --model gpt-4o-mini
//	go run ./examples/llmagent --kill model:2,before:place_order#2,commit:4
//
// The program starts itself as the agent (a child process, with the
// hidden first argument "agent"), serves the shop (internal/downstream,
// which counts the effects of each idempotency key) and, without --url, a
// scripted model that speaks the chat completions API, in its own process:
// they outlive the agent, as the real world does. It kills the agent with
// SIGKILL at each kill point in turn, one per process, and starts it again
// until the run ends; then it lists the shop's effects (each must be 1)
// and verifies the store (engine.Verify, deep).
//
// agent.go is the agent itself, what a program on CONTINUUM writes: the
// tools as calls of the shop's API under the loop's idempotency keys
// (reporting agentloop.ErrUnknownOutcome when a request may have reached
// the shop), a Reconcile that asks the shop about a key, the model through
// package agentloop/openai. The rest is the harness (harness.go) and the
// stand-ins for the outside world (stub.go).
//
// The stub model answers a conversation by its state, deterministically,
// and refuses (HTTP 400) a conversation whose assistant turns are not the
// ones it gave, arguments byte for byte: so a run killed anywhere must end
// with the frame of a run never killed, which main_test.go checks at seeded
// kill points.
//
// It uses only the standard library and this module: it is a package of
// the core module, and `go test ./...` runs its test.
package main
