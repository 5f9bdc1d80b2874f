"""The asyncio client against the real server."""

from __future__ import annotations

import asyncio
import time
import unittest
from typing import Any, Dict, List

import harness  # noqa: F401

import continuum
from continuum import DidNotHappen, Happened


class AsyncContractTest(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = harness.Server()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.close()

    async def asyncSetUp(self) -> None:
        self.client = self.server.async_client(retry_for=20)

    async def asyncTearDown(self) -> None:
        await self.client.close()

    def run_id(self) -> str:
        return "async-" + self.id().rsplit(".", 1)[-1]

    async def test_atom_with_async_and_plain_execute(self) -> None:
        run = await self.client.run(self.run_id())

        async def charge(key: str) -> Dict[str, Any]:
            await asyncio.sleep(0)
            return {"charge": key}

        async with run.atom() as atom:
            a = await atom.do_json("billing.charge", charge, args={"cents": 5})
            b = await atom.do("mail.send", lambda key: "sent " + key)
            atom.delta.set_json("a", a).set("b", b)
        st = await run.state()
        self.assertEqual(st.json("a"), a)
        self.assertEqual(st.memory["b"], b)
        self.assertEqual((await run.info()).last_seq, 1)

    async def test_concurrent_calls_execute_in_parallel_with_ordered_keys(self) -> None:
        run = await self.client.run(self.run_id())
        started: List[float] = []

        async def slow(key: str) -> bytes:
            started.append(time.monotonic())
            await asyncio.sleep(0.3)
            return key.encode()

        t0 = time.monotonic()
        async with run.atom() as atom:
            outs = await asyncio.gather(*(atom.do("fetch", slow, args={"i": i}) for i in range(6)))
        elapsed = time.monotonic() - t0
        keys = [o.decode() for o in outs]
        self.assertEqual(keys, [f"ck1-{len(run.id)}:{run.id}:1:{i}" for i in range(6)])
        # Six executions of 0.3 s overlapped (sequential would be 1.8 s).
        self.assertLess(max(started) - min(started), 0.3)
        self.assertLess(elapsed, 1.5)

    async def test_in_doubt_with_async_reconcile(self) -> None:
        run = await self.client.run(self.run_id())
        atom = await run.begin()
        atom._stop()

        class Vanish(BaseException):
            pass

        async def vanish(key: str) -> bytes:
            raise Vanish()

        with self.assertRaises(Vanish):
            await atom.do("pay", vanish)

        async def reconcile(key: str) -> Happened:
            await asyncio.sleep(0)
            return Happened(b"paid")

        async with run.atom(takeover=True) as again:
            with self.assertRaises(RuntimeError):
                again.interrupted  # not begun: its first request begins it
            await again.ready()
            self.assertEqual(again.interrupted.reason, "takeover")
            self.assertEqual(await again.do("pay", vanish, reconcile=reconcile), b"paid")

    async def test_same_action_twice_at_once(self) -> None:
        run = await self.client.run(self.run_id())
        runs: List[str] = []

        class Refused(Exception):
            pass

        async def refuse(key: str) -> bytes:
            runs.append(key)
            await asyncio.sleep(0.2)
            raise Refused("the downstream refused")

        async with run.atom() as atom:
            first, second = await asyncio.gather(
                atom.do("x", refuse, key="same"), atom.do("x", refuse, key="same"), return_exceptions=True
            )
            # Executed once: the first call raises the tool's exception,
            # the second, which waited for it, that the action failed.
            self.assertIsInstance(first, Refused)
            self.assertIsInstance(second, continuum.ActionFailed)
            self.assertIn("the downstream refused", second.error)
            self.assertEqual(runs, ["same"])

    async def test_async_tool_decorator_and_step(self) -> None:
        run = await self.client.run(self.run_id())
        booked: List[str] = []

        @continuum.tool("hotel.book", reconcile=lambda k: DidNotHappen())
        async def book(city: str) -> Dict[str, str]:
            await asyncio.sleep(0)
            key = continuum.idempotency_key()
            booked.append(key)
            return {"city": city, "ref": key[-3:]}

        async def step(atom: continuum.AsyncAtom) -> Dict[str, str]:
            r = await book("Lyon")
            atom.delta.set_json("hotel", r)
            return r

        r1 = await run.step(step)
        self.assertEqual(r1["city"], "Lyon")
        self.assertEqual(len(booked), 1)
        with self.assertRaises(continuum.NoAtom):
            await book("Paris")

    async def test_async_step_survives_a_server_kill(self) -> None:
        run = await self.client.run(self.run_id())
        effects: List[str] = []

        async def ex(key: str) -> bytes:
            effects.append(key)
            if len(effects) == 1:
                self.server.kill()
                asyncio.get_running_loop().call_later(0.2, self.server.start)
            return b"effect"

        async def step(atom: continuum.AsyncAtom) -> bytes:
            out = await atom.do("charge", ex)
            atom.delta.set("out", out)
            return out

        self.assertEqual(await run.step(step), b"effect")
        self.assertEqual(len(effects), 1)
        self.assertEqual((await run.state()).memory["out"], b"effect")

    async def test_async_fork_repeats_certified_actions(self) -> None:
        src = await self.client.run(self.run_id())
        executed: List[str] = []
        async with src.atom() as atom:
            await atom.do("mail.send", lambda k: executed.append(k) or b"sent", args={"to": "ops"})
            atom.delta.set("k", "v")
        fork = await self.client.fork(src.id, 1, self.run_id() + "-f")
        self.assertEqual((fork.opened.parent, fork.opened.forked_at), (src.id, 1))
        self.assertEqual((await fork.state(1)).memory, (await src.state(1)).memory)
        # Its first atom is 2; the source's atom 2 was never begun: the
        # same call there is a new action of the fork.
        async with fork.atom() as atom:
            await atom.do("mail.send", lambda k: executed.append(k) or b"sent", args={"to": "ops"})
        self.assertEqual(atom.committed.seq, 2)
        fork0 = await self.client.fork(src.id, 0, self.run_id() + "-f0")
        async with fork0.atom() as atom:
            out = await atom.do("mail.send", lambda k: self.fail("a certified action must not be executed"), args={"to": "ops"})
        self.assertEqual(out, b"sent")
        self.assertEqual(executed, [f"ck1-{len(src.id)}:{src.id}:1:0", f"ck1-{len(fork.id)}:{fork.id}:2:0"])
        with self.assertRaises(continuum.RunExists):
            await self.client.fork(src.id, 1, fork0.id)


if __name__ == "__main__":
    unittest.main()


class AsyncRoundTripTest(unittest.IsolatedAsyncioTestCase):
    """The asyncio client's atoms: k + 1 requests for k actions, counted
    by the server's stats, as the synchronous client's."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = harness.Server()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.close()

    async def asyncSetUp(self) -> None:
        self.client = self.server.async_client(retry_for=20)

    async def asyncTearDown(self) -> None:
        await self.client.close()

    async def requests(self) -> int:
        return int((await self.client.stats())["server"]["requests"])

    async def test_atom_with_k_actions_is_k_plus_one_requests(self) -> None:
        for k in (0, 1, 2, 5):
            run = await self.client.run(f"async-k-{k}")
            before = await self.requests()
            async with run.atom() as atom:
                outs = [await atom.do(f"t{i}", lambda key, i=i: f"r{i}".encode()) for i in range(k)]
                atom.delta.set("k", b",".join(outs) or b"none")
            self.assertEqual(await self.requests() - before - 1, k + 1, f"{k} actions")  # less the stats request of before
            rec = await run.atom_at(1)
            self.assertEqual([a["status"] for a in rec.actions], ["done"] * k)
            self.assertEqual(atom.committed.seq, 1)

    async def test_held_outcome_is_certified_before_a_fail(self) -> None:
        run = await self.client.run("async-held-fail")
        ran: List[str] = []
        with self.assertRaises(RuntimeError):
            async with run.atom() as atom:
                await atom.do("t", lambda key: ran.append(key) or b"once")
                raise RuntimeError("the agent gave up")
        async with run.atom() as atom:
            atom.delta.set("k", await atom.do("t", lambda key: ran.append(key) or b"twice"))
        self.assertEqual(len(ran), 1)
        self.assertEqual((await run.state()).text("k"), "once")
