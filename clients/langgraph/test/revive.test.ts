// fastLoad against LangGraph's JsonPlusSerializer: for every value the
// serializer writes, fastLoad gives what its loadsTyped gives (the same
// classes, the same fields), or SLOW; it never gives something else.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { JsonPlusSerializer } from "@langchain/langgraph-checkpoint";
import {
  AIMessage,
  AIMessageChunk,
  ChatMessage,
  HumanMessage,
  RemoveMessage,
  SystemMessage,
  ToolMessage,
} from "@langchain/core/messages";
import { SLOW, fastLoad } from "../src/revive.js";

const serde = new JsonPlusSerializer();

async function text(v: unknown): Promise<string> {
  const [type, bytes] = await serde.dumpsTyped(v);
  assert.equal(type, "json");
  return Buffer.from(bytes).toString("utf8");
}

const revived: [string, unknown][] = [
  ["a number", 42],
  ["a string", "hi"],
  ["null", null],
  ["a checkpoint-like object", { v: 4, id: "1ef", ts: "2026", channel_versions: { messages: 3, "branch:to:agent": 2 }, versions_seen: { agent: { messages: 2 } } }],
  ["metadata", { source: "loop", step: 3, parents: {}, writes: null }],
  ["an AI message with a tool call", new AIMessage({ content: "x", id: "m1", name: "bot", tool_calls: [{ id: "c1", name: "search", args: { q: "turn 1", n: [1, 2] }, type: "tool_call" }] })],
  [
    "an AI message with usage and metadata",
    new AIMessage({
      content: [{ type: "text", text: "hello" }],
      usage_metadata: { input_tokens: 3, output_tokens: 4, total_tokens: 7 },
      response_metadata: { model: "m", finish_reason: "tool_calls" },
      additional_kwargs: { function_call: undefined, extra: { deep: [1, { a: "b" }] } },
    }),
  ],
  ["an AI message chunk", new AIMessageChunk({ content: "part", tool_call_chunks: [{ name: "s", args: "{}", id: "c", index: 0, type: "tool_call_chunk" }] })],
  ["a tool message", new ToolMessage({ content: "result", tool_call_id: "c1", name: "search", status: "error", artifact: { rows: [1, 2] } })],
  ["a human message with parts", new HumanMessage({ content: [{ type: "text", text: "q" }, { type: "image_url", image_url: { url: "data:x" } }], id: "h1" })],
  ["a system message", new SystemMessage("be brief")],
  ["a chat message", new ChatMessage({ content: "c", role: "critic" })],
  ["a remove message", new RemoveMessage({ id: "m1" })],
  ["messages in an object", { messages: [new HumanMessage("a"), new AIMessage("b")], n: 2 }],
  ["undefined in an array", [1, undefined]],
  ["undefined in an object", { a: undefined, b: 1 }],
  ["undefined fields of a message (an array's item, an object's key)", new AIMessage({ content: "x", additional_kwargs: { list: [1, undefined], gone: undefined } })],
  ["an array of messages", [new HumanMessage("a"), new ToolMessage({ content: "r", tool_call_id: "c" })]],
];

for (const [what, v] of revived) {
  test(`fastLoad revives ${what} as JsonPlusSerializer does`, async () => {
    const t = await text(v);
    const want = await serde.loadsTyped("json", t);
    const got = fastLoad(t);
    assert.notEqual(got, SLOW, `${what}: fastLoad answered SLOW`);
    assert.deepStrictEqual(got, want);
    if (want !== null && typeof want === "object" && !Array.isArray(want)) assert.equal(Object.getPrototypeOf(got), Object.getPrototypeOf(want));
  });
}

const slow: [string, unknown][] = [
  ["a Set", new Set([1, 2])],
  ["a Map in an object", { m: new Map([["a", 1]]) }],
  ["an Error", new Error("boom")],
  ["a message holding a message", new AIMessage({ content: "x", additional_kwargs: { inner: new HumanMessage("y") } })],
  ["an object with an lc key", { lc: 3, type: "x" }],
];

for (const [what, v] of slow) {
  test(`fastLoad leaves ${what} to the serializer`, async () => {
    assert.equal(fastLoad(await text(v)), SLOW);
  });
}

test("fastLoad leaves __proto__ keys and escaped objects to the serializer", () => {
  assert.equal(fastLoad('{"a": {"__proto__": {"x": 1}}}'), SLOW);
  assert.equal(fastLoad('{"a": {"__lc_escaped__": {"lc": 1}}}'), SLOW);
  const m = '{"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessage"],"kwargs":{"content":"q","additional_kwargs":{"x":{"__lc_escaped__":{"lc":1}}}}}';
  assert.equal(fastLoad(m), SLOW);
  assert.equal(fastLoad('{"lc":1,"type":"constructor","id":["langchain_core","prompts","PromptTemplate"],"kwargs":{}}'), SLOW);
  assert.equal(fastLoad('{"lc":1,"type":"constructor","id":["langchain_core","messages","toString"],"kwargs":{}}'), SLOW);
  assert.equal(fastLoad('{"lc":1,"type":"secret","id":["OPENAI_API_KEY"]}'), SLOW);
});
