/**
 * The protocol's flows, without I/O: an action's call from its first
 * answer to its certified result, and a commit that survives a lost
 * answer. Each flow is a generator that yields effects (a request, the
 * tool to execute, the downstream to ask) and receives their results; the
 * client drives them.
 */

import { ActionFailed, AttemptLost, NotFound, ServerError } from "./errors.js";
import { GaveUp } from "./retry.js";
import { type Bytes, type Committed, type Obj, committed, getBytes, putBytes, sameDelta, seg, toBytes } from "./wire.js";

export interface Request {
  kind: "request";
  method: string;
  path: string;
  body?: Obj;
  /** Send again while the answer's status is "pending". */
  repeatPending?: boolean;
  /**
   * The outcome of an execution that succeeded: the client may hold it
   * back to ride on the atom's next request (the next call or the
   * commit), and answer it when that request is answered.
   */
  deferrable?: boolean;
}

export interface Execute {
  kind: "execute";
  key: string;
}

export interface Reconcile {
  kind: "reconcile";
  key: string;
  tool: string;
  call: number;
  fingerprint: string;
}

export type Effect = Request | Execute | Reconcile;

/** What execute gives back to a flow. */
export type ExecResult = { ok: true; value: Uint8Array } | { ok: false; error: unknown };

/**
 * What a reconcile function answers: the effect happened (with its
 * result: bytes for do, a JSON value for doJSON and tool), or the
 * downstream has no trace of it.
 */
export type Verdict<R = Bytes> = { happened: true; result: R } | { happened: false; reason?: string };

export const happened = <R>(result: R): Verdict<R> => ({ happened: true, result });
export const didNotHappen = (reason?: string): Verdict<never> => (reason === undefined ? { happened: false } : { happened: false, reason });

export function errorText(e: unknown): string {
  if (e instanceof Error) return e.message ? `${e.name}: ${e.message}` : e.name;
  return String(e);
}

export function resolution(v: Verdict): Obj {
  if (v.happened) {
    const body: Obj = {};
    putBytes(body, "result", v.result);
    return body;
  }
  return { failed: v.reason || "the downstream has no trace of the idempotency key", retry: true };
}

/**
 * Carries call n of the attempt at path to its certified result. known maps
 * idempotency keys to results this process executed whose certificate it
 * never saw acknowledged: such a key coming back in doubt is resolved with
 * it, and coming back to execute (an idempotent action) is reported with
 * it, so the effect is not asked for twice.
 */
export function* callFlow(path: string, n: number, tool: string, answer: Obj, known: Map<string, Uint8Array>): Generator<Effect, Uint8Array, any> {
  let raised: { error: unknown } | undefined;
  let r = answer;
  for (;;) {
    const status = r.status;
    const key = String(r.key ?? "");
    if (status === "done") {
      known.delete(key);
      return getBytes(r, "result") ?? new Uint8Array();
    }
    if (status === "failed") {
      known.delete(key);
      if (r.gave_up) {
        // The call's retry policy gave the action up (now, or in an
        // earlier process): the last execution's error, if this process
        // ran it, is the cause.
        throw new GaveUp(tool, key, n, String(r.error ?? ""), String(r.gave_up), Number(r.attempt ?? 0), raised?.error);
      }
      if (raised) throw raised.error;
      throw new ActionFailed(tool, key, n, String(r.error ?? ""));
    }
    if (status === "execute") {
      const outcome: Obj = {};
      const k = known.get(key);
      let deferrable = false;
      if (k !== undefined) putBytes(outcome, "result", k);
      else {
        const res: ExecResult = yield { kind: "execute", key };
        deferrable = res.ok;
        if (res.ok) {
          known.set(key, res.value);
          putBytes(outcome, "result", res.value);
        } else {
          // The tool threw: by the contract of execute its effect did not
          // happen. It is certified as failed; the error goes back.
          raised = { error: res.error };
          outcome.error = errorText(res.error);
        }
      }
      // A call with a retry policy: the outcome names its attempt.
      if (r.attempt) outcome.attempt = r.attempt;
      r = yield { kind: "request", method: "POST", path: `${path}/calls/${n}/outcome`, body: outcome, repeatPending: true, deferrable };
      continue;
    }
    if (status === "in_doubt") {
      const k = known.get(key);
      let body: Obj;
      if (k !== undefined) {
        body = {};
        putBytes(body, "result", k);
      } else {
        const v: Verdict = yield { kind: "reconcile", key, tool, call: n, fingerprint: String(r.fingerprint ?? "") };
        body = resolution(v);
      }
      r = yield { kind: "request", method: "POST", path: `${path}/calls/${n}/resolve`, body, repeatPending: true };
      continue;
    }
    throw new ServerError(200, "internal", `call ${n} answered an unknown status ${JSON.stringify(status)}`);
  }
}

/**
 * Commits the attempt at path. If the server no longer knows the attempt
 * (it restarted while the answer was on its way), the atom at seq is read
 * back: the commit landed if it holds the ops sent.
 */
export function* commitFlow(path: string, run: string, seq: number, ops: Obj[]): Generator<Effect, Committed, any> {
  try {
    const r: Obj = yield { kind: "request", method: "POST", path: `${path}/commit`, body: { delta: ops } };
    return committed(r);
  } catch (e) {
    if (!(e instanceof AttemptLost) || e.code !== "attempt_not_found" || seq === 0) throw e; // a branch (seq 0) has no seq to read back
    let rec: Obj;
    try {
      rec = yield { kind: "request", method: "GET", path: `/v1/runs/${seg(run)}/atoms/${seq}` };
    } catch (e2) {
      if (e2 instanceof NotFound) throw e;
      throw e2;
    }
    if (sameDelta(ops, (rec.delta as Obj[]) ?? [])) return { run, seq, head: String(rec.head) };
    throw e;
  }
}

export { toBytes };
