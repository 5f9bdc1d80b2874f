// The scripted agent the crash suite kills: atoms of one or two actions
// against the fake downstream. It prints one line per event:
//   ACK <seq> <head>   RECONCILED <key> <found>   DONE <last_seq>
// Environment: CONTINUUMD_SOCKET, DOWNSTREAM_URL, RUN, ATOMS.

import * as c from "../src/index.js";
import { callDownstream, lookupDownstream } from "./harness.js";

function actions(seq: number): [string, Record<string, unknown>, boolean][] {
  const acts: [string, Record<string, unknown>, boolean][] = [["deploy.step", { seq, region: ["eu", "us", "ap"][seq % 3] }, seq % 3 === 0]];
  if (seq % 4 === 0) acts.push(["notify.send", { seq, to: "ops" }, false]);
  return acts;
}

const url = process.env.DOWNSTREAM_URL!;
const target = Number(process.env.ATOMS);
const client = c.Client.fromEnv();
const run = await client.run(process.env.RUN!);
const reconcile = async (key: string) => {
  const { found, result } = await lookupDownstream(url, key);
  process.stdout.write(`RECONCILED ${key} ${found}\n`);
  return found ? c.happened(result) : c.didNotHappen();
};
while ((await run.info()).lastSeq < target) {
  let atomRef: c.Atom | undefined;
  await run.atom(async (atom) => {
    atomRef = atom;
    await atom.ready();
    for (const [tool, args, idem] of actions(atom.seq)) {
      const out = await atom.doJSON(tool, (key) => callDownstream(url, tool, args, key, idem), { args, idempotent: idem, reconcile });
      atom.delta.setJSON(`${tool}@${atom.seq}`, out);
    }
    atom.delta.appendMessage("assistant", `step ${atom.seq} done`);
  }, { takeover: true });
  process.stdout.write(`ACK ${atomRef!.committed!.seq} ${atomRef!.committed!.head}\n`);
}
process.stdout.write(`DONE ${(await run.info()).lastSeq}\n`);
client.close();
