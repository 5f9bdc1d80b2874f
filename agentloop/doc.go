// Package agentloop drives an engine run as a tool-calling LLM agent: the
// loop that every agent on CONTINUUM would otherwise write by hand, with
// the durability rules built in. It is optional: the engine does not
// import it, and it uses only the engine's public API.
//
// # Usage
//
//	llm, err := openai.New(openai.Options{Model: "gpt-4o-mini", APIKey: key})
//	loop := &agentloop.Loop{
//		Run:     run, // db.Run(ctx, "triage-42")
//		Model:   llm.Complete,
//		ModelID: llm.ID(),
//		Tools: map[string]agentloop.Tool{
//			"create_ticket": {Description: "...", Parameters: schema, Func: createTicket},
//		},
//		Reconcile: func(ctx context.Context, call frame.ToolCall, key string) ([]byte, bool, error) {
//			return tickets.Lookup(ctx, key) // did the call under key take effect?
//		},
//		Prompt: []frame.Message{
//			{Role: frame.RoleSystem, Content: "You triage bug reports."},
//			{Role: frame.RoleUser, Content: report},
//		},
//	}
//	status, answer, err := loop.Drive(ctx)
//
// After a crash the program opens the store, builds the same Loop and
// calls Drive again: it goes on from the step the crash caught, and ends
// with the frame a run that never crashed would have (given a model and
// tools that answer the same requests the same way). Package
// agentloop/openai is a ModelFunc for OpenAI-compatible chat-completions
// endpoints; examples/llmagent is a complete agent that is killed in the
// middle of a step and resumes.
//
// # A step
//
// Each step is one atom, seq n:
//
//  1. Begin. A seq a crash interrupted is begun again.
//  2. The model call, through Do as an idempotent action (tool ModelTool;
//     args: ModelID and a digest of the conversation and tools; default
//     key n/0). Its certificate holds the response, so the atom begun
//     again gets the same turn, with the same tool calls, without asking
//     the model twice.
//  3. Each tool call of the turn, in order, through Do (tool: its name;
//     args: the model's arguments; default keys n/1, n/2, ...; Idempotent
//     as the Tool declares). A certified call returns its result without
//     running again. A call in doubt goes to Reconcile, whose answer is
//     recorded (Atom.ResolveInDoubt) or which leads to the call being made
//     again under the same key (Atom.ResolveInDoubtFailed, then Do).
//  4. Commit of one delta: the prompt (first step only), the assistant's
//     turn (frame.Message with ToolCalls), one RoleTool message per call
//     (CallID: the call's id; IsError for an error), and what Extend adds.
//  5. A turn without tool calls is the answer: the run ends,
//     Run.End(StatusCompleted, its text).
//
// Where a crash falls, and what the next Drive does:
//
//   - before the model call's certificate: asks the model again (no tool
//     has acted on an answer nobody recorded);
//   - after it, or between tools: replays the certified answer and the
//     certified tool results, performs the calls not yet made, and
//     reconciles the one in doubt;
//   - before Commit: the same, every call certified: nothing runs again;
//   - after Commit, before End: ends the run with the committed answer.
//
// # Forks
//
// A fork of a run (engine.DB.Fork) driven by a Loop gets, at each step
// whose request (conversation, tools, ModelID) is its parent's, the
// parent's certified answer, and for each call the parent made at the
// same place with the same arguments, the parent's result: it follows its
// parent without asking the model or calling a tool again (I10) until
// something differs, a message the fork's own atoms added, another
// ModelID, other tools. From there the model is asked anew; a call its new
// answer repeats at the same place still does not run again.
//
// # Errors
//
// A tool's error is the tool's answer: a tool message with IsError, so that
// the model can react; see ToolFunc for Transient and ErrUnknownOutcome. A
// call of an unknown tool, or with arguments that are not JSON or that the
// ledger refuses, is answered the same way without running anything.
//
// A failed step (a model error or a turn the frame cannot hold, a
// Transient tool error, an Extend error) fails its atom, which keeps its
// seq and its certified calls, and is tried again per Retry; after
// Retry.Attempts failures in a row the run ends as failed, as it does at
// MaxSteps atoms, with the reason as its result. A call in doubt that
// Reconcile cannot settle (or a tool's ErrUnknownOutcome) is tried again
// the same way but never ends the run, which would leave it unsettled for
// good: Drive returns an error matching ErrUnsettled. Drive also returns,
// leaving the run active, when ctx is cancelled or the store fails.
//
// # Caveats
//
//   - Tool calls of one turn run one after the other: default keys number
//     the atom's calls in order.
//   - The model's response is stored twice, in its certificate and as the
//     frame's assistant message (the message is derived from the
//     response, not equal to it). A tool's result is stored once: its
//     RoleTool message's Content is the certified result byte for byte,
//     so the engine's Commit records it as a reference to the certificate
//     (frame.Delta.ReferResults); every read of the frame gives the text.
//   - Secrets: the model's arguments and the tools' results are in the
//     conversation, which is stored. A tool adds its credentials itself,
//     out of the model's sight.
//   - A model or tool that answers the same request differently after a
//     crash gives a different, equally valid run: convergence (I4) holds
//     for deterministic ones, and exactly-once effects (I3) for all.
//   - Retry counts tries within one Drive: a process that crashes and
//     restarts starts counting again.
//   - Change ModelID, Tools or Prompt between runs, not while one is in
//     flight: a step resumed with another request asks the model anew, and
//     the calls of its new answer take the default keys of the calls the
//     old answer made (a downstream that deduplicates by key would see one
//     key for two requests).
//   - The whole conversation goes to the model at each step; the loop
//     itself hashes only the messages a step adds (a resumed Drive hashes
//     the conversation once).
package agentloop
