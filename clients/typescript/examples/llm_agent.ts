/**
 * An LLM tool-calling agent, durable with CONTINUUM. Each turn is one
 * atom: the model call and the tool calls it asks for, then the messages
 * appended to the run's frame. Kill it at any point and start it again: it
 * resumes at its turn; the model's answer of that turn is replayed from
 * the ledger (never sampled again), a completed tool call is not made
 * again, and a booking whose outcome the crash hid is looked up with its
 * idempotency key instead of being made twice.
 *
 *     continuumd --store ./agent-store &
 *     node dist/examples/stub_llm.js 8089 &        # or any OpenAI-style endpoint
 *     CONTINUUMD_SOCKET=./agent-store.sock LLM_URL=http://127.0.0.1:8089 node dist/examples/llm_agent.js trip-1
 *
 * Booking charges a card and cannot be undone, so the agent asks a human
 * first: the turn whose model answer calls book_flight records the call and
 * commits, then the run waits, durably, for the event "approval:<call id>"
 * (APPROVAL_TIMEOUT_MS, default an hour). It prints "WAITING <run> <flight>
 * <event>" and may be killed: started again, it waits on. An approval
 * ({"approved": true}, posted by anyone whose token reaches the run with
 * the event right) books once; a denial or a timeout ends the run without
 * booking.
 *
 * It prints "ANSWER <text>" at the end.
 */

import * as c from "../src/index.js";

const LLM_URL = process.env.LLM_URL ?? "http://127.0.0.1:8089";
const WORLD_URL = process.env.WORLD_URL ?? LLM_URL;
const MODEL = process.env.LLM_MODEL ?? "stub";
const APPROVAL_TIMEOUT_MS = Number(process.env.APPROVAL_TIMEOUT_MS ?? 3_600_000);
/** Tools whose effect cannot be undone: a human approves each call first. */
const NEEDS_APPROVAL = new Set(["book_flight"]);
const approvalEvent = (callId: string) => `approval:${callId}`;

const TOOLS = [
  { type: "function", function: { name: "search_flights", description: "Find flights between two airports.", parameters: { type: "object", properties: { from: { type: "string" }, to: { type: "string" } }, required: ["from", "to"] } } },
  { type: "function", function: { name: "book_flight", description: "Book a flight (charges the card).", parameters: { type: "object", properties: { flight: { type: "string" } }, required: ["flight"] } } },
  { type: "function", function: { name: "send_email", description: "Send an email.", parameters: { type: "object", properties: { to: { type: "string" }, body: { type: "string" } }, required: ["to", "body"] } } },
];

type Obj = Record<string, any>;

/** One request with built-in fetch; undefined for a 404. */
async function httpJSON(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<any> {
  const res = await fetch(base + path, { method, headers: { "Content-Type": "application/json", ...headers }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  if (res.status === 404) return undefined;
  if (res.status !== 200) throw new Error(`${method} ${path}: HTTP ${res.status}`);
  return res.json();
}

/** A reconcile function: does the world hold an effect under the key? */
const lookup = (path: string) => async (key: string) => {
  const found = await httpJSON(WORLD_URL, "GET", `${path}?key=${encodeURIComponent(key)}`);
  return found === undefined ? c.didNotHappen() : c.happened(found);
};

const searchFlights = c.tool("search_flights", (from: string, to: string) => httpJSON(WORLD_URL, "POST", "/flights/search", { from, to }), { idempotent: true });
const bookFlight = c.tool("book_flight", (flight: string) =>
  httpJSON(WORLD_URL, "POST", "/flights/book", { flight }, { "Idempotency-Key": c.idempotencyKey() }), { reconcile: lookup("/flights/bookings") });
const sendEmail = c.tool("send_email", (to: string, body: string) =>
  httpJSON(WORLD_URL, "POST", "/mail/send", { to, body }, { "Idempotency-Key": c.idempotencyKey() }), { reconcile: lookup("/mail/sent") });

function callTool(name: string, args: Obj): Promise<unknown> {
  switch (name) {
    case "search_flights": return searchFlights(args.from, args.to);
    case "book_flight": return bookFlight(args.flight);
    case "send_email": return sendEmail(args.to, args.body);
  }
  return Promise.resolve({ error: `no tool ${name}` });
}

/** The frame's conversation as the chat API takes it: the frame's messages have its shape (tool calls, tool results). */
function openaiMessages(state: c.State): Obj[] {
  return state.messages.map((m) => {
    if (m.role === "tool") return { role: "tool", tool_call_id: m.callId, content: m.content };
    if (m.toolCalls?.length) {
      return {
        role: "assistant", content: m.content || null,
        tool_calls: m.toolCalls.map((tc) => ({ id: tc.id, type: "function", function: { name: tc.name, arguments: JSON.stringify(tc.arguments ?? {}) } })),
      };
    }
    return { role: m.role, content: m.content };
  });
}

/**
 * The turn after the wait: book if a human approved, else end without
 * booking. The wait's outcome is the run's until this atom commits, so a
 * crash here finds the same answer again (and the booking, a durable call,
 * is made once).
 */
async function resumeAfterApproval(atom: c.Atom, pending: Obj): Promise<void> {
  const w = await atom.waitOutcome();
  atom.delta.delete("awaiting_approval");
  let ev: any = null;
  if (w.outcome === "delivered" && w.event) {
    try {
      ev = JSON.parse(new TextDecoder().decode(w.event.payload));
    } catch {
      ev = null;
    }
  }
  if (ev && ev.approved === true) {
    atom.delta.set("approval", "approved");
    const result = await callTool(pending.tool, pending.arguments);
    atom.delta.appendMessage("tool", JSON.stringify(result), pending.tool, pending.call_id);
    return;
  }
  const reason = w.outcome === "delivered" ? `denied by ${w.event?.sender}` : w.outcome.replace("_", " ");
  atom.delta.set("approval", w.outcome === "delivered" ? "denied" : w.outcome)
    .appendMessage("tool", JSON.stringify({ error: `not approved: ${reason}` }), pending.tool, pending.call_id)
    .set("answer", `Not booked: the booking of ${pending.arguments?.flight} was not approved (${reason}).`);
}

async function turn(run: c.Run, atom: c.Atom): Promise<void> {
  const state = await run.state();
  await atom.ready(); // its seq is known once begun
  const pending = c.json(state, "awaiting_approval") as Obj | undefined;
  if (pending) return resumeAfterApproval(atom, pending);
  if (atom.seq === 1) {
    atom.delta.setObjective("book a flight from Paris to Tokyo and mail the confirmation")
      .appendMessage("system", "You are a travel agent. Use the tools.")
      .appendMessage("user", "Book me the cheapest flight CDG to NRT and mail me the confirmation.");
    return;
  }
  const messages = openaiMessages(state);
  const resp = await atom.doJSON<Obj>("llm.chat", () => httpJSON(LLM_URL, "POST", "/v1/chat/completions", { model: MODEL, messages, tools: TOOLS }),
    { args: { model: MODEL, turn: atom.seq }, idempotent: true });
  const msg = resp.choices[0].message;
  const calls: Obj[] = msg.tool_calls ?? [];
  if (calls.length === 0) {
    atom.delta.appendMessage("assistant", msg.content ?? "").set("answer", msg.content ?? "");
    return;
  }
  atom.delta.appendMessage("assistant", msg.content ?? "", undefined, undefined, {
    toolCalls: calls.map((tc) => ({ id: tc.id, name: tc.function.name, arguments: JSON.parse(tc.function.arguments || "{}") })),
  });
  for (const tc of calls) {
    const args = JSON.parse(tc.function.arguments || "{}");
    if (NEEDS_APPROVAL.has(tc.function.name)) {
      // Not now: this atom commits the call, and the run waits for a human's answer.
      atom.delta.setJSON("awaiting_approval", { call_id: tc.id, tool: tc.function.name, arguments: args });
      return;
    }
    const result = await callTool(tc.function.name, args);
    atom.delta.appendMessage("tool", JSON.stringify(result), tc.function.name, tc.id);
  }
}

const client = c.Client.fromEnv();
const run = await client.run(process.argv[2] ?? "trip-1");
let answer: string | undefined;
let state: c.State;
while ((answer = c.text((state = await run.state()), "answer")) === undefined) {
  const pending = c.json(state, "awaiting_approval") as Obj | undefined;
  if (pending) {
    // The run waits durably after the atom that asked. After a restart the
    // wait is there already (ended, maybe, and the turn after it
    // interrupted: step takes it over).
    let w = (await run.currentWait()) ?? (await run.wait(approvalEvent(pending.call_id), { timeoutMs: APPROVAL_TIMEOUT_MS }));
    if (w.outcome === "open") {
      console.log(`WAITING ${run.id} ${pending.arguments?.flight} ${approvalEvent(pending.call_id)}`);
      for (let e = w; e.outcome === "open"; ) {
        const next = await run.waitEnded();
        if (next === null) break; // no wait after the last atom: the next turn says why
        w = e = next;
      }
    }
    console.log(`APPROVAL ${w.outcome}`);
  }
  // takeover: this process is the run's only worker; after a crash it takes the run back at once.
  await run.step((atom) => turn(run, atom), { takeover: true });
  console.log(`TURN ${(await run.info()).lastSeq}`);
}
if (c.text(state!, "approval") !== undefined && c.text(state!, "approval") !== "approved") {
  // Not approved: the run ends here, without the booking.
  await run.end("cancelled", answer).catch((e) => {
    if (!(e instanceof c.RunEnded)) throw e; // ended before a crash
  });
}
console.log(`ANSWER ${answer}`);
client.close();
