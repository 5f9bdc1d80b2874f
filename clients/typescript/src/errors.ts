/**
 * The errors of the client. Every error answer of the server becomes an
 * {@link APIError} (or a subclass) with the HTTP status, the protocol's
 * stable `code`, the message and the request `field` it concerns. The
 * states of an action the agent must handle have classes of their own:
 * {@link InDoubt} (with its idempotency key) and {@link ActionFailed}.
 */

export class ContinuumError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

export class APIError extends ContinuumError {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly field?: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(`${status} ${code}${field ? ` (${field})` : ""}: ${detail}`);
  }
}

/** 400: the request is malformed; `field` names what is wrong. */
export class BadRequest extends APIError {}
/** 401: no bearer token, or a wrong one. */
export class Unauthorized extends APIError {}
/** 403 forbidden: the token's scope (its rights, or its runs' id prefix) does not allow the request. */
export class Forbidden extends APIError {}
/** 429 auth_rate_limited: too many failed authentications from this client's address (details.retry_after_ms). */
export class AuthRateLimited extends APIError {}
/** 404: no such run, call, atom or endpoint (`code` says which: atom_not_found for a seq beyond the run's last committed one). */
export class NotFound extends APIError {}
/** 404 run_not_found. */
export class RunNotFound extends NotFound {}
/** 409: the request conflicts with the state of the run or the attempt. */
export class Conflict extends APIError {}
/** 409 run_held: another attempt holds the run (details: seq, lease_expires); begin with takeover to abandon it. */
export class RunHeld extends Conflict {}
/**
 * 409 conflict: a branch's commit lost to an atom committed after its base,
 * which wrote a state key the branch writes or declared it reads. Nothing
 * was written and the branch is over: branch again under the same name
 * (Run.branchStep does), and its certified actions answer their results
 * without executing. `details`: branch, base, seq (the atom it lost to),
 * key (e.g. "memory:total"), lost (the base is older than the writes the
 * run keeps).
 */
export class BranchConflict extends Conflict {
  /** The state key the branch lost on ("memory:total"), or undefined when lost. */
  get key(): string | undefined {
    return this.details.key === undefined ? undefined : String(this.details.key);
  }
  /** The atom committed after the branch's base that it lost to. */
  get seq(): number | undefined {
    return this.details.seq === undefined ? undefined : Number(this.details.seq);
  }
}
/** 409 rollback_pending: a rollback of the run is not finished. */
export class RollbackPending extends Conflict {}
/** 409 commit_mismatch: a repeated commit of a committed attempt carries another delta than the one committed. */
export class CommitMismatch extends Conflict {}
/** 409 run_ended: the run ended (Run.end): it takes no more atoms, and no end with another status or result. */
export class RunEnded extends Conflict {}
/** 409 run_not_ended: erase of a run that is still active (end it first). */
export class RunNotEnded extends Conflict {}
/** 409 run_has_forks: erase of a run with a fork that is not erased (a fork holds its parent's state at its fork point: erase it first). */
export class RunHasForks extends Conflict {}
/** 409 keyring: an erasure in a store that is not encrypted (the server runs without --keyring): no key can be shredded. */
export class NotEncrypted extends Conflict {}
/** 409 not_erasable: the memory key's values were never sealed with keys of their own (not --erasable when written): they are erased only with the run. */
export class NotErasable extends Conflict {}
/** 409 nothing_to_erase: every value of the memory key is erased already, and none was written since. */
export class NothingToErase extends Conflict {}
/** 410 run_deleted: the run was deleted (or erased); its id is never served again. */
export class RunDeleted extends APIError {}
/**
 * 409 run_exists: a fork's new id names a run already, one that is not
 * that fork (`field` is "id"; details: parent, forked_at). A repeat of the
 * same fork is not an error: it answers the fork.
 */
export class RunExists extends Conflict {}
/**
 * The attempt is gone: its lease expired, another client took the run
 * over (409 lease_lost), or the server restarted (404 attempt_not_found).
 * Nothing acknowledged is lost: run the step again (Run.step does).
 */
export class AttemptLost extends APIError {}
/** 413: a body, a result or the frame exceeds a limit. */
export class TooLarge extends APIError {}
/** 422: well formed, but the engine refuses it. */
export class Unprocessable extends APIError {}
/** 422 invalid_delta: the delta does not apply to the frame; the atom stays open. */
export class InvalidDelta extends Unprocessable {}
/** 422 invalid_args: the ledger refuses the args or a redact pointer. */
export class InvalidArgs extends Unprocessable {}
/** 5xx: the store failed, or a bug. */
export class ServerError extends APIError {}
/** 503 shutting_down: retried by the client within its retryFor. */
export class ShuttingDown extends ServerError {}

/**
 * An action was dispatched before and nobody knows whether it took effect
 * (a crash or a vanished client fell between its execution and its
 * certificate), and it is not idempotent. Ask the downstream with `key`,
 * then settle it with Atom.resolve or Atom.resolveFailed; or give `do` a
 * reconcile function.
 */
export class InDoubt extends ContinuumError {
  constructor(
    readonly key: string,
    readonly tool: string,
    readonly call: number,
    readonly fingerprint: string,
  ) {
    super(`action ${JSON.stringify(tool)} (call ${call}) is in doubt: reconcile with the downstream using idempotency key ${JSON.stringify(key)}, then resolve it`);
  }
}

/** An action is certified as not having taken effect (another call's execution of it failed, or it was resolved as failed). */
export class ActionFailed extends ContinuumError {
  constructor(
    readonly tool: string,
    readonly key: string,
    readonly call: number,
    readonly error: string,
  ) {
    super(`action ${JSON.stringify(tool)} (call ${call}, key ${JSON.stringify(key)}) failed: ${error}`);
  }
}

/** The server could not be reached (or kept answering shutting_down or pending) for the whole retryFor. */
export class Unavailable extends ContinuumError {}

/** A durable tool was called outside an atom. */
export class NoAtom extends ContinuumError {}

/** 409 event_mismatch: the sender id has sent the run another event (another name or payload). */
export class EventMismatch extends Conflict {}
/** 409 wait_exists: the run waits after its last atom already, for another event. */
export class WaitExists extends Conflict {}
/** 404 wait_not_found: the run has no wait after its last atom. */
export class WaitNotFound extends NotFound {}
/** 409 wait_not_ended: the wait the atom follows is still open (details.wait). */
export class WaitNotEnded extends Conflict {}
/** 409 seq_mismatch: the run's last seq is not the one the request names. */
export class SeqMismatch extends Conflict {}

const byCode: Record<string, typeof APIError> = {
  run_not_found: RunNotFound,
  run_held: RunHeld,
  run_ended: RunEnded,
  run_exists: RunExists,
  commit_mismatch: CommitMismatch,
  conflict: BranchConflict,
  rollback_pending: RollbackPending,
  forbidden: Forbidden,
  auth_rate_limited: AuthRateLimited,
  run_not_ended: RunNotEnded,
  run_has_forks: RunHasForks,
  keyring: NotEncrypted,
  not_erasable: NotErasable,
  nothing_to_erase: NothingToErase,
  run_deleted: RunDeleted,
  lease_lost: AttemptLost,
  attempt_not_found: AttemptLost,
  invalid_delta: InvalidDelta,
  invalid_args: InvalidArgs,
  shutting_down: ShuttingDown,
  event_mismatch: EventMismatch,
  wait_exists: WaitExists,
  wait_not_found: WaitNotFound,
  wait_not_ended: WaitNotEnded,
  seq_mismatch: SeqMismatch,
};

const byStatus: Record<number, typeof APIError> = {
  400: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  405: BadRequest,
  409: Conflict,
  410: RunDeleted,
  413: TooLarge,
  422: Unprocessable,
};

/** The error for an error answer (its decoded JSON body, or anything). */
export function errorFromAnswer(status: number, body: unknown): APIError {
  const err = typeof body === "object" && body !== null ? (body as { error?: unknown }).error : undefined;
  if (typeof err !== "object" || err === null) {
    return new ServerError(status, "internal", `the server answered ${status} without a protocol error`);
  }
  const e = err as { code?: unknown; message?: unknown; field?: unknown; details?: unknown };
  const code = String(e.code ?? "");
  const Cls = byCode[code] ?? byStatus[status] ?? (status >= 500 ? ServerError : APIError);
  const details = typeof e.details === "object" && e.details !== null ? (e.details as Record<string, unknown>) : {};
  return new Cls(status, code, String(e.message ?? ""), e.field ? String(e.field) : undefined, details);
}
