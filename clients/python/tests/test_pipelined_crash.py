"""The server SIGKILLed under an asyncio client whose runs share one
pipelined frames connection: every request in flight on it fails at once
and is sent again by the retry rules; nothing acknowledged is lost, no key
takes effect twice, every action in doubt is settled by asking. Kills at
seeded times, and right after an effect before its outcome is reported.
SERVER_KILLS sets the number of kills (default 6).

After each restart the runs pause while the atoms acknowledged since the
previous check are read back (their heads chain every earlier atom): the
check used to read every atom acknowledged so far while the six runs went
on committing faster than it read, so that each took about twice as long
as the one before, and a run of the test could go on for many minutes
with its event loop busy and one request (the check's) always waiting."""

from __future__ import annotations

import asyncio
import os
import random
import sys
import threading
import unittest
from typing import Dict, List, Set

import harness

from continuum import AsyncAtom, DidNotHappen, Happened


class PipelinedServerCrashTest(unittest.IsolatedAsyncioTestCase):
    async def test_server_sigkilled_under_pipelined_runs(self) -> None:
        s = harness.seed()
        rng = random.Random(s)
        kills = int(os.environ.get("SERVER_KILLS", "6"))
        nruns = 6
        server = harness.Server()
        self.addCleanup(server.close)
        client = server.async_client(retry_for=30, transport="frames")
        self.addAsyncCleanup(client.close)
        lock = threading.Lock()
        effects: Dict[str, int] = {}
        results: Dict[str, bytes] = {}
        acked: Dict[str, Dict[int, str]] = {f"pipe-{i}": {} for i in range(nruns)}
        reconciled: List[str] = []
        checked: Dict[str, Set[int]] = {r: set() for r in acked}  # seqs whose heads were read back
        kill_after_effect = asyncio.Event()
        killed = asyncio.Event()
        stop = asyncio.Event()

        def effect(key: str) -> bytes:
            with lock:
                effects[key] = effects.get(key, 0) + 1
                results.setdefault(key, f'"{key}"'.encode())
                out = results[key]
            if kill_after_effect.is_set():
                # Killed between the effect and the report of its outcome.
                kill_after_effect.clear()
                server.kill()
                killed.set()
            return out

        def reconcile(key: str) -> "Happened | DidNotHappen":
            with lock:
                reconciled.append(key)
                return Happened(results[key]) if key in results else DidNotHappen()

        running = asyncio.Event()  # cleared: the runs pause between atoms
        running.set()

        async def worker(run_id: str) -> None:
            run = await client.run(run_id)
            while not stop.is_set():
                await running.wait()
                async def step(atom: AsyncAtom) -> AsyncAtom:
                    out = await atom.do("charge", effect, args={"run": run_id}, reconcile=reconcile)
                    atom.delta.set("charge", out)
                    return atom

                atom = await run.step(step)
                c = atom.committed
                assert c is not None
                acked[run_id][c.seq] = c.head

        workers = [asyncio.ensure_future(worker(r)) for r in acked]
        try:
            self.assertTrue(client._t.frames)
            for k in range(kills):
                if k % 2 == 0:
                    await asyncio.sleep(rng.uniform(0.05, 0.3))
                    await asyncio.to_thread(server.kill)
                else:
                    kill_after_effect.set()
                    await asyncio.wait_for(killed.wait(), 30)
                    killed.clear()
                snapshot = {r: dict(a) for r, a in acked.items()}
                await asyncio.to_thread(server.start)
                running.clear()
                for run_id, seqs in snapshot.items():
                    run = await client.run(run_id)
                    last = (await run.info()).last_seq
                    for seq, head in seqs.items():
                        self.assertLessEqual(seq, last, f"seed {s} kill {k}: {run_id} acknowledged seq {seq} lost")
                        if seq not in checked[run_id]:
                            self.assertEqual((await run.atom_at(seq)).head, head, f"seed {s} kill {k}: {run_id} seq {seq}")
                            checked[run_id].add(seq)
                running.set()
            await asyncio.sleep(0.3)
        finally:
            stop.set()
            running.set()
            done = await asyncio.gather(*workers, return_exceptions=True)
        self.assertEqual([e for e in done if e is not None], [], f"seed {s}")
        committed = set()
        total = 0
        for run_id in acked:
            run = await client.run(run_id)
            last = (await run.info()).last_seq
            total += last
            self.assertLessEqual(max(acked[run_id], default=0), last, f"seed {s}: {run_id} lost acknowledged atoms")
            for seq in range(1, last + 1):
                rec = await run.atom_at(seq)
                if seq in acked[run_id]:
                    self.assertEqual(rec.head, acked[run_id][seq], f"seed {s}: {run_id} seq {seq}")
                for a in rec.actions:
                    committed.add(a["key"])
        self.assertEqual({k: n for k, n in effects.items() if n != 1}, {}, f"seed {s}: duplicate effects")
        self.assertLessEqual(committed, set(effects), f"seed {s}: committed actions without effect")
        self.assertLessEqual(len(set(effects) - committed), nruns, f"seed {s}")
        self.assertTrue(client._t.frames, "the client fell back to HTTP after a kill")
        rep = await client.verify(deep=True)
        self.assertTrue(rep["ok"], rep)
        print(f"pipelined: {kills} server kills, {nruns} runs on one frames connection, {total} atoms committed, "
              f"{len(reconciled)} in-doubt actions reconciled", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
