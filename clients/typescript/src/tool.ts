/** Durable tool calls, and the atom a block of code runs in. */

import { AsyncLocalStorage } from "node:async_hooks";
import type { Atom, DoJSONOptions } from "./client.js";
import type { Verdict } from "./core.js";
import { NoAtom } from "./errors.js";

/** The atom of the innermost run.atom(fn). */
export const current = new AsyncLocalStorage<Atom>();
const keys = new AsyncLocalStorage<string>();

/** The atom the calling code runs in; NoAtom outside one. */
export function currentAtom(): Atom {
  const a = current.getStore();
  if (!a) throw new NoAtom("a durable tool was called outside an atom: call it inside run.atom(async (atom) => ...)");
  return a;
}

/** The idempotency key of the durable tool executing now: pass it downstream. */
export function idempotencyKey(): string {
  const k = keys.getStore();
  if (k === undefined) throw new NoAtom("idempotencyKey() is for the body of a tool() function while it executes");
  return k;
}

export interface ToolOptions {
  idempotent?: boolean;
  /** Settles an in-doubt call: happened(result) or didNotHappen(). */
  reconcile?: (key: string) => Verdict<unknown> | Promise<Verdict<unknown>>;
  redact?: string[];
  redactResult?: string[];
}

/**
 * Makes fn a durable tool call, in the spirit of DBOS's @DBOS.step and
 * Restate's ctx.run:
 *
 *     const charge = tool("billing.charge", async (customer: string, cents: number) =>
 *       billing.charge(customer, cents, { idempotencyKey: idempotencyKey() }));
 *     await run.atom(async () => { await charge("c1", 500); });
 *
 * Called inside an atom, fn runs as the action `name` whose args are its
 * arguments (a JSON array) and whose result is its return value (stored as
 * JSON): at most once, its certified result returned on every later call.
 */
export function tool<A extends unknown[], R>(name: string, fn: (...args: A) => R | Promise<R>, o: ToolOptions = {}): (...args: A) => Promise<Awaited<R>> {
  return async (...args: A): Promise<Awaited<R>> => {
    const atom = currentAtom();
    JSON.stringify(args); // fails here, not in the ledger, for args that are not JSON (BigInt, cycles)
    const opts: DoJSONOptions = { args, idempotent: o.idempotent ?? false };
    if (o.reconcile) opts.reconcile = o.reconcile;
    if (o.redact) opts.redact = o.redact;
    if (o.redactResult) opts.redactResult = o.redactResult;
    const out: unknown = await atom.doJSON(name, (key) => keys.run(key, () => fn(...args)), opts);
    return out as Awaited<R>;
  };
}
