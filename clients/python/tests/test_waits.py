"""Waits, events and timers against the real server: a run waits after its
atom, an event ends the wait once (idempotent by its sender), the next
atom reads the outcome; timeouts, sleeps, cancels and the ready list; and
the server SIGKILLed at seeded points while a run waits: the event is
delivered exactly once after the restart."""

from __future__ import annotations

import asyncio
import random
import threading
import time
import unittest
from datetime import datetime, timedelta, timezone
from typing import List, Optional

import harness

import continuum


class WaitsTest(unittest.TestCase):
    def test_wait_event_resume(self) -> None:
        _, client = harness.served(self)
        run = client.run("approve-1")
        with run.atom() as atom:
            atom.delta.set("asked", "yes")
        w = run.wait("approval", timeout=3600, after=1)
        self.assertTrue(w.open)
        self.assertEqual((w.run, w.seq, w.name), ("approve-1", 1, "approval"))
        self.assertIsNotNone(w.deadline)
        self.assertEqual(run.wait("approval").declared, w.declared)  # idempotent after the same atom
        with self.assertRaises(continuum.WaitExists):
            run.wait("other")
        with self.assertRaises(continuum.SeqMismatch):
            run.wait("approval", after=0)
        self.assertEqual(client.ready(), [])
        atom = run.begin()
        with self.assertRaises(continuum.WaitNotEnded):
            atom.wait_outcome()
        atom.fail("not yet")

        got: List[Optional[continuum.Wait]] = []
        t = threading.Thread(target=lambda: got.append(run.wait_ended()))
        t.start()
        time.sleep(0.05)
        res = client.send_event("approve-1", "approval", sender="alice-1", payload=b'{"approved": true}')
        self.assertEqual(res, continuum.SendResult(duplicate=False, delivered=True))
        t.join(60)
        self.assertTrue(got and got[0] is not None and got[0].delivered, got)
        self.assertEqual(client.send_event("approve-1", "approval", sender="alice-1", payload=b'{"approved": true}'),
                         continuum.SendResult(duplicate=True, delivered=False))
        with self.assertRaises(continuum.EventMismatch) as cm:
            client.send_event("approve-1", "approval", sender="alice-1", payload=b'{"approved": false}')
        self.assertEqual(cm.exception.field, "sender")
        ready = client.ready(wait=1)
        self.assertEqual([(r.run, r.outcome) for r in ready], [("approve-1", "delivered")])
        with run.atom() as atom:
            w = atom.wait_outcome()
            self.assertTrue(w.delivered)
            assert w.event is not None
            self.assertEqual((w.event.sender, w.event.json()), ("alice-1", {"approved": True}))
            atom.delta.set("approved", "yes")
        self.assertIsNone(run.current_wait())
        self.assertEqual(client.ready(), [])
        self.assertTrue(client.verify(deep=True)["ok"])

    def test_timeout_sleep_cancel(self) -> None:
        _, client = harness.served(self)
        t = client.run("t")
        t.wait("approval", timeout=0.03)
        w = t.wait_ended()
        assert w is not None
        self.assertTrue(w.timed_out, w)
        self.assertFalse(client.send_event("t", "approval", sender="late").delivered)
        s = client.run("s")
        w = s.sleep(until=datetime.now(timezone.utc) + timedelta(milliseconds=40))
        self.assertEqual(w.name, "")
        w2 = s.wait_ended()
        assert w2 is not None
        self.assertTrue(w2.timed_out)
        c = client.run("c")
        c.wait("x")
        self.assertTrue(c.cancel_wait().cancelled)
        with self.assertRaises(continuum.WaitNotFound):
            client.run("d").cancel_wait()
        e = client.run("e")
        e.send_event("go", sender="s1", payload=b"\xff\x00")
        w = e.wait("go")
        self.assertTrue(w.delivered)
        assert w.event is not None
        self.assertEqual(w.event.payload, b"\xff\x00")
        self.assertEqual(sorted(r.run for r in client.ready(wait=1)), ["e", "s", "t"])
        with self.assertRaises(continuum.RunNotFound):
            client.send_event("nope", "x", sender="s")
        with self.assertRaises(ValueError):
            s.sleep()

    def test_server_killed_while_waiting(self) -> None:
        """SIGKILL of the server while runs wait, at a seeded point of
        each: before the event, after it, and after the resumed atom read
        it without committing. The host learns the runs are ready through
        the restart (its long poll retries), the resumed atom reads the
        event once, a repeat is a duplicate, and no copy is left for a
        later wait."""
        rng = random.Random(harness.seed())
        server, client = harness.served(self)
        approver = server.client(retry_for=20)
        self.addCleanup(approver.close)
        points = ["before the event", "after the event", "after the outcome was read"]
        rng.shuffle(points)
        for i, point in enumerate(points + [rng.choice(points)]):
            rid = f"trip-{i}"
            run = client.run(rid)
            with run.atom() as atom:
                atom.delta.set("asked", "yes")
            run.wait("approval", timeout=3600)
            sender = f"human-{rid}"
            payload = b'{"approved": true}'
            ended: List[Optional[continuum.Wait]] = []
            waiter = threading.Thread(target=lambda: ended.append(run.wait_ended(timeout=60)))
            waiter.start()
            if point == "before the event":
                server.kill()
                server.start()
                approver.send_event(rid, "approval", sender=sender, payload=payload)
            elif point == "after the event":
                self.assertTrue(approver.send_event(rid, "approval", sender=sender, payload=payload).delivered)
                server.kill()
                server.start()
            else:
                approver.send_event(rid, "approval", sender=sender, payload=payload)
                atom = run.begin()
                self.assertTrue(atom.wait_outcome().delivered)
                server.kill()
                server.start()
            waiter.join(90)
            self.assertTrue(ended and ended[0] is not None and ended[0].delivered, f"{point}: {ended}")
            self.assertIn(rid, [r.run for r in client.ready(wait=5)], point)
            with run.atom(takeover=True) as atom:
                w = atom.wait_outcome()
                assert w.event is not None
                self.assertEqual((w.outcome, w.event.sender, w.event.payload), ("delivered", sender, payload), point)
                atom.delta.set("booked", "once")
            self.assertTrue(approver.send_event(rid, "approval", sender=sender, payload=payload).duplicate, point)
            self.assertTrue(run.wait("approval", after=2).open, f"{point}: a copy of the event was kept")
            run.cancel_wait()
        self.assertEqual(client.ready(), [])
        self.assertTrue(client.verify(deep=True)["ok"])


class AsyncWaitsTest(unittest.TestCase):
    def test_async_wait_event_resume(self) -> None:
        server, _ = harness.served(self)

        async def main() -> None:
            client = server.async_client(retry_for=20)
            try:
                run = await client.run("async-1")
                async with run.atom() as atom:
                    atom.delta.set("asked", "yes")
                w = await run.wait("approval", timeout=3600, after=1)
                self.assertTrue(w.open)
                ended = asyncio.ensure_future(run.wait_ended())
                await asyncio.sleep(0.05)
                self.assertTrue((await client.send_event("async-1", "approval", sender="a1", payload=b"yes")).delivered)
                got = await ended
                assert got is not None
                self.assertTrue(got.delivered)
                self.assertEqual([r.run for r in await client.ready(wait=1)], ["async-1"])
                async with run.atom() as atom:
                    w = await atom.wait_outcome()
                    assert w.event is not None
                    self.assertEqual(w.event.payload, b"yes")
                self.assertTrue((await run.send_event("approval", sender="a1", payload=b"yes")).duplicate)
                s = await run.sleep(duration=0.02)
                self.assertEqual(s.name, "")
                woke = await run.wait_ended()
                assert woke is not None
                self.assertTrue(woke.timed_out)
                async with run.atom():
                    pass
                await run.wait("x")
                self.assertTrue((await run.cancel_wait()).cancelled)
                cur = await run.current_wait()
                assert cur is not None
                self.assertTrue(cur.cancelled)
            finally:
                await client.close()

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
