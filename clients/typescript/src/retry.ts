/**
 * Durable retries of an action: the policy a call carries (DoOptions.retry)
 * and the error of an action its policy gave up.
 */

import { ActionFailed } from "./errors.js";

/**
 * How the server retries an action whose execution fails (the engine's
 * ledger.RetryPolicy): after a failed execution it waits the backoff and
 * has execute run again, under the same idempotency key, until it succeeds
 * or the policy gives the action up (GaveUp). The attempts and the schedule
 * are durable: a restart of the server or of the client goes on with them.
 * Times are in milliseconds. Every field is part of the action's identity:
 * compute them the same way in every process.
 */
export interface RetryPolicy {
  /** Attempts, the first included (1: no retry; 0 or absent: no bound, then deadlineMs is required). */
  maxAttempts?: number;
  /** The wait after the first failed attempt. */
  initialMs?: number;
  /** Scales each further wait, within [1, 1000]; 0 or absent means 2. */
  multiplier?: number;
  /** Caps a wait (0 or absent: no cap). */
  maxMs?: number;
  /** No attempt starts this long or more after the first began (0 or absent: no deadline). */
  deadlineMs?: number;
}

/** The wire form of a retry policy. */
export function retryBody(p: RetryPolicy): Record<string, number> {
  return {
    max_attempts: p.maxAttempts ?? 0,
    initial_ms: Math.round(p.initialMs ?? 0),
    multiplier: p.multiplier ?? 0,
    max_ms: Math.round(p.maxMs ?? 0),
    deadline_ms: Math.round(p.deadlineMs ?? 0),
  };
}

/**
 * The action's retry policy gave it up, durably: its attempts were
 * exhausted, its deadline passed, or an execution failed permanently. A
 * later call of the action throws it again without executing. cause is the
 * last execution's error when this process ran it.
 */
export class GaveUp extends ActionFailed {
  constructor(
    tool: string,
    key: string,
    call: number,
    error: string,
    /** "attempts exhausted", "deadline passed" or "permanent error". */
    readonly reason: string,
    readonly attempts: number,
    cause?: unknown,
  ) {
    super(tool, key, call, error);
    if (cause !== undefined) (this as { cause?: unknown }).cause = cause;
  }
}
