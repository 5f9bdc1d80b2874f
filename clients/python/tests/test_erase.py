"""Erasure over the wire: a server with --keyring and --erasable serves an
encrypted store; erase_key leaves the run's state without the key at every
seq, erase leaves the run gone; each refusal has its exception. A server
without --keyring refuses both."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import unittest

import harness  # noqa: F401  (puts src/ on the path)

import continuum


def keyring_file() -> "tuple[str, str]":
    """A keyring file of one key (continuum-keyring 1, mode 0600) in a
    temporary directory; returns both."""
    tmp = tempfile.mkdtemp(prefix="cdkr-", dir="/tmp")
    path = os.path.join(tmp, "store.keyring")
    with open(path, "w") as f:
        f.write("continuum-keyring 1\ncurrent k1\nkey k1 " + os.urandom(32).hex() + "\n")
    os.chmod(path, 0o600)
    return tmp, path


class EraseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp, ring = keyring_file()
        cls.server = harness.Server("--keyring", ring, "--erasable", "email", "--erasable", "contact/phone")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self) -> None:
        self.client = self.server.client(retry_for=20)
        self.addCleanup(self.client.close)

    def test_erase_key_then_the_run(self) -> None:
        run = self.client.run("erase-me")
        with run.atom() as atom:
            atom.delta.set("email", "ada@example.com").set("contact/phone", "+44 20 7946 0000").set("name", "Ada")
        with run.atom() as atom:
            atom.delta.set("email", "ada@example.org")
        self.assertEqual(run.state().memory["email"], b"ada@example.org")

        e = self.client.erase_key(run.id, "email", reason="GDPR request 17")
        self.assertEqual((e.run, e.key, e.seq, e.reason), (run.id, "email", 2, "GDPR request 17"))
        self.assertTrue(e.key_nos)
        self.assertEqual(len(e.head), 64)
        for seq in (None, 1, 2):
            mem = run.state(seq).memory
            self.assertNotIn("email", mem, f"seq {seq}")
            self.assertEqual(mem["name"], b"Ada")
        # A key with a slash travels percent-encoded.
        self.assertEqual(self.client.erase_key(run.id, "contact/phone").reason, "erased by request")
        self.assertNotIn("contact/phone", run.state().memory)

        with self.assertRaises(continuum.NothingToErase):
            self.client.erase_key(run.id, "email")
        with self.assertRaises(continuum.NotErasable):
            self.client.erase_key(run.id, "name")
        with self.assertRaises(continuum.RunNotFound):
            self.client.erase_key("no-such-run", "email")
        with self.assertRaises(continuum.RunNotEnded):
            self.client.erase(run.id)

        self.client.fork(run.id, 1, "erase-me-fork")
        run.end("completed")
        with self.assertRaises(continuum.RunHasForks):
            self.client.erase(run.id)
        self.client.run("erase-me-fork").end("cancelled")
        self.assertIsNotNone(self.client.erase("erase-me-fork").erasure)

        d = self.client.erase(run.id, reason="GDPR request 18")
        self.assertEqual((d.id, d.reason, d.seq), (run.id, "GDPR request 18", 4))  # two atoms, the end at 3
        self.assertIsNotNone(d.erasure)
        assert d.erasure is not None
        self.assertEqual((d.erasure.seq, d.erasure.head, d.erasure.reason), (d.seq, d.head, "GDPR request 18"))
        self.assertEqual(self.client.erase(run.id), d, "a repeated erase returns the erasure")
        for gone in (run.info, run.state, lambda: self.client.run(run.id), lambda: self.client.erase_key(run.id, "email")):
            with self.assertRaises(continuum.RunDeleted):
                gone()
        self.assertNotIn(run.id, [r.id for r in self.client.runs()])

    def test_async_erase(self) -> None:
        async def go() -> None:
            async with self.server.async_client(retry_for=20) as client:
                run = await client.run("erase-async")
                async with run.atom() as atom:
                    atom.delta.set("email", "x@example.com")
                e = await client.erase_key(run.id, "email")
                self.assertEqual((e.key, e.seq), ("email", 1))
                self.assertNotIn("email", (await run.state()).memory)
                await run.end("failed")
                d = await client.erase(run.id)
                self.assertEqual((d.id, d.seq), (run.id, 3))  # one atom, the end at 2
                with self.assertRaises(continuum.RunDeleted):
                    await run.info()

        asyncio.run(go())


class PlaintextEraseTest(unittest.TestCase):
    def test_refused_without_keyring(self) -> None:
        _, client = harness.served(self)
        run = client.run("plain")
        with run.atom() as atom:
            atom.delta.set("email", "ada@example.com")
        with self.assertRaises(continuum.NotEncrypted):
            client.erase_key(run.id, "email")
        run.end("completed")
        with self.assertRaises(continuum.NotEncrypted) as cm:
            client.erase(run.id)
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "keyring"))
        self.assertEqual(run.state().memory["email"], b"ada@example.com")


if __name__ == "__main__":
    unittest.main()
