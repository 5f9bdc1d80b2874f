"""Branches over the wire against the real server: a conflict writes
nothing and its retry by name gets the certified actions back; branches
retried across SIGKILLs of the server at seeded points never execute a
certified action twice."""

from __future__ import annotations

import asyncio
import random
import unittest
from typing import Dict

import harness  # noqa: F401  (puts src/ on the path)

import continuum


class BranchTest(unittest.TestCase):
    def test_conflict_and_retry_by_name(self) -> None:
        _, client = harness.served(self)
        run = client.run("br")
        with run.atom() as atom:
            atom.delta.set("total", "0")
        effects: Dict[str, int] = {}

        def charge(key: str) -> bytes:
            effects[key] = effects.get(key, 0) + 1
            return b"charged"

        a = run.branch("a")
        b = run.branch("b", reads=["memory:total"])
        self.assertEqual(a.base, 1)
        self.assertEqual(b.base, 1)
        self.assertEqual(a.seq, 0)
        self.assertEqual(b.do("billing.charge", charge, args={"cents": 5}), b"charged")
        a.delta.set("total", "10")
        self.assertEqual(a.commit().seq, 2)
        b.delta.set("b", "done")
        with self.assertRaises(continuum.BranchConflict) as cm:
            b.commit()
        self.assertEqual((cm.exception.key, cm.exception.seq), ("memory:total", 2))
        self.assertIsNone(run.state().text("b"))
        x = run.branch("x")
        self.assertTrue(x.attempt)
        with self.assertRaises(continuum.RunHeld):
            run.branch("x").attempt  # noqa: B018  (one open attempt per name)
        x.fail("not needed")
        # The retry under the same name: the charge answers from the ledger.
        with run.branch("b", reads=["memory:total"]) as b2:
            self.assertEqual(b2.base, 2)
            self.assertEqual(b2.do("billing.charge", charge, args={"cents": 5}), b"charged")
            b2.delta.set("b", "done")
        self.assertEqual(b2.committed.seq if b2.committed else None, 3)
        self.assertEqual(list(effects.values()), [1])
        # branch_step retries a conflict by itself.
        tries = []

        def step(atom: continuum.Atom) -> str:
            tries.append(atom.base)
            if len(tries) == 1:
                with run.branch("other") as o:
                    o.delta.set("total", "20")
            atom.delta.set("total", "30")
            return "ok"

        self.assertEqual(run.branch_step("c", step, reads=["memory:total"]), "ok")
        self.assertEqual(len(tries), 2)
        self.assertEqual(run.state().text("total"), "30")

    def test_async_branch_and_diff(self) -> None:
        server = harness.Server()
        self.addCleanup(server.close)

        async def main() -> None:
            client = server.async_client(retry_for=20)
            try:
                run = await client.run("abr")
                a = await run.branch("a")
                b = await run.branch("b", reads=["memory:k"])
                self.assertEqual((a.branch, a.base, b.base), ("a", 0, 0))
                a.delta.set("k", "a")
                self.assertEqual((await a.commit()).seq, 1)
                b.delta.set("j", "b")
                with self.assertRaises(continuum.BranchConflict):
                    await b.commit()
                d = await run.diff(0, "last")
                self.assertEqual(d["b"]["ops"], 1)
            finally:
                await client.close()

        asyncio.run(main())

    def test_retry_across_server_kills(self) -> None:
        rng = random.Random(harness.seed())
        server, client = harness.served(self)
        run = client.run("brk")
        effects: Dict[str, int] = {}
        kills = 0

        def maybe_kill() -> None:
            nonlocal kills
            if rng.random() < 0.25:
                kills += 1
                server.kill()
                server.start()

        for i in range(4):

            def step(atom: continuum.Atom, i: int = i) -> None:
                for n in range(3):

                    def pay(key: str) -> bytes:
                        maybe_kill()  # before the effect: the outcome is never reported
                        effects[key] = effects.get(key, 0) + 1
                        return f"paid {i}/{n}".encode()

                    def reconcile(key: str) -> "continuum.Happened | continuum.DidNotHappen":
                        if effects.get(key):
                            return continuum.Happened(f"paid {i}/{n}".encode())
                        return continuum.DidNotHappen()

                    self_result = atom.do("pay", pay, args={"b": i, "n": n}, reconcile=reconcile)
                    self.assertEqual(self_result, f"paid {i}/{n}".encode())
                    maybe_kill()
                atom.delta.set(f"b{i}", "done")

            run.branch_step(f"b{i}", step, max_attempts=50)
        self.assertEqual(sorted(effects.values()), [1] * 12, effects)
        state = run.state()
        for i in range(4):
            self.assertEqual(state.text(f"b{i}"), "done")
        print(f"{kills} kills")


if __name__ == "__main__":
    unittest.main()
