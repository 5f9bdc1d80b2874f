/**
 * A synchronous reviver for the JSON that LangGraph's JsonPlusSerializer
 * writes, for the values a chat agent's checkpoints hold: plain JSON, and
 * LangChain messages. It gives what the serializer's loadsTyped("json")
 * gives (a deep copy of the JSON, each message rebuilt by its class from
 * its kwargs, as @langchain/core's load does) without load's cost: load
 * stringifies each message again, walks it with a promise per field and
 * imports the whole of @langchain/core's import map on its first use
 * (900 messages: 350-440 ms, where JSON.parse takes 1.4 ms). Anything else
 * the serializer knows (lc:2 records other than undefined: Set, Map, Error, bytes;
 * secrets; escaped objects; other LangChain classes) answers SLOW, and the
 * caller asks the serializer.
 */

import * as messages from "@langchain/core/messages";

/** The answer of fastLoad for a value it does not revive itself. */
export const SLOW: unique symbol = Symbol("slow");

/** The message classes fastLoad rebuilds (id ["langchain_core", "messages", name]). */
const CLASSES = new Set([
  "AIMessage",
  "AIMessageChunk",
  "ChatMessage",
  "ChatMessageChunk",
  "FunctionMessage",
  "FunctionMessageChunk",
  "HumanMessage",
  "HumanMessageChunk",
  "RemoveMessage",
  "SystemMessage",
  "SystemMessageChunk",
  "ToolMessage",
  "ToolMessageChunk",
]);

type Ctor = new (fields: Record<string, unknown>) => object;

const aliasCache = new Map<Ctor, Record<string, string>>();

/** The class's lc_aliases along its prototype chain, inverted (as load's combineAliasesAndInvert). */
function invertedAliases(c: Ctor): Record<string, string> {
  let out = aliasCache.get(c);
  if (out) return out;
  const aliases: Record<string, string> = {};
  for (let cur: unknown = c; cur && (cur as { prototype?: unknown }).prototype; cur = Object.getPrototypeOf(cur)) {
    Object.assign(aliases, Reflect.get((cur as { prototype: object }).prototype, "lc_aliases"));
  }
  out = {};
  for (const [k, v] of Object.entries(aliases)) out[v] = k;
  aliasCache.set(c, out);
  return out;
}

/** @langchain/core's keyFromJson: the alias, or the key in camelCase. */
function keyFromJson(key: string, map: Record<string, string>): string {
  if (map[key]) return map[key];
  const trimmed = key.trim();
  if (!/[-_\s]/.test(trimmed)) return trimmed;
  return trimmed
    .replace(/[-_\s]+/g, "_")
    .toLowerCase()
    .replace(/_+([a-z0-9])/g, (_, ch: string) => ch.toUpperCase());
}

/** The serializer's record of undefined ({lc: 2, type: "undefined"}). */
function isUndefined(o: Record<string, unknown>): boolean {
  return o.lc === 2 && o.type === "undefined";
}

/**
 * A message's kwargs as load sees them, in place, or SLOW: the serializer
 * revives them bottom-up and gives load their JSON again, so an undefined
 * record drops its key (an object's) or becomes null (an array's item);
 * any other object with an lc, escaped or __proto__ key is left to it.
 */
function kwargs(v: unknown, depth: number): unknown {
  if (v === null || typeof v !== "object") return v;
  if (depth > 50) return SLOW;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const x = v[i];
      if (x !== null && typeof x === "object" && !Array.isArray(x) && isUndefined(x as Record<string, unknown>)) {
        v[i] = null;
        continue;
      }
      const y = kwargs(x, depth + 1);
      if (y === SLOW) return SLOW;
      v[i] = y;
    }
    return v;
  }
  const o = v as Record<string, unknown>;
  for (const k in o) {
    if (k === "lc" || k === "__lc_escaped__" || k === "__proto__") return SLOW;
    const x = o[k];
    if (x !== null && typeof x === "object" && !Array.isArray(x) && isUndefined(x as Record<string, unknown>)) {
      delete o[k];
      continue;
    }
    const y = kwargs(x, depth + 1);
    if (y === SLOW) return SLOW;
    o[k] = y;
  }
  return o;
}

/** v revived in place, or SLOW. */
function revive(v: unknown, depth: number): unknown {
  if (v === null || typeof v !== "object") return v;
  if (depth > 50) return SLOW;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const x = revive(v[i], depth + 1);
      if (x === SLOW) return SLOW;
      v[i] = x;
    }
    return v;
  }
  const o = v as Record<string, unknown>;
  if ("lc" in o) {
    if (isUndefined(o)) return undefined;
    const id = o.id;
    if (
      o.lc !== 1 ||
      o.type !== "constructor" ||
      !Array.isArray(id) ||
      id.length !== 3 ||
      id[0] !== "langchain_core" ||
      id[1] !== "messages" ||
      typeof id[2] !== "string" ||
      !CLASSES.has(id[2]) ||
      o.kwargs === null ||
      typeof o.kwargs !== "object" ||
      Array.isArray(o.kwargs) ||
      kwargs(o.kwargs, depth + 1) === SLOW
    ) {
      return SLOW;
    }
    const name = id[2];
    const C = (messages as unknown as Record<string, unknown>)[name];
    if (typeof C !== "function") return SLOW;
    const map = invertedAliases(C as Ctor);
    const fields: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(o.kwargs as Record<string, unknown>)) fields[keyFromJson(k, map)] = x;
    const m = new (C as Ctor)(fields);
    Object.defineProperty(m.constructor, "name", { value: name });
    return m;
  }
  for (const k in o) {
    if (k === "__lc_escaped__" || k === "__proto__") return SLOW;
    const x = revive(o[k], depth + 1);
    if (x === SLOW) return SLOW;
    o[k] = x;
  }
  return o;
}

/** text (JsonPlusSerializer's JSON) revived as its loadsTyped("json", text) would, or SLOW. */
export function fastLoad(text: string): unknown {
  return revive(JSON.parse(text), 0);
}
