"""Durable retries over the wire: a call with a retry policy is executed
again after a failure, under the same key, after its backoff; the attempt
count and the schedule survive the server SIGKILLed between attempts and
during one; an action given up raises GaveUp, again after a restart,
without executing."""

from __future__ import annotations

import threading
import time
import unittest
from typing import List

import harness

import continuum
from continuum import GaveUp, RetryPolicy


class Flaky:
    """A tool that fails its first `failures` executions; `on_call(i)`
    runs before execution i (1-based) answers."""

    def __init__(self, failures: int, on_call=None) -> None:
        self.failures = failures
        self.keys: List[str] = []
        self.times: List[float] = []
        self.on_call = on_call

    def __call__(self, key: str) -> bytes:
        self.keys.append(key)
        self.times.append(time.monotonic())
        if self.on_call is not None:
            self.on_call(len(self.keys))
        if len(self.keys) <= self.failures:
            raise RuntimeError(f"503 on execution {len(self.keys)}")
        return b'"posted"'


class RetryTest(unittest.TestCase):
    def test_retried_under_the_same_key(self) -> None:
        server, client = harness.served(self)
        tool = Flaky(failures=2)
        policy = RetryPolicy(max_attempts=4, initial=0.05, multiplier=2)
        out = client.run("r").step(lambda atom: atom.do("http.post", tool, args={"u": 1}, idempotent=True, retry=policy))
        self.assertEqual(out, b'"posted"')
        self.assertEqual(len(tool.keys), 3)
        self.assertEqual(len(set(tool.keys)), 1, tool.keys)
        # The backoffs were waited: 50 ms, then 100 ms.
        self.assertGreaterEqual(tool.times[1] - tool.times[0], 0.05)
        self.assertGreaterEqual(tool.times[2] - tool.times[1], 0.1)

    def test_gave_up_once(self) -> None:
        server, client = harness.served(self)
        tool = Flaky(failures=100)
        policy = RetryPolicy(max_attempts=2, initial=0.01)
        run = client.run("g")
        atom = run.begin()
        with self.assertRaises(GaveUp) as cm:
            atom.do("http.post", tool, args={"u": 2}, idempotent=True, retry=policy)
        self.assertEqual(cm.exception.reason, "attempts exhausted")
        self.assertEqual(cm.exception.attempts, 2)
        self.assertIsInstance(cm.exception.__cause__, RuntimeError)
        self.assertIn("503 on execution 2", cm.exception.error)
        server.restart()
        with self.assertRaises(GaveUp):
            client.run("g").step(lambda a: a.do("http.post", tool, args={"u": 2}, idempotent=True, retry=policy))
        self.assertEqual(len(tool.keys), 2, "executed after it was given up")

    def test_server_killed_between_attempts(self) -> None:
        """SIGKILL during the backoff after attempt 1 failed: attempt 2
        comes after the rest of the backoff, not at once, and not as
        attempt 1 again."""
        server, client = harness.served(self)
        backoff = 1.5

        def kill_during_backoff(i: int) -> None:
            if i == 1:
                def later() -> None:
                    time.sleep(0.3)
                    server.restart()
                threading.Thread(target=later, daemon=True).start()

        tool = Flaky(failures=1, on_call=kill_during_backoff)
        policy = RetryPolicy(max_attempts=3, initial=backoff)
        c = server.client(retry_for=60)
        self.addCleanup(c.close)
        out = c.run("k").step(lambda atom: atom.do("http.post", tool, args={"u": 3}, idempotent=True, retry=policy))
        self.assertEqual(out, b'"posted"')
        self.assertEqual(len(tool.keys), 2, tool.keys)
        self.assertEqual(len(set(tool.keys)), 1)
        self.assertGreaterEqual(tool.times[1] - tool.times[0], backoff - 0.05, "the backoff was reset by the restart")

    def test_server_killed_during_an_attempt_counts_it(self) -> None:
        """SIGKILL while attempt 2 executes: it is in doubt and counts, so
        a policy of 2 attempts gives the action up after the restart
        rather than executing a third time."""
        server, client = harness.served(self)

        def kill_in_attempt_2(i: int) -> None:
            if i == 2:
                server.kill()
                threading.Thread(target=server.start, daemon=True).start()

        tool = Flaky(failures=100, on_call=kill_in_attempt_2)
        policy = RetryPolicy(max_attempts=2, initial=0.01)
        c = server.client(retry_for=60)
        self.addCleanup(c.close)
        with self.assertRaises(GaveUp) as cm:
            c.run("d").step(lambda atom: atom.do("http.post", tool, args={"u": 4}, idempotent=True, retry=policy))
        self.assertEqual(cm.exception.attempts, 2)
        self.assertEqual(len(tool.keys), 2, tool.keys)



class AsyncRetryTest(unittest.IsolatedAsyncioTestCase):
    async def test_async_retry_and_give_up(self) -> None:
        server = harness.Server()
        self.addCleanup(server.close)
        client = server.async_client(retry_for=20)
        try:
            run = await client.run("a")
            tool = Flaky(failures=1)
            async with run.atom() as atom:
                out = await atom.do("http.post", tool, args={"u": 5}, idempotent=True, retry=RetryPolicy(max_attempts=2, initial=0.01))
                self.assertEqual(out, b'"posted"')
                never = Flaky(failures=100)
                with self.assertRaises(GaveUp) as cm:
                    await atom.do("http.post", never, args={"u": 6}, idempotent=True, retry=RetryPolicy(max_attempts=2, initial=0.01))
                self.assertEqual(cm.exception.attempts, 2)
                atom.delta.set("k", b"v")
            self.assertEqual((len(tool.keys), len(never.keys)), (2, 2))
        finally:
            await client.close()


if __name__ == "__main__":
    unittest.main()
