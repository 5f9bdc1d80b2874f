/**
 * Waits, events and timers: a run waits, durably, for a named event (a
 * human's approval, a webhook) or for the clock, and is resumed once it
 * ended (the server's engine Run.Wait, Run.Sleep, DB.SendEvent, DB.Ready).
 *
 *     await run.wait("approval", { timeoutMs: 3_600_000 });  // durable when it resolves
 *     const w = await run.waitEnded();                        // or client.ready({ waitMs })
 *     await run.atom(async (atom) => {
 *       const w = await atom.waitOutcome();                   // the same until this atom commits
 *       if (w.outcome === "delivered" && json(w.event!.payload).approved) { ... }
 *     });
 *
 * Anyone whose token reaches the run with the write or the event right
 * sends the event, idempotently by its sender id:
 *
 *     await client.sendEvent("trip-1", "approval", { sender: "alice-7", payload: '{"approved": true}' });
 *
 * An event is delivered to one wait, once: sent before the wait, during
 * it, or while no server runs. A deadline ends the wait once, as a
 * timeout. The outcome stays the run's until an atom commits after it.
 */

import { type Request } from "./core.js";
import { type Bytes, type Obj, getBytes, putBytes, seg } from "./wire.js";

/** A long poll asks the server to hold a request this long at most (it takes up to its call wait, 20 s). */
export const longPollMs = 15_000;

export type WaitOutcome = "open" | "delivered" | "timed_out" | "cancelled";

/** An event sent to a run (engine.Event). */
export interface WaitEvent {
  run: string;
  name: string;
  sender: string;
  /** The run's last seq when it was sent. */
  seq: number;
  sent: Date;
  payload: Uint8Array;
}

/** A run's wait (engine.Wait), named by its run and the seq it follows. */
export interface Wait {
  run: string;
  seq: number;
  /** "" for a sleep. */
  name: string;
  declared: Date;
  deadline: Date | null;
  outcome: WaitOutcome;
  event: WaitEvent | null;
  ended: Date | null;
}

/** What sendEvent did: duplicate (nothing written), delivered (it ended the run's open wait of its name). */
export interface SendResult {
  duplicate: boolean;
  delivered: boolean;
}

export interface WaitOptions {
  /** Milliseconds from the server's clock now; or deadline. Neither: no deadline. */
  timeoutMs?: number;
  deadline?: Date | string;
  /** The seq the wait must follow (the run's last): SeqMismatch otherwise. */
  after?: number;
}

export interface SleepOptions {
  until?: Date | string;
  durationMs?: number;
  after?: number;
}

function rfc3339(t: Date | string): string {
  return typeof t === "string" ? t : t.toISOString();
}

function date(v: unknown): Date | null {
  return v == null ? null : new Date(String(v));
}

export function waitEvent(o: Obj): WaitEvent {
  return { run: String(o.run), name: String(o.name), sender: String(o.sender), seq: Number(o.seq), sent: new Date(String(o.sent)), payload: getBytes(o, "payload") ?? new Uint8Array() };
}

export function wait(o: Obj): Wait {
  return {
    run: String(o.run), seq: Number(o.seq), name: String(o.name ?? ""), declared: new Date(String(o.declared)), deadline: date(o.deadline),
    outcome: String(o.outcome) as WaitOutcome, event: o.event == null ? null : waitEvent(o.event as Obj), ended: date(o.ended),
  };
}

export function waitRequest(runPath: string, name: string, o: WaitOptions): Request {
  if (!name) throw new TypeError("a wait needs the name of the event it waits for (sleep waits for the clock)");
  if (o.timeoutMs !== undefined && o.deadline !== undefined) throw new TypeError("give timeoutMs or deadline, not both");
  const body: Obj = { name };
  if (o.timeoutMs !== undefined) body.timeout_ms = Math.max(0, Math.floor(o.timeoutMs));
  if (o.deadline !== undefined) body.deadline = rfc3339(o.deadline);
  if (o.after !== undefined) body.seq = o.after;
  return { kind: "request", method: "POST", path: `${runPath}/wait`, body };
}

export function sleepRequest(runPath: string, o: SleepOptions): Request {
  if ((o.until === undefined) === (o.durationMs === undefined)) throw new TypeError("give until or durationMs (one of them)");
  const body: Obj = {};
  if (o.until !== undefined) body.until = rfc3339(o.until);
  else body.duration_ms = Math.max(0, Math.floor(o.durationMs!));
  if (o.after !== undefined) body.seq = o.after;
  return { kind: "request", method: "POST", path: `${runPath}/sleep`, body };
}

export function eventRequest(run: string, name: string, sender: string, payload: Bytes): Request {
  if (!name || !sender) throw new TypeError("an event needs its name and its sender's id");
  const body: Obj = { name, sender };
  putBytes(body, "payload", payload);
  return { kind: "request", method: "POST", path: `/v1/runs/${seg(run)}/events`, body };
}

export function pollMs(ms: number): number {
  return Math.max(0, Math.floor(Math.min(ms, longPollMs)));
}

export function readyRequest(waitMs: number, max?: number): Request {
  let q = `?wait_ms=${pollMs(waitMs)}`;
  if (max !== undefined) q += `&max=${max}`;
  return { kind: "request", method: "GET", path: `/v1/ready${q}` };
}

export function sendResult(o: Obj): SendResult {
  return { duplicate: o.duplicate === true, delivered: o.delivered === true };
}
