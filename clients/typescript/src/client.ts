/** The client: Client (one server), Run, Atom. */

import { randomUUID } from "node:crypto";
import * as path from "node:path";
import { endpoints } from "./blobs.js";
import { type Effect, type ExecResult, type Request, type Verdict, callFlow, commitFlow, errorText } from "./core.js";
import { type RetryPolicy, retryBody } from "./retry.js";
import { Delta } from "./delta.js";
import { APIError, ActionFailed, AttemptLost, BranchConflict, InDoubt, NotFound, ServerError, ShuttingDown, Unavailable, errorFromAnswer } from "./errors.js";
import { current } from "./tool.js";
import * as waits from "./waits.js";
import { type ConnectOptions, Transport, TransportError, endpoint } from "./transport.js";
import {
  type AtomRecord,
  getBytes,
  type Bytes,
  type Committed,
  type DeletedRun,
  type ErasedKey,
  type Interrupted,
  type Obj,
  type RunInfo,
  type State,
  atomRecord,
  committed,
  deletedRun,
  erasedKey,
  interrupted,
  putBytes,
  runInfo,
  sameDelta,
  seg,
  state,
  toBytes,
} from "./wire.js";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const certificateErrors = new Set([
  "DEPTH_ZERO_SELF_SIGNED_CERT", "SELF_SIGNED_CERT_IN_CHAIN", "UNABLE_TO_VERIFY_LEAF_SIGNATURE", "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_HAS_EXPIRED", "CERT_NOT_YET_VALID", "ERR_TLS_CERT_ALTNAME_INVALID",
]);

function untrustedCertificate(e: unknown): boolean {
  const code = (e as { code?: unknown } | undefined)?.code;
  return typeof code === "string" && certificateErrors.has(code);
}

/** The options of a begin. */
/** The options of a branch (Run.branch). */
export interface BranchOptions extends BeginOptions {
  /**
   * State keys the branch declares it read besides what it writes:
   * "memory:KEY", "subgoal:ID", "pending:CALL_ID", "objective",
   * "scratchpad", "messages", "frame" (everything).
   */
  reads?: string[];
}

export interface BeginOptions {
  /** Abandon the attempt of another client holding the run (for an agent that restarts and is its run's only worker). */
  takeover?: boolean;
  /** The attempt's lease in milliseconds (default: the server's --lease). */
  leaseMs?: number;
}

/** The options of an action. */
export interface DoOptions {
  /** The call's arguments, a JSON value: with the tool and the key, they identify the action. */
  args?: unknown;
  /** The idempotency key; default: the engine's, numbered by the atom's default-key calls. */
  key?: string;
  /** The downstream honours the key: an in-doubt call is executed again instead of reported in doubt. */
  idempotent?: boolean;
  /** Asks the downstream about an in-doubt call: happened(result) or didNotHappen(). */
  reconcile?: (key: string) => Verdict | Promise<Verdict>;
  /** JSON pointers into args whose values are secrets: never stored. */
  redact?: string[];
  /** JSON pointers into the result stored as "[redacted]". */
  redactResult?: string[];
  /** What undoes the action, for Run.rollback: recorded with its intent. */
  compensate?: Compensate;
  /**
   * Retries a failed execution durably: execute runs again, under the same
   * key, after the policy's backoff, until it succeeds or the policy gives
   * the action up (GaveUp). The count and the schedule survive a restart.
   */
  retry?: RetryPolicy;
}

/** A compensation (DoOptions.compensate): the action that undoes another. */
export interface Compensate {
  tool: string;
  args?: unknown;
  /** Its idempotency key; default: derived from the action it undoes (the same for every rollback). */
  key?: string;
  /** The downstream honours the key: an in-doubt compensation is run again instead of reported in doubt. */
  idempotent?: boolean;
  redact?: string[];
}

/** A compensation a rollback hands to the client to run (Run.rollback's execute). */
export interface CompensationStep {
  n: number;
  /** The idempotency key to run it with. */
  key: string;
  tool: string;
  args: unknown;
  idempotent: boolean;
  /** The action it undoes: the atom (seq) that performed it, its tool and fingerprint. */
  undoes: { seq: number; tool: string; fingerprint: string; compensation?: string };
}

/** The options of Run.rollback. */
export interface RollbackOptions {
  /** Proceed when certified actions it reaches have no compensation (their effects stay). */
  allowNotUndone?: boolean;
  /** Asks the downstream about a compensation in doubt: happened(result) or didNotHappen(). */
  reconcile?: (step: Partial<CompensationStep> & { key: string }) => Verdict | Promise<Verdict>;
}

export type Execute = (key: string) => Bytes | Promise<Bytes>;

/** The options of doJSON: those of do, with a reconcile that answers a JSON result. */
export type DoJSONOptions = Omit<DoOptions, "reconcile"> & { reconcile?: (key: string) => Verdict<unknown> | Promise<Verdict<unknown>> };

/**
 * What to check when nothing answers on a Unix socket: the server may not
 * run, or serve another path ("" for other errors).
 */
function noServerHint(last: unknown, socketPath: string | undefined): string {
  if (socketPath === undefined || !(last instanceof Error)) return "";
  const code = (last.cause as { code?: unknown } | undefined)?.code ?? (last as { code?: unknown }).code;
  if (code !== "ENOENT" && code !== "ECONNREFUSED") return "";
  return ` (is continuumd running, serving ${path.resolve(socketPath)}? continuumd --store DIR serves DIR.sock; a relative socket path is taken from the working directory, ${process.cwd()})`;
}

/**
 * A connection to one continuumd (one store). Every request is retried on
 * transport errors and while the server answers shutting_down, for up to
 * retryForMs (the protocol makes every request safe to repeat); then
 * Unavailable is thrown.
 */
export class Client {
  readonly #t: Transport;
  readonly retryForMs: number;

  constructor(o: ConnectOptions) {
    this.#t = new Transport(endpoint(o));
    endpoints.set(this, this.#t.ep); // for the streamed requests of blobs.ts
    this.retryForMs = o.retryForMs ?? 30_000;
  }

  /**
   * The server named by CONTINUUMD_SOCKET, or CONTINUUMD_URL with
   * CONTINUUMD_TOKEN and CONTINUUMD_CA; CONTINUUMD_TRANSPORT ("frames" or
   * "http") forces a transport unless o gives one.
   */
  static fromEnv(o: Omit<ConnectOptions, "socket" | "url" | "token" | "caFile"> = {}): Client {
    const env = process.env;
    if (o.transport === undefined && env.CONTINUUMD_TRANSPORT) o = { ...o, transport: env.CONTINUUMD_TRANSPORT as "frames" | "http" };
    if (env.CONTINUUMD_SOCKET) return new Client({ ...o, socket: env.CONTINUUMD_SOCKET, ...(env.CONTINUUMD_TOKEN ? { token: env.CONTINUUMD_TOKEN } : {}) });
    if (env.CONTINUUMD_URL) {
      return new Client({ ...o, url: env.CONTINUUMD_URL, ...(env.CONTINUUMD_TOKEN ? { token: env.CONTINUUMD_TOKEN } : {}), ...(env.CONTINUUMD_CA ? { caFile: env.CONTINUUMD_CA } : {}) });
    }
    throw new TypeError("set CONTINUUMD_SOCKET (the server's Unix socket) or CONTINUUMD_URL");
  }

  close(): void {
    this.#t.close();
  }

  /** The framing requests take now: "frames" (continuum-frames/1), or "http" (forced, or a server without frames). */
  get transport(): "frames" | "http" {
    return this.#t.current;
  }

  /** One protocol request, retried as the class says; an error answer is thrown as its APIError. */
  async request(req: Request): Promise<Obj> {
    const body = req.body === undefined ? undefined : Buffer.from(JSON.stringify(req.body));
    const deadline = Date.now() + this.retryForMs;
    let wait = 10;
    let last: unknown;
    for (;;) {
      try {
        const { status, data } = await this.#t.request(req.method, req.path, body);
        let answer: unknown;
        try {
          answer = data.length ? JSON.parse(data.toString("utf8")) : null;
        } catch (e) {
          throw new ServerError(status, "internal", `${req.method} ${req.path}: the answer is not JSON: ${(e as Error).message}`);
        }
        if (status >= 400) throw errorFromAnswer(status, answer);
        const a = answer as Obj;
        if (!(req.repeatPending && a && a.status === "pending")) return a;
        last = undefined;
      } catch (e) {
        if (!(e instanceof TransportError) && !(e instanceof ShuttingDown)) throw e;
        if (e instanceof TransportError && untrustedCertificate(e.cause)) throw e.cause; // not a passing failure
        last = e;
      }
      if (Date.now() + wait > deadline) {
        throw new Unavailable(`${req.method} ${req.path}: no answer for ${this.retryForMs} ms: ${last ? (last as Error).message : "still pending"}${noServerHint(last, this.#t.ep.socketPath)}`);
      }
      await sleep(wait);
      wait = Math.min(wait * 2, 1000);
    }
  }

  #get(path: string): Promise<Obj> {
    return this.request({ kind: "request", method: "GET", path });
  }

  health(): Promise<Obj> {
    return this.#get("/v1/health");
  }

  stats(): Promise<Obj> {
    return this.#get("/v1/stats");
  }

  async runs(): Promise<RunInfo[]> {
    return ((await this.#get("/v1/runs")).runs as Obj[]).map(runInfo);
  }

  /** Opens the run, creating it if the store has none of that id. */
  async run(id: string): Promise<Run> {
    const info = await this.request({ kind: "request", method: "PUT", path: `/v1/runs/${seg(id)}`, body: {} });
    return new Run(this, id, runInfo(info));
  }

  /**
   * Forks run `source` at its committed seq `at` into a new run `newId`
   * (the engine's DB.Fork), durably, and opens it. The fork's state at
   * `at` is the source's, `fork.state(k)` for k <= at answers from the
   * source's history, and its first atom is at + 1; its RunInfo has
   * parent and forkedAt. The source may be a fork, may have ended, and
   * may have an atom open (not committed: `at` goes up to its lastSeq).
   *
   * No effect happens twice across the lineage: an action of the fork
   * that repeats the parent's at the same position (same seq, same place
   * among the atom's default-key calls, same tool and args) returns the
   * parent's certified result without executing, or is in doubt under
   * the parent's key; any other action gets a key of the fork's own.
   *
   * A repeat (same newId, source and at, as after a lost answer, which
   * the client retries by itself) resolves to the fork the first made.
   * Rejects with RunNotFound for an unknown source, NotFound (code
   * atom_not_found, field "at") for `at` beyond its last committed seq,
   * RunExists when newId names another run, BadRequest for an `at` that
   * is not a non-negative integer or an invalid id.
   */
  async fork(source: string, at: number, newId: string): Promise<Run> {
    const info = await this.request({ kind: "request", method: "POST", path: `/v1/runs/${seg(source)}/fork`, body: { at, id: newId } });
    return new Run(this, newId, runInfo(info));
  }

  /**
   * Deletes the ended run `run` (the engine's DB.DeleteRuns): durable when
   * this resolves; from then on the run throws RunDeleted, and gc()
   * reclaims its space. A repeat resolves to the deletion. RunNotEnded
   * for an active run, RunHasForks while a fork of it lives.
   */
  async delete(run: string, o: { reason?: string } = {}): Promise<DeletedRun> {
    const body: Obj = { reason: o.reason ?? "" };
    return deletedRun(await this.request({ kind: "request", method: "POST", path: `/v1/runs/${seg(run)}/delete`, body }));
  }

  /** Reclaims the space of dead records (the engine's DB.GC); needs an admin token. */
  async gc(): Promise<Record<string, number>> {
    return (await this.request({ kind: "request", method: "POST", path: "/v1/gc", body: {} })) as Record<string, number>;
  }

  /**
   * Erases the ended (or deleted) run `run` (the engine's DB.Erase,
   * crypto-shredding): it is deleted and its data key destroyed, so that
   * its atoms, certificates, result and state can never be read again,
   * wherever copies of the store went. Resolves once the erasure is
   * durable; from then on the run rejects with RunDeleted. A repeat
   * resolves to the erasure. `reason` is recorded in the erase record (""
   * records "erased by request"). Needs a server with --keyring (else
   * NotEncrypted); rejects with RunNotEnded for an active run, RunHasForks
   * while a fork of it is not erased, RunNotFound for an unknown run.
   */
  async erase(run: string, o: { reason?: string } = {}): Promise<DeletedRun> {
    const body: Obj = { reason: o.reason ?? "" };
    return deletedRun(await this.request({ kind: "request", method: "POST", path: `/v1/runs/${seg(run)}/erase`, body }));
  }

  /**
   * Erases every value of memory key `key` written so far in run `run`
   * (the engine's DB.EraseKey): the data keys that sealed them are
   * destroyed, and the run's state, at every seq, lacks the key until a
   * new value is written. The run may be active or ended. Needs a server
   * with --keyring that listed the key with --erasable when its values
   * were written (else NotEncrypted, NotErasable). Rejects with
   * NothingToErase when every value of it is erased already and none was
   * written since (as a repeat after a lost answer does: the key is
   * erased), RunDeleted for a deleted run (erase it whole).
   */
  async eraseKey(run: string, key: string, o: { reason?: string } = {}): Promise<ErasedKey> {
    const body: Obj = { reason: o.reason ?? "" };
    return erasedKey(await this.request({ kind: "request", method: "POST", path: `/v1/runs/${seg(run)}/memory/${seg(key)}/erase`, body }));
  }

  /** The store's verification report (engine.Verify, beside the live server). */
  verify(o: { deep?: boolean; publicKey?: string; unsignedTail?: number } = {}): Promise<Obj> {
    const body: Obj = { deep: o.deep ?? false, unsigned_tail: o.unsignedTail ?? 0 };
    if (o.publicKey !== undefined) body.public_key = o.publicKey;
    return this.request({ kind: "request", method: "POST", path: "/v1/verify", body });
  }
  // Waits, events and timers (waits.ts).

  /**
   * Sends run `run` an event named `name`, durably: it ends the run's open
   * wait of that name, or is kept for its next one. `sender` is the
   * sender's id for the event, unique per run: a repeat is a duplicate
   * (nothing written), another name or payload throws EventMismatch.
   * Needs the write or the event right on the run only (it is not opened).
   */
  async sendEvent(run: string, name: string, o: { sender: string; payload?: Bytes }): Promise<waits.SendResult> {
    return waits.sendResult(await this.request(waits.eventRequest(run, name, o.sender, o.payload ?? "")));
  }

  /**
   * The waits that ended (an event, a timeout) and that no atom of their
   * run took yet, in the order they ended: the runs to resume. It waits up
   * to waitMs for one (a long poll).
   */
  async ready(o: { waitMs?: number; max?: number } = {}): Promise<waits.Wait[]> {
    const deadline = Date.now() + (o.waitMs ?? 0);
    for (;;) {
      const left = Math.max(0, deadline - Date.now());
      const out = ((await this.request(waits.readyRequest(left, o.max))).ready as Obj[]).map(waits.wait);
      if (out.length > 0 || left <= waits.longPollMs) return out;
    }
  }

}

/** One run of the store, as Client.run opened it. */
export class Run {
  readonly path: string;
  /** Results of executions whose certificate was not acknowledged, by idempotency key (see core.callFlow). */
  readonly known = new Map<string, Uint8Array>();

  /** @internal The run's next seq as this client last saw it (null: unknown), named by a commit riding on its begin. */
  next: number | null;

  constructor(readonly client: Client, readonly id: string, readonly opened: RunInfo) {
    this.path = `/v1/runs/${seg(id)}`;
    this.next = opened.lastSeq + 1;
  }

  async info(): Promise<RunInfo> {
    return runInfo(await this.client.request({ kind: "request", method: "GET", path: this.path }));
  }

  /** The frame as of seq (default: the last committed atom). */
  async state(seq?: number): Promise<State> {
    const q = seq === undefined ? "" : `?seq=${seq}`;
    return state(await this.client.request({ kind: "request", method: "GET", path: `${this.path}/state${q}` }));
  }

  /** The committed atom at seq: its delta and its actions. */
  async atomAt(seq: number): Promise<AtomRecord> {
    return atomRecord(await this.client.request({ kind: "request", method: "GET", path: `${this.path}/atoms/${seq}` }));
  }

  async interrupted(): Promise<Interrupted | null> {
    return interrupted((await this.client.request({ kind: "request", method: "GET", path: `${this.path}/interrupted` })).interrupted);
  }

  /** The messages sent to this run and not consumed yet, oldest first. */
  async inbox(): Promise<RunMessage[]> {
    const r = await this.client.request({ kind: "request", method: "GET", path: `${this.path}/inbox` });
    return (r.messages as Obj[]).map(runMessage);
  }

  /** Verifies the store and resolves to this run's part of the report: ok, run (its line), failures, warnings, store_ok. */
  async verify(o: { deep?: boolean; publicKey?: string; unsignedTail?: number } = {}): Promise<Record<string, unknown>> {
    const body: Obj = { deep: o.deep ?? false, unsigned_tail: o.unsignedTail ?? 0 };
    if (o.publicKey) body.public_key = o.publicKey;
    return (await this.client.request({ kind: "request", method: "POST", path: `${this.path}/verify`, body })) as Record<string, unknown>;
  }

  /** What continuumctl inspect says of this run: atoms, last_seq, head, fails, status, parent, ... */
  async inspect(): Promise<Record<string, unknown>> {
    return (await this.client.request({ kind: "request", method: "GET", path: `${this.path}/inspect` })) as Record<string, unknown>;
  }

  /**
   * What continuumctl diff shows: this run at seq a and at seq b (or run
   * o.other at b: a fork and its parent, any two runs of one lineage).
   * base is their common state; a and b the atoms that lead from it to
   * each (spans, ops, atoms as export writes them). A seq may be "last".
   * Needs the read right on both runs.
   */
  async diff(a: number | "last", b: number | "last", o: { other?: string } = {}): Promise<Record<string, unknown>> {
    let q = `?a=${a}&b=${b}`;
    if (o.other !== undefined) q += `&run_b=${seg(o.other)}`;
    return (await this.client.request({ kind: "request", method: "GET", path: `${this.path}/diff${q}` })) as Record<string, unknown>;
  }

  /** Ends the run (completed, failed or cancelled), with an optional result, durably: begin then throws RunEnded. Refused (RunHeld) while an atom of the run is open. */
  async end(status: "completed" | "failed" | "cancelled", result?: Bytes): Promise<RunInfo> {
    const body: Obj = { status };
    if (result !== undefined) putBytes(body, "result", result);
    return runInfo(await this.client.request({ kind: "request", method: "POST", path: `${this.path}/end`, body }));
  }

  /**
   * Rolls the run back to seq `to`: the actions certified after it are
   * undone, newest first, by the compensations they declared
   * (DoOptions.compensate), each run here by execute(step) exactly once
   * (pass step.key to the downstream). Resolves to the server's done
   * answer (seq: the atom that completed it; undone; results; not_undone).
   * If execute throws, the compensation is certified as failed and the
   * error rethrown: the rollback stays pending until rollback is called
   * again with the same `to`. After a crash of either side, call it again:
   * certified compensations are not run again; one in doubt goes to
   * o.reconcile (or rejects with InDoubt), unless idempotent.
   */
  async rollback(to: number, execute: (step: CompensationStep) => Bytes | Promise<Bytes>, o: RollbackOptions = {}): Promise<Obj> {
    const path = `${this.path}/rollback`;
    const req: Obj = { to, allow_not_undone: o.allowNotUndone ?? false, request_id: randomUUID() };
    const post = (p: string, body: Obj) => this.client.request({ kind: "request", method: "POST", path: p, body });
    let r = await post(path, req);
    for (;;) {
      const step = r.step as CompensationStep | undefined;
      switch (r.status) {
        case "done":
          return r;
        case "execute": {
          let out: Bytes;
          try {
            out = await execute(step!);
          } catch (e) {
            await post(`${path}/outcome`, { step: step!.n, error: errorText(e) || "the compensation failed" });
            throw e;
          }
          const body: Obj = { step: step!.n };
          putBytes(body, "result", out);
          try {
            r = await post(`${path}/outcome`, body);
          } catch (e) {
            if (!(e instanceof APIError) || e.code !== "rollback_not_found") throw e;
            r = await post(path, req); // the server restarted: resume
          }
          break;
        }
        case "in_doubt": {
          const key = String(r.key);
          if (!o.reconcile) throw new InDoubt(key, step?.tool ?? "", -1, "");
          const v = await o.reconcile(step ?? { key });
          const res: Obj = { key };
          if (v.happened) putBytes(res, "result", v.result);
          else res.failed = v.reason ?? "the downstream has no trace of the idempotency key";
          r = await post(`${path}/resolve`, res);
          if (r.status === "resolved") r = await post(path, req);
          break;
        }
        case "failed":
          throw new ActionFailed(step?.tool ?? "", "", -1, String(r.error ?? ""));
        default: // running: the engine is writing
          r = await post(path, req);
      }
    }
  }

  /** The seq a pending rollback of the run goes back to, or null. */
  async pendingRollback(): Promise<number | null> {
    const r = await this.client.request({ kind: "request", method: "GET", path: `${this.path}/rollback` });
    return r.pending ? Number(r.to) : null;
  }

  /** Begins the run's next atom; its lease is renewed in the background while it is open. */
  async begin(o: BeginOptions = {}): Promise<Atom> {
    const body = beginBody(o);
    return new Atom(this, await this.client.request({ kind: "request", method: "POST", path: `${this.path}/attempts`, body }), body);
  }

  /**
   * Runs fn in an atom: begins it, commits its delta when fn resolves,
   * fails it when fn throws (and rethrows). Durable tools called inside
   * fn run in this atom.
   *
   *     await run.atom(async (atom) => {
   *       const out = await atom.do("billing.charge", charge, { args: { cents: 500 } });
   *       atom.delta.set("charge", out);
   *     });
   */
  async atom<T>(fn: (atom: Atom) => Promise<T>, o: BeginOptions = {}): Promise<T> {
    return this.#within(new Atom(this, null, beginBody(o)), fn);
  }

  /**
   * Begins a branch of the run named name: an atom that may be in flight
   * with other branches of the run (optimistic concurrency). It reads the
   * state at atom.base and takes its seq at its commit, which rejects with
   * BranchConflict, writing nothing, if an atom committed after its base
   * wrote a state key it writes or declared in reads. Branching again
   * under the same name is its retry: actions certified by an earlier
   * attempt answer their results without executing. One attempt of a
   * name is open at a time (RunHeld; takeover abandons it).
   */
  async branch(name: string, o: BranchOptions = {}): Promise<Atom> {
    const body: Obj = { name, reads: o.reads ?? [], ...beginBody(o) };
    return new Atom(this, await this.client.request({ kind: "request", method: "POST", path: `${this.path}/branches`, body }), body, name);
  }

  /** atom(fn) in the branch name: committed when fn resolves, failed when it throws. Begun by its first call or its commit. */
  async branchAtom<T>(name: string, fn: (atom: Atom) => Promise<T>, o: BranchOptions = {}): Promise<T> {
    return this.#within(new Atom(this, null, { name, reads: o.reads ?? [], ...beginBody(o) }, name), fn);
  }

  /**
   * branchAtom(name, fn), run again in a new branch of the same name (on
   * the newer state) after a conflict or a lost attempt, up to
   * maxAttempts times. Certified actions answer their results without
   * executing.
   */
  async branchStep<T>(name: string, fn: (atom: Atom) => Promise<T>, o: BranchOptions & { maxAttempts?: number } = {}): Promise<T> {
    const max = o.maxAttempts ?? 20;
    for (let i = 0; ; i++) {
      try {
        return await this.branchAtom(name, fn, { ...o, takeover: (o.takeover ?? false) || i > 0 });
      } catch (e) {
        if (!(e instanceof AttemptLost || e instanceof BranchConflict) || i === max - 1) throw e;
      }
    }
  }

  async #within<T>(atom: Atom, fn: (atom: Atom) => Promise<T>): Promise<T> {
    let result: T;
    try {
      result = await current.run(atom, () => fn(atom));
    } catch (e) {
      if (!(e instanceof AttemptLost) && !(e instanceof Unavailable)) {
        try {
          await atom.fail(errorText(e));
        } catch {
          // the error in flight says more
        }
      }
      atom.stop();
      throw e;
    }
    await atom.commit();
    return result;
  }

  /**
   * atom(fn), run again in a new attempt of the same seq when the attempt
   * is lost (the server restarted, the lease expired), up to maxAttempts
   * times. Certified actions answer their results without executing; fn
   * must make its calls in the same order each time.
   */
  // Waits, events and timers (waits.ts).

  /**
   * The run waits, durably, after its last atom, for an event named
   * `name`, until o.deadline or for o.timeoutMs (neither: no deadline).
   * No atom may be open (RunHeld). The same name again after the same atom
   * returns the wait the run has; another throws WaitExists.
   */
  async wait(name: string, o: waits.WaitOptions = {}): Promise<waits.Wait> {
    return waits.wait(await this.client.request(waits.waitRequest(this.path, name, o)));
  }

  /** A durable timer: the run waits for the clock only, until o.until or for o.durationMs; it ends as timed_out. */
  async sleep(o: waits.SleepOptions): Promise<waits.Wait> {
    return waits.wait(await this.client.request(waits.sleepRequest(this.path, o)));
  }

  /** The run's wait after its last atom (null: none), waiting up to waitMs (at most 15 s) for an open one to end. */
  async currentWait(o: { waitMs?: number } = {}): Promise<waits.Wait | null> {
    const r = await this.client.request({ kind: "request", method: "GET", path: `${this.path}/wait?wait_ms=${waits.pollMs(o.waitMs ?? 0)}` });
    return r.wait == null ? null : waits.wait(r.wait as Obj);
  }

  /**
   * Resolves once the run's wait after its last atom ended (or timeoutMs
   * passed: the open wait), through server restarts; null if the run has
   * no wait there.
   */
  async waitEnded(o: { timeoutMs?: number } = {}): Promise<waits.Wait | null> {
    const deadline = o.timeoutMs === undefined ? undefined : Date.now() + o.timeoutMs;
    for (;;) {
      const left = deadline === undefined ? waits.longPollMs : Math.max(0, deadline - Date.now());
      const w = await this.currentWait({ waitMs: left });
      if (w === null || w.outcome !== "open" || (deadline !== undefined && Date.now() >= deadline)) return w;
    }
  }

  /** Ends the run's open wait as cancelled. */
  async cancelWait(): Promise<waits.Wait> {
    return waits.wait(await this.client.request({ kind: "request", method: "POST", path: `${this.path}/wait/cancel`, body: {} }));
  }

  /** Client.sendEvent to this run. */
  sendEvent(name: string, o: { sender: string; payload?: Bytes }): Promise<waits.SendResult> {
    return this.client.sendEvent(this.id, name, o);
  }

  async step<T>(fn: (atom: Atom) => Promise<T>, o: BeginOptions & { maxAttempts?: number } = {}): Promise<T> {
    const max = o.maxAttempts ?? 20;
    for (let i = 0; ; i++) {
      try {
        return await this.atom(fn, o);
      } catch (e) {
        if (!(e instanceof AttemptLost) || i === max - 1) throw e;
      }
    }
  }
}

function beginBody(o: BeginOptions): Obj {
  const body: Obj = { request_id: randomUUID(), takeover: o.takeover ?? false };
  if (o.leaseMs !== undefined) body.lease_ms = o.leaseMs;
  return body;
}

/** An outcome held back to ride on the atom's next request: call n's flow, suspended at its outcome request. */
interface Pending {
  flow: Generator<Effect, Uint8Array, any>;
  req: Request;
  execute?: Execute;
  reconcile?: DoOptions["reconcile"];
}

/**
 * One attempt at an atom of a run. Concurrent do calls are allowed: call
 * numbers follow the order they are made, and executions overlap.
 *
 * An atom of run.atom, branchAtom, step or branchStep begins with its
 * first request (its first call, or its commit), and the outcome of an
 * execution rides on the atom's next request (the next call, or the
 * commit): an atom with k actions is k + 1 round trips, one without is 1.
 * Until its first request, seq, attempt, path, leaseMs, interrupted and
 * base are not known: `await atom.ready()` begins it at once.
 */
export class Atom {
  /** A branch's name (Run.branch), null for an atom of a begin. */
  readonly branch: string | null;
  readonly delta = new Delta();
  committed: Committed | null = null;
  #seq = 0;
  #base: number | null = null;
  #attempt = "";
  #leaseMs = 0;
  #interrupted: Interrupted | null = null;
  #path = "";
  #begun = false;
  readonly #begins: string;
  readonly #body: Obj;
  #calls = 0;
  #order: Promise<unknown> = Promise.resolve();
  #beat: NodeJS.Timeout | undefined;
  #pending: Pending | null = null;

  /** begin: the begin's answer (the atom is open), or null for an atom begun by its first request, with body. */
  constructor(readonly run: Run, begin: Obj | null, body: Obj = {}, branch: string | null = null) {
    this.branch = branch ?? (begin && typeof begin.branch === "string" ? begin.branch : null);
    this.#begins = `${run.path}/${this.branch !== null ? "branches" : "attempts"}`;
    this.#body = body;
    if (begin) this.#set(begin);
  }

  #set(begin: Obj): void {
    this.#seq = Number(begin.seq);
    this.#base = begin.base === undefined || begin.base === null ? null : Number(begin.base);
    this.#attempt = String(begin.attempt);
    this.#leaseMs = Number(begin.lease_ms);
    this.#interrupted = interrupted(begin.interrupted);
    this.#path = `${this.run.path}/attempts/${this.#attempt}`;
    this.#begun = true;
    this.#beat = setInterval(() => {
      this.heartbeat().catch(() => this.stop());
    }, Math.max(this.#leaseMs / 3, 10));
    this.#beat.unref();
  }

  #need(what: string): void {
    if (!this.#begun) throw new Error(`atom.${what}: the atom is not begun yet (its first call or its commit begins it; await atom.ready() to begin it now)`);
  }

  /** The atom's seq; a branch has none (0) until it commits: then committed has it. */
  get seq(): number {
    if (!this.#begun && this.committed) return this.committed.seq;
    this.#need("seq");
    return this.#seq;
  }

  /** A branch's base: the seq whose state it reads (run.state(atom.base)); null for an atom of a begin. */
  get base(): number | null {
    this.#need("base");
    return this.#base;
  }

  get attempt(): string {
    this.#need("attempt");
    return this.#attempt;
  }

  get leaseMs(): number {
    this.#need("leaseMs");
    return this.#leaseMs;
  }

  /** The earlier attempt of this seq that ended without commit or fail, or null. */
  get interrupted(): Interrupted | null {
    this.#need("interrupted");
    return this.#interrupted;
  }

  get path(): string {
    this.#need("path");
    return this.#path;
  }

  /** Begins the atom now, if its first request was not made (a committed atom is never begun again). */
  async ready(): Promise<this> {
    const p = this.#order.then(async () => {
      if (!this.#begun && !this.committed) this.#set(await this.run.client.request({ kind: "request", method: "POST", path: this.#begins, body: this.#body }));
    });
    this.#order = p.catch(() => undefined);
    await p;
    return this;
  }

  /** Takes the attempt an error of a ridden begin names (the begin happened; what rode on it failed). */
  #takeAttempt(e: unknown): void {
    const att = e instanceof APIError ? e.details.attempt : undefined;
    if (att && typeof att === "object" && !this.#begun) this.#set(att as Obj);
  }

  /** Stops the heartbeats (commit and fail do). */
  stop(): void {
    if (this.#beat) clearInterval(this.#beat);
    this.#beat = undefined;
  }

  /**
   * Drives flow to its end. With defer (the flow's call number), the
   * outcome of a successful execution may be held back to ride on the
   * atom's next request (#flush); the executed result is returned at
   * once. start resumes a flow held so.
   */
  async #drive<T>(
    flow: Generator<Effect, T, any>,
    execute?: Execute,
    reconcile?: DoOptions["reconcile"],
    defer?: number,
    start?: { value?: unknown; error?: { e: unknown } },
  ): Promise<T> {
    let value: unknown = start?.value;
    let error: { e: unknown } | undefined = start?.error;
    let executed: Uint8Array | undefined;
    for (;;) {
      const step = error ? flow.throw(error.e) : flow.next(value);
      value = undefined;
      error = undefined;
      if (step.done) return step.value;
      const eff = step.value;
      if (eff.kind === "request") {
        if (eff.deferrable && defer !== undefined && executed !== undefined && this.#calls === defer + 1 && this.#pending === null) {
          this.#pending = { flow: flow as unknown as Generator<Effect, Uint8Array, any>, req: eff, execute, reconcile };
          return executed as unknown as T;
        }
        try {
          value = await this.run.client.request(eff);
        } catch (e) {
          if (!(e instanceof APIError)) throw e;
          error = { e };
        }
      } else if (eff.kind === "execute") {
        let res: ExecResult;
        try {
          executed = toBytes(await execute!(eff.key));
          res = { ok: true, value: executed };
        } catch (e) {
          res = { ok: false, error: e };
        }
        value = res;
      } else {
        if (!reconcile) throw new InDoubt(eff.key, eff.tool, eff.call, eff.fingerprint);
        value = await reconcile(eff.key);
      }
    }
  }

  /** Takes the outcome held back, if any. */
  #take(): Pending | null {
    const p = this.#pending;
    this.#pending = null;
    return p;
  }

  /**
   * Sends pend, the outcome #drive held back, with what rides on it
   * (["next", call] or ["commit", { delta }]), and finishes its call's
   * flow. Resolves to the answer of what rode, or null when nothing rode
   * (no outcome was held, or it was not certified at once: what would
   * have ridden is still to send). Rejects with the error of the outcome
   * or of what rode on it.
   */
  async #flush(pend: Pending | null, ride?: ["next" | "commit", Obj]): Promise<Obj | null> {
    if (!pend) return null;
    const body: Obj = { ...(pend.req.body ?? {}) };
    if (ride) body[ride[0]] = ride[1];
    let r: Obj;
    try {
      r = await this.run.client.request({ kind: "request", method: "POST", path: pend.req.path, body });
    } catch (e) {
      if (!(e instanceof APIError)) throw e;
      const got = e.details.outcome;
      if (got && typeof got === "object") {
        // the outcome was certified; what rode failed
        await this.#drive(pend.flow, pend.execute, pend.reconcile, undefined, { value: got });
        throw e;
      }
      if (ride?.[0] === "commit" && (e.field ?? "").startsWith("commit.")) {
        // The delta was refused before the outcome was read: the outcome
        // alone, so that the action is certified whatever the agent does
        // next (a commit with another delta, or nothing: then the lease
        // runs out and the atom is failed).
        try {
          const answer = await this.run.client.request({ ...pend.req, repeatPending: true });
          await this.#drive(pend.flow, pend.execute, pend.reconcile, undefined, { value: answer });
        } catch {
          // the refused delta is the error to report
        }
        throw e;
      }
      await this.#drive(pend.flow, pend.execute, pend.reconcile, undefined, { error: { e } });
      throw e;
    }
    const rode = ride ? r[ride[0]] : undefined;
    let answer: Obj = { ...r };
    delete answer.next;
    delete answer.commit;
    if (answer.status === "pending") {
      // not certified yet: the outcome alone, until it is
      answer = await this.run.client.request({ ...pend.req, repeatPending: true });
    }
    await this.#drive(pend.flow, pend.execute, pend.reconcile, undefined, { value: answer });
    return rode && typeof rode === "object" ? (rode as Obj) : null;
  }

  /** The first answer of call n: made alone, on the previous call's outcome, or on the begin. */
  async #first(n: number, body: Obj): Promise<Obj> {
    const call = (): Promise<Obj> =>
      this.run.client.request({ kind: "request", method: "POST", path: `${this.#path}/calls/${n}`, body, repeatPending: true });
    const pend = this.#take();
    if (pend) {
      const a = await this.#flush(pend, ["next", body]);
      return !a || a.status === "pending" ? call() : a;
    }
    if (this.#begun) return call();
    let r: Obj;
    try {
      r = await this.run.client.request({ kind: "request", method: "POST", path: this.#begins, body: { ...this.#body, call: body } });
    } catch (e) {
      this.#takeAttempt(e);
      throw e;
    }
    this.#set(r);
    const first = r.call as Obj;
    return first.status === "pending" ? call() : first;
  }

  /**
   * Performs an action at most once and returns its result. The outcome
   * of an execution rides on the atom's next request (the next call or
   * the commit; a fail, send, receive or resolve sends it first): the
   * result is certified when that request is answered, and an outcome
   * never sent (the process dies) leaves the action in doubt, as a death
   * during its execution does. With redactResult the outcome is sent at
   * once and the certified (redacted) result returned.
   * execute(key) performs the effect, passing the idempotency key to the
   * downstream; it is called only when the server says so (never for an
   * action already certified; after a crash only for an idempotent one),
   * and must throw only when the effect did not happen. An in-doubt action
   * throws InDoubt, unless reconcile settles it.
   */
  async do(tool: string, execute: Execute, o: DoOptions = {}): Promise<Uint8Array> {
    const body: Obj = { tool, idempotent: o.idempotent ?? false };
    if (o.args !== undefined) body.args = o.args;
    if (o.key) body.key = o.key;
    if (o.redact?.length) body.redact = o.redact;
    if (o.redactResult?.length) body.redact_result = o.redactResult;
    if (o.compensate) body.compensate = { ...o.compensate };
    if (o.retry) body.retry = retryBody(o.retry);
    const n = this.#calls++;
    const first = this.#order.then(() => this.#first(n, body));
    this.#order = first.catch(() => undefined);
    const answer = await first;
    const defer = o.redactResult?.length ? undefined : n; // a redacted result is the server's to give
    return this.#drive(callFlow(this.#path, n, tool, answer, this.run.known), execute, o.reconcile, defer);
  }

  /** do for tools whose result is a JSON value: execute returns it, and so does doJSON. */
  async doJSON<T = unknown>(tool: string, execute: (key: string) => T | Promise<T>, o: DoJSONOptions = {}): Promise<T> {
    const { reconcile: rec, ...rest } = o;
    const opts: DoOptions = rest;
    if (rec) {
      opts.reconcile = async (k: string): Promise<Verdict> => {
        const v = await rec(k);
        return v.happened ? { happened: true, result: JSON.stringify(v.result) } : v;
      };
    }
    const out = await this.do(tool, async (k) => JSON.stringify(await execute(k)), opts);
    return (out.length ? JSON.parse(new TextDecoder().decode(out)) : null) as T;
  }

  /** Settles an in-doubt action that took effect, with its result. */
  async resolve(doubt: InDoubt, result: Bytes): Promise<Uint8Array> {
    await this.#flush(this.#take());
    const body: Obj = {};
    putBytes(body, "result", result);
    const r = await this.run.client.request({ kind: "request", method: "POST", path: `${this.path}/calls/${doubt.call}/resolve`, body, repeatPending: true });
    return this.#drive(callFlow(this.path, doubt.call, doubt.tool, r, this.run.known));
  }

  /** Settles an in-doubt action that did not take effect; with execute, runs it again at once under its key. */
  async resolveFailed(doubt: InDoubt, reason: string, execute?: Execute): Promise<Uint8Array | undefined> {
    await this.#flush(this.#take());
    const r = await this.run.client.request({
      kind: "request", method: "POST", path: `${this.path}/calls/${doubt.call}/resolve`, body: { failed: reason, retry: execute !== undefined }, repeatPending: true,
    });
    if (!execute) return undefined;
    return this.#drive(callFlow(this.path, doubt.call, doubt.tool, r, this.run.known), execute);
  }

  /** Sends payload to run `to` as part of this atom: the message exists if and only if the atom commits. */
  async send(to: string, payload: Bytes): Promise<void> {
    await this.ready();
    await this.#flush(this.#take());
    const body: Obj = { to };
    putBytes(body, "payload", payload);
    await this.run.client.request({ kind: "request", method: "POST", path: `${this.path}/send`, body });
  }

  /**
   * The next message of the run's inbox (of `from` only, when given),
   * waiting up to waitMs for one; null if none came. It is consumed when
   * this atom commits; a fail, a lost attempt or a crash gives it back.
   */
  async receive(o: { from?: string; waitMs?: number } = {}): Promise<RunMessage | null> {
    await this.ready();
    await this.#flush(this.#take());
    const body: Obj = { wait_ms: o.waitMs ?? 0 };
    if (o.from) body.from = o.from;
    const r = await this.run.client.request({ kind: "request", method: "POST", path: `${this.path}/receive`, body });
    return r.message == null ? null : runMessage(r.message as Obj);
  }

  /**
   * The ended wait this atom follows (the run's wait after seq - 1), with
   * its event: the atom acts on it, and its commit takes it. A crash or a
   * fail before that commit leaves the next attempt the same outcome.
   * Throws WaitNotEnded (still open) or WaitNotFound (none).
   */
  async waitOutcome(): Promise<waits.Wait> {
    await this.ready();
    await this.#flush(this.#take());
    return waits.wait(await this.run.client.request({ kind: "request", method: "GET", path: `${this.path}/wait` }));
  }

  async heartbeat(): Promise<void> {
    await this.run.client.request({ kind: "request", method: "POST", path: `${this.path}/heartbeat`, body: {} });
  }

  /** Commits the atom with delta (default: this.delta): durable when this resolves. */
  async commit(delta?: Delta): Promise<Committed> {
    const ops = (delta ?? this.delta).ops;
    if (!this.#begun) {
      if (this.committed) return this.committed; // found in the store by a ridden commit
      if (await this.#commitRiding(ops)) return this.committed!;
      await this.ready();
    }
    try {
      this.committed = (await this.#commitOnOutcome(ops)) ?? (await this.#drive(commitFlow(this.path, this.run.id, this.#seq, ops)));
    } catch (e) {
      if (!(e instanceof APIError) || e.code !== "invalid_delta") this.stop();
      throw e;
    }
    this.stop();
    if (this.branch === null) this.run.next = this.committed.seq + 1;
    return this.committed;
  }

  /**
   * Commits on the outcome held back, if any (null: nothing rode). If the
   * server no longer knows the attempt (it restarted while the answer was
   * on its way), the atom at seq is read back, as commitFlow does.
   */
  async #commitOnOutcome(ops: Obj[]): Promise<Committed | null> {
    const pend = this.#take();
    let r: Obj | null;
    try {
      r = await this.#flush(pend, ["commit", { delta: ops }]);
    } catch (e) {
      if (!(e instanceof AttemptLost) || e.code !== "attempt_not_found" || this.#seq === 0 || !pend) throw e;
      let rec: Obj;
      try {
        rec = await this.run.client.request({ kind: "request", method: "GET", path: `${this.run.path}/atoms/${this.#seq}` });
      } catch (e2) {
        if (e2 instanceof NotFound) throw e;
        throw e2;
      }
      if (sameDelta(ops, (rec.delta as Obj[]) ?? [])) return { run: this.run.id, seq: this.#seq, head: String(rec.head) };
      throw e;
    }
    return r ? committed(r) : null;
  }

  /**
   * Begins and commits in one request; false when the atom must be begun
   * first (the run's next seq is not the one this client saw). The begin
   * names the seq it expects, so that a request repeated after a lost
   * answer (the server restarted: it forgot the request id) never commits
   * a second atom: the atom at that seq says whether the first landed.
   */
  async #commitRiding(ops: Obj[]): Promise<boolean> {
    const body: Obj = { ...this.#body, commit: { delta: ops } };
    const nxt = this.branch === null ? this.run.next : null; // a branch takes its seq at its commit
    if (nxt !== null) body.seq = nxt;
    let r: Obj;
    try {
      r = await this.run.client.request({ kind: "request", method: "POST", path: this.#begins, body });
    } catch (e) {
      this.#takeAttempt(e);
      if (!(e instanceof APIError) || e.code !== "seq_mismatch" || nxt === null) throw e;
      const rec = await this.run.client.request({ kind: "request", method: "GET", path: `${this.run.path}/atoms/${nxt}` });
      if (sameDelta(ops, (rec.delta as Obj[]) ?? [])) {
        this.committed = { run: this.run.id, seq: nxt, head: String(rec.head) };
        this.run.next = nxt + 1;
        return true;
      }
      this.run.next = null;
      return false;
    }
    this.#set(r);
    this.committed = committed(r.commit as Obj);
    this.stop();
    if (this.branch === null) this.run.next = this.committed.seq + 1;
    return true;
  }

  /** Ends the attempt without committing: the seq is begun again, certified actions stay certified. */
  async fail(reason: string): Promise<void> {
    if (!this.#begun) return; // nothing was begun: nothing to fail
    try {
      await this.#flush(this.#take()); // the action happened: certified before the atom fails
    } catch {
      // the fail says what happened to the attempt
    }
    try {
      await this.run.client.request({ kind: "request", method: "POST", path: `${this.path}/fail`, body: { reason } });
    } finally {
      this.stop();
    }
  }
}

/** A message between runs: sent by run `from` in its atom `seq` (the `index`-th of that atom's messages), for run `to`. */
export interface RunMessage {
  from: string;
  seq: number;
  index: number;
  to: string;
  payload: Uint8Array;
}

function runMessage(m: Obj): RunMessage {
  return { from: String(m.from), seq: Number(m.seq), index: Number(m.index), to: String(m.to), payload: getBytes(m, "payload") ?? new Uint8Array() };
}
