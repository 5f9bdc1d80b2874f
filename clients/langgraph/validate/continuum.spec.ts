// LangGraph's own conformance suite (@langchain/langgraph-checkpoint-validation),
// unmodified, against ContinuumSaver on a real continuumd: specTest (getTuple,
// list, put, putWrites, deleteThread) and deltaChannelHistoryTests. Each
// checkpointer gets a run prefix of its own, as a fresh store would.
import { randomBytes } from "node:crypto";
import { deltaChannelHistoryTests, specTest } from "@langchain/langgraph-checkpoint-validation";
import { ContinuumSaver } from "../dist/src/index.js";
import { Server } from "../dist/test/server.js";

let server: Server | undefined;
const initializer = {
  checkpointerName: "@continuumdb/langgraph-checkpoint",
  beforeAllTimeout: 300_000,
  async beforeAll() {
    if (!server) server = await new Server().start();
  },
  async afterAll() {
    // the server outlives a suite: vitest runs the two suites in one file
  },
  createCheckpointer() {
    return new ContinuumSaver({ client: server!.client(), prefix: "v" + randomBytes(6).toString("hex") });
  },
  destroyCheckpointer(c: ContinuumSaver) {
    c.client.close();
  },
};

specTest(initializer);
deltaChannelHistoryTests(initializer);

afterAll(async () => {
  await server?.close();
});
