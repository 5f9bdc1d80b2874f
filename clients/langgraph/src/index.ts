/**
 * @continuumdb/langgraph-checkpoint: LangGraph.js checkpoints on
 * continuumd, CONTINUUM's server. ContinuumSaver is a BaseCheckpointSaver
 * (checkpoints as deltas, a thread's history a tree of runs, pending
 * writes durable); durableTool makes a LangChain.js tool's calls go
 * through the server's exactly-once ledger.
 */
export { ContinuumSaver, type ContinuumSaverOptions } from "./saver.js";
export { durableTool, ledgerCall, taskRun, callKey, type DurableToolOptions } from "./tools.js";
