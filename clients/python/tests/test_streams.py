"""Streams out of runs over the wire: an atom's chunks are read before it
commits, a follower at the tail gets each once, a reader that resumes from
its offset after a SIGKILL of the server sees no gap and no repeat, and the
statuses say which attempt committed; the same for the asyncio client."""

from __future__ import annotations

import asyncio
import random
import threading
import unittest
from typing import List

import harness

import continuum
from continuum import AsyncClient, StreamChunk


class StreamsTest(unittest.TestCase):
    def test_follow_the_tail(self) -> None:
        _, client = harness.served(self)
        run = client.run("s1")
        got: List[StreamChunk] = []
        errors: List[BaseException] = []

        def follower() -> None:
            try:
                for c in client.run("s1").follow("tok", poll=5.0):
                    got.append(c)
            except BaseException as e:  # reported by the test
                errors.append(e)

        t = threading.Thread(target=follower)
        t.start()
        atom = run.begin()
        self.assertEqual(atom.append("tok", "a"), 0)
        self.assertEqual(atom.append("tok", "b", b"\xff", flush=True), 1)
        # Read before the commit: the point of streaming.
        b = run.read_stream("tok")
        self.assertEqual([c.data for c in b.chunks], [b"a", b"b", b"\xff"])
        self.assertEqual({c.status for c in b.chunks}, {"open"})
        atom.fail("retry")
        atom = run.begin()
        atom.append("tok", "c")
        atom.delta.set("k", "v")
        atom.commit()
        run.end("completed")
        t.join(timeout=60)
        self.assertFalse(t.is_alive(), "the follower did not see the stream end")
        self.assertEqual(errors, [])
        self.assertEqual([(c.offset, c.data, c.attempt, c.status) for c in run.read_stream("tok").chunks],
                         [(0, b"a", 1, "failed"), (1, b"b", 1, "failed"), (2, b"\xff", 1, "failed"), (3, b"c", 2, "committed")])
        self.assertEqual([c.offset for c in got], [0, 1, 2, 3])
        self.assertEqual([(s.name, s.chunks) for s in run.streams()], [("tok", 4)])
        with self.assertRaises(continuum.BadRequest):
            run.read_stream("a/b")

    def test_resume_after_sigkill(self) -> None:
        seed = harness.seed()
        rng = random.Random(seed)
        server, client = harness.served(self)
        run = client.run("s2")
        atom = run.begin()
        read: List[StreamChunk] = []
        nxt = 0

        def catch_up() -> None:
            nonlocal nxt
            b = run.read_stream("tok", nxt)
            for c in b.chunks:
                self.assertEqual(c.offset, nxt, f"seed {seed}")
                read.append(c)
                nxt += 1

        kill_at = rng.randrange(1, 40)
        for i in range(40):
            atom.append("tok", f"a{i}")
            if rng.random() < 0.3:
                catch_up()
            if i == kill_at:
                server.restart(kill=True)
                break
        catch_up()
        atom = run.begin(takeover=True)
        atom.append("tok", "retry", flush=True)
        atom.delta.set("k", "v")
        atom.commit()
        catch_up()
        self.assertEqual(read[-1].data, b"retry", f"seed {seed}")
        again = run.read_stream("tok").chunks
        self.assertEqual([c.data for c in again], [c.data for c in read], f"seed {seed}")
        for c in again:
            want = "committed" if c.data == b"retry" else "abandoned"
            self.assertEqual(c.status, want, f"seed {seed}: {c}")


class _LoseAnswers:
    """A transport whose answers to the first `n` stream appends are lost
    after the server served them (a connection reset before the answer)."""

    def __init__(self, t, n: int) -> None:
        self.t, self.n = t, n

    def __getattr__(self, name):
        return getattr(self.t, name)

    def _lost(self, method: str, path: str) -> bool:
        if method == "POST" and "/streams/" in path and self.n > 0:
            self.n -= 1
            return True
        return False


class _LoseSync(_LoseAnswers):
    def request(self, method, path, body):
        out = self.t.request(method, path, body)
        if self._lost(method, path):
            raise ConnectionResetError("the answer was lost")
        return out


class _LoseAsync(_LoseAnswers):
    async def request(self, method, path, body):
        out = await self.t.request(method, path, body)
        if self._lost(method, path):
            raise ConnectionResetError("the answer was lost")
        return out


class AppendRetryTest(unittest.TestCase):
    def test_retried_append_once(self) -> None:
        """An append whose answer is lost is sent again by the client: each
        chunk is in the stream once (the index makes the repeat a no-op)."""
        _, client = harness.served(self)
        run = client.run("ar")
        atom = run.begin()
        client._t = _LoseSync(client._t, 3)
        self.assertEqual(atom.append("tok", "a"), 0)
        self.assertEqual(atom.append("tok", "b", "c"), 1)
        self.assertEqual(atom.append("other", "x"), 0)
        self.assertEqual(atom.append("tok", "d", flush=True), 3)
        atom.commit()
        self.assertEqual([c.data for c in run.read_stream("tok").chunks], [b"a", b"b", b"c", b"d"])
        self.assertEqual([c.data for c in run.read_stream("other").chunks], [b"x"])


class AsyncStreamsTest(unittest.IsolatedAsyncioTestCase):
    async def test_retried_append_once(self) -> None:
        _, client = await self.served()
        run = await client.run("aar")
        atom = await run.begin()
        client._t = _LoseAsync(client._t, 2)
        self.assertEqual(await atom.append("tok", "a", "b"), 0)
        self.assertEqual(await atom.append("tok", "c", flush=True), 2)
        await atom.commit()
        self.assertEqual([c.data for c in (await run.read_stream("tok")).chunks], [b"a", b"b", b"c"])

    async def served(self) -> "tuple[harness.Server, AsyncClient]":
        server = harness.Server()
        self.addCleanup(server.close)
        client = server.async_client(retry_for=20)
        self.addAsyncCleanup(client.close)
        return server, client

    async def test_follow_the_tail(self) -> None:
        _, client = await self.served()
        run = await client.run("as1")

        async def follower() -> List[StreamChunk]:
            return [c async for c in (await client.run("as1")).follow("tok", poll=5.0)]

        task = asyncio.create_task(follower())

        class Retry(Exception):
            pass

        with self.assertRaises(Retry):
            async with run.atom() as atom:
                with self.assertRaises(ValueError):
                    await atom.append("tok")
                self.assertEqual(await atom.append("tok", "a"), 0)  # begins the atom
                self.assertEqual(atom.seq, 1)
                self.assertEqual(await atom.append("tok", "b", b"\xff", flush=True), 1)
                # Read before the commit: the point of streaming.
                b = await run.read_stream("tok")
                self.assertEqual([c.data for c in b.chunks], [b"a", b"b", b"\xff"])
                self.assertEqual({(c.seq, c.attempt, c.status) for c in b.chunks}, {(1, 1, "open")})
                self.assertEqual((b.next, b.ended), (3, False))
                raise Retry()
        async with run.atom() as atom:
            # The outcome of this call is held to ride on the atom's next
            # request: the append sends it first.
            self.assertEqual(await atom.do("echo", lambda key: "x"), b"x")
            self.assertEqual(await atom.append("tok", "c"), 3)
            atom.delta.set("k", "v")
        self.assertEqual([a["status"] for a in (await run.atom_at(1)).actions], ["done"])
        await run.end("completed")
        got = await asyncio.wait_for(task, 60)
        self.assertEqual([(c.offset, c.data, c.attempt, c.status) for c in (await run.read_stream("tok")).chunks],
                         [(0, b"a", 1, "failed"), (1, b"b", 1, "failed"), (2, b"\xff", 1, "failed"), (3, b"c", 2, "committed")])
        self.assertEqual([c.offset for c in got], [0, 1, 2, 3])
        part = await run.read_stream("tok", 1, max=2)
        self.assertEqual(([c.data for c in part.chunks], part.next, part.ended), ([b"b", b"\xff"], 3, False))
        self.assertEqual([(s.name, s.chunks) for s in await run.streams()], [("tok", 4)])
        with self.assertRaises(continuum.BadRequest):
            await run.read_stream("a/b")

    async def test_committed_atom_appends_nothing(self) -> None:
        _, client = await self.served()
        run = await client.run("as3")
        async with run.atom() as atom:
            atom.delta.set("k", "v")  # begun and committed by one request
        with self.assertRaises(continuum.Conflict) as cm:
            await atom.append("tok", "late")
        self.assertEqual(cm.exception.code, "attempt_done")
        self.assertEqual(await run.streams(), [])

    async def test_append_certifies_a_held_outcome(self) -> None:
        # An execution's outcome held to ride on the atom's next request is
        # sent before the append: a process that dies after the append does
        # not leave its action in doubt.
        _, client = await self.served()
        executed: List[str] = []

        def pay(key: str) -> str:
            executed.append(key)
            return "paid"

        atom = await (await client.run("as4")).begin()
        self.assertEqual(await atom.do("pay", pay), b"paid")
        await atom.append("tok", "after the payment", flush=True)
        atom._stop()  # the process dies: no commit, no fail
        run = await client.run("as4")  # another process: it knows no result
        async with run.atom(takeover=True) as again:
            self.assertEqual(await again.do("pay", pay), b"paid")
            again.delta.set("k", "v")
        self.assertEqual(len(executed), 1)
        self.assertEqual([(c.data, c.status) for c in (await run.read_stream("tok")).chunks], [(b"after the payment", "failed")])

    async def test_resume_after_sigkill(self) -> None:
        seed = harness.seed()
        rng = random.Random(seed)
        server, client = await self.served()
        run = await client.run("as2")
        atom = await run.begin()
        read: List[StreamChunk] = []
        nxt = 0

        async def catch_up() -> None:
            nonlocal nxt
            b = await run.read_stream("tok", nxt)
            for c in b.chunks:
                self.assertEqual(c.offset, nxt, f"seed {seed}")
                read.append(c)
                nxt += 1

        kill_at = rng.randrange(1, 40)
        for i in range(40):
            await atom.append("tok", f"a{i}")
            if rng.random() < 0.3:
                await catch_up()
            if i == kill_at:
                server.restart(kill=True)
                break
        atom._stop()  # its attempt died with the server
        await catch_up()
        async with run.atom(takeover=True) as atom:
            await atom.append("tok", "retry", flush=True)
            atom.delta.set("k", "v")
        await catch_up()
        self.assertEqual(read[-1].data, b"retry", f"seed {seed}")
        again = [c async for c in run.follow("tok", poll=0, until_ended=False)]
        self.assertEqual([c.data for c in again], [c.data for c in read], f"seed {seed}")
        for c in again:
            want = "committed" if c.data == b"retry" else "abandoned"
            self.assertEqual(c.status, want, f"seed {seed}: {c}")


if __name__ == "__main__":
    unittest.main()
