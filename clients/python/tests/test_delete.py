"""Deletion and garbage collection over the wire, with the synchronous
and the asyncio client, against the real server (SIGKILLed once)."""

from __future__ import annotations

import asyncio
import unittest

import harness  # noqa: F401  (puts src/ on the path)

import continuum


class DeleteTest(unittest.TestCase):
    def test_delete_repeat_refusals_gc(self) -> None:
        server, client = harness.served(self)
        run = client.run("delete-me")
        with run.atom() as atom:
            atom.delta.set("k", "v")
        with self.assertRaises(continuum.RunNotEnded):
            client.delete("delete-me")
        client.fork("delete-me", 1, "delete-fork")
        run.end("completed")
        with self.assertRaises(continuum.RunHasForks):
            client.delete("delete-me")
        client.run("delete-fork").end("cancelled")
        client.delete("delete-fork", reason="fork abandoned")
        d1 = client.delete("delete-me")
        self.assertEqual(d1.id, "delete-me")
        self.assertEqual(client.delete("delete-me"), d1)
        with self.assertRaises(continuum.RunDeleted):
            run.state()
        with self.assertRaises(continuum.RunNotFound):
            client.delete("no-such-run")
        self.assertIn("segments", client.gc())
        server.kill()
        server.start()
        self.assertEqual(client.delete("delete-me"), d1)

        async def aio() -> None:
            ac = server.async_client()
            try:
                r = await ac.run("delete-aio")
                await r.end("completed")
                d = await ac.delete("delete-aio")
                self.assertEqual(d.id, "delete-aio")
                self.assertIn("bytes", await ac.gc())
            finally:
                await ac.close()

        asyncio.run(aio())


class VerifyInspectTest(unittest.TestCase):
    def test_verify_and_inspect_of_a_run(self) -> None:
        server, client = harness.served(self)
        run = client.run("v-1")
        for _ in range(2):
            with run.atom() as atom:
                atom.do("t", lambda k: b"ok")
        v = run.verify()
        self.assertTrue(v["ok"], v)
        self.assertEqual(v["run"]["last_seq"], 2)
        i = run.inspect()
        self.assertEqual((i["atoms"], i["status"], i["head"]), (2, "active", v["run"]["head"]))
        server.kill()
        server.start()
        self.assertEqual(run.inspect()["atoms"], 2)
        self.assertTrue(run.verify(deep=True)["ok"])


class MessagesTest(unittest.TestCase):
    def test_diff(self) -> None:
        _, client = harness.served(self)
        run = client.run("d-a")
        for v in ("1", "2", "3"):
            with run.atom() as atom:
                atom.delta.set("k", v)
        fork = client.fork("d-a", 1, "d-f")
        with fork.atom() as atom:
            atom.delta.set("k", "fork")
        d = run.diff(1, "last")
        self.assertEqual((d["base"]["seq"], d["a"]["ops"], d["b"]["ops"], len(d["b"]["atoms"])), (1, 0, 2, 2))
        d = run.diff(3, 2, other="d-f")
        self.assertEqual((d["base"]["run"], d["base"]["seq"], len(d["a"]["atoms"]), d["b"]["spans"][0]["run"]), ("d-a", 1, 2, "d-f"))
        client.run("d-other")
        with self.assertRaises(continuum.APIError) as cm:
            run.diff(1, 0, other="d-other")
        self.assertEqual(cm.exception.code, "unrelated_runs")

    def test_sent_with_commit_consumed_with_commit_across_sigkill(self) -> None:
        server, client = harness.served(self)
        a, b = client.run("m-a"), client.run("m-b")
        with self.assertRaises(ValueError):
            with a.atom() as atom:
                atom.send("m-b", b"lost")
                raise ValueError("fail the atom: its message is never sent")
        with a.atom() as atom:
            atom.send("m-b", "hello")
        self.assertEqual([m.payload for m in b.inbox()], [b"hello"])
        atom = b.begin()
        m = atom.receive()
        self.assertEqual((m.sender, m.seq, m.index, m.payload), ("m-a", 1, 0, b"hello"))  # the failed atom did not use seq 1
        server.kill()
        server.start()
        with b.atom(takeover=True) as atom:
            self.assertEqual(atom.receive("m-a", wait=0.1).payload, b"hello")
            self.assertIsNone(atom.receive())
        self.assertEqual(b.inbox(), [])


if __name__ == "__main__":
    unittest.main()
