"""Round trips: the begin rides on an atom's first request (its first
call, or its commit), against the real server, counted by its stats."""

from __future__ import annotations

import unittest

import harness  # noqa: F401  (puts src/ on the path)

import continuum


class RoundTripTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = harness.Server()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.close()

    def setUp(self) -> None:
        self.client = self.server.client(retry_for=20)
        self.addCleanup(self.client.close)

    def requests(self) -> int:
        return int(self.client.stats()["server"]["requests"]) - 1  # without this stats request

    def test_atom_without_actions_is_one_request(self) -> None:
        run = self.client.run("no-actions")
        before = self.requests()
        with run.atom() as atom:
            atom.delta.set("k", "v")
        self.assertEqual(self.requests() - before - 1, 1)
        self.assertEqual(atom.committed.seq, 1)
        self.assertEqual(run.state().text("k"), "v")

    def test_atom_with_one_action_is_three_requests(self) -> None:
        run = self.client.run("one-action")
        before = self.requests()
        with run.atom() as atom:
            out = atom.do("t", lambda k: b"r")
            atom.delta.set("k", out)
        self.assertEqual(self.requests() - before - 1, 3)  # begin + call, outcome, commit
        self.assertEqual(len(run.atom_at(1).actions), 1)

    def test_stale_next_seq_begins_first(self) -> None:
        """Another client committed meanwhile: the ridden commit is refused
        (seq_mismatch) and the atom is begun, then committed, at the run's
        next seq; nothing is committed twice."""
        a = self.client.run("two-clients")
        other = self.server.client()
        self.addCleanup(other.close)
        b = other.run("two-clients")
        with b.atom() as atom:
            atom.delta.set("k", "b")
        with a.atom() as atom:
            atom.delta.set("k", "a")
        self.assertEqual(atom.committed.seq, 2)
        self.assertEqual(a.info().last_seq, 2)
        self.assertEqual(a.state().text("k"), "a")

    def test_commit_found_in_the_store_begins_nothing_more(self) -> None:
        """The ridden commit is refused (seq_mismatch) and the atom at its
        seq holds its very delta, as when its answer was lost in a restart
        of the server: the atom is committed, and reading its seq after
        that begins no new attempt (which would hold the run)."""
        a = self.client.run("found-in-store")
        other = self.server.client(retry_for=20)
        self.addCleanup(other.close)
        b = other.run("found-in-store")
        with b.atom() as atom:
            atom.delta.set("k", "v")
        with a.atom() as atom:
            atom.delta.set("k", "v")
        self.assertEqual(atom.committed.seq, 1)
        before = self.requests()
        self.assertEqual(atom.seq, 1)
        self.assertEqual(self.requests() - before - 1, 0)
        with b.atom() as atom2:
            atom2.delta.set("k", "w")
        self.assertEqual(atom2.committed.seq, 2)

    def test_reading_seq_begins(self) -> None:
        run = self.client.run("reads-seq")
        with run.atom() as atom:
            self.assertEqual(atom.seq, 1)
            self.assertIsNone(atom.interrupted)
        self.assertEqual(run.info().last_seq, 1)

    def test_failure_before_any_request_begins_nothing(self) -> None:
        run = self.client.run("nothing-begun")
        with self.assertRaises(ValueError):
            with run.atom():
                raise ValueError("the agent gave up")
        with run.atom() as atom:
            atom.delta.set("k", "v")
        self.assertEqual(atom.committed.seq, 1)


if __name__ == "__main__":
    unittest.main()
