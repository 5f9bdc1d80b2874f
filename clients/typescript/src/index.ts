/**
 * CONTINUUM for TypeScript: durable execution for AI agents, through
 * continuumd. Each atom's actions happen at most once across crashes of the
 * agent or the server: the server records the intent, the agent executes
 * the tool with the idempotency key it is given, and the server certifies
 * the outcome.
 *
 *     const client = new Client({ socket: "./agent-store.sock" });
 *     const run = await client.run("deploy-42");
 *     await run.atom(async (atom) => {
 *       const receipt = await atom.doJSON("billing.charge", (key) => charge(500, key), { args: { cents: 500 } });
 *       atom.delta.setJSON("receipt", receipt).appendMessage("assistant", "charged");
 *     });
 */

export { Client, Run, Atom, type RunMessage, type BeginOptions, type BranchOptions, type Compensate, type CompensationStep, type RollbackOptions, type DoOptions, type DoJSONOptions, type Execute } from "./client.js";
export { type Verdict, happened, didNotHappen } from "./core.js";
export { Delta } from "./delta.js";
export { GaveUp, type RetryPolicy } from "./retry.js";
export { BlobRef, VALUE_PREFIX, openBlob, parseRef, putBlob, type PutBlobOptions } from "./blobs.js";
import "./streams.js"; // adds the stream methods to Run and Atom
export { type StreamChunk, type StreamBatch, type StreamInfo, type ReadStreamOptions, type FollowOptions } from "./streams.js";
export * from "./errors.js";
export { tool, idempotencyKey, currentAtom, type ToolOptions } from "./tool.js";
export { type ConnectOptions, FramesUnsupported } from "./transport.js";
export { type Wait, type WaitEvent, type WaitOutcome, type SendResult, type WaitOptions, type SleepOptions } from "./waits.js";
export {
  type RunInfo, type Lease, type State, type Message, type Interrupted, type ActionState, type Committed, type AtomRecord,
  type DeletedRun, type Erasure, type ErasedKey,
  type Bytes, text, json,
} from "./wire.js";
