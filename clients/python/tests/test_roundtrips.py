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

    def test_atom_with_k_actions_is_k_plus_one_requests(self) -> None:
        """begin + call 0; outcome 0 + call 1; ...; outcome k-1 + commit."""
        for k in (1, 2, 5):
            run = self.client.run(f"k-actions-{k}")
            before = self.requests()
            with run.atom() as atom:
                outs = [atom.do(f"t{i}", lambda key, i=i: f"r{i}".encode()) for i in range(k)]
                atom.delta.set("k", b",".join(outs))
            self.assertEqual(self.requests() - before - 1, k + 1, f"{k} actions")
            rec = run.atom_at(1)
            self.assertEqual([a["status"] for a in rec.actions], ["done"] * k)
            self.assertEqual([a["result"] for a in rec.actions], [f"r{i}" for i in range(k)])
            self.assertEqual(run.state().text("k"), ",".join(f"r{i}" for i in range(k)))

    def test_held_outcome_is_certified_before_a_fail(self) -> None:
        """An atom that raises after an action: the held outcome is sent
        before the fail, so the action is certified (done), not in doubt,
        and the next attempt gets its result without executing."""
        run = self.client.run("held-then-fail")
        ran = []
        with self.assertRaises(RuntimeError):
            with run.atom() as atom:
                atom.do("t", lambda key: ran.append(key) or b"once")
                raise RuntimeError("the agent gave up")
        with run.atom() as atom:
            out = atom.do("t", lambda key: ran.append(key) or b"twice")
            atom.delta.set("k", out)
        self.assertEqual(len(ran), 1)
        self.assertEqual(run.state().text("k"), "once")

    def test_invalid_delta_certifies_the_held_outcome(self) -> None:
        """A ridden commit whose delta is refused: the outcome is sent
        alone (the action is certified, not left to fall in doubt), and a
        commit with a good delta commits."""
        run = self.client.run("held-bad-delta")
        atom = run.begin()
        atom.do("t", lambda key: b"r")
        bad = continuum.Delta()
        bad._ops.append({"op": "no-such-op"})
        with self.assertRaises(continuum.errors.APIError) as cm:
            atom.commit(bad)
        self.assertTrue((cm.exception.field or "").startswith("commit."), cm.exception)
        calls = self.client._send(continuum._core.Request("GET", f"/v1/runs/held-bad-delta/attempts/{atom.attempt}"))
        self.assertEqual([c["status"] for c in calls["calls"]], ["done"], calls)
        atom.delta.set("k", "v")
        done = atom.commit()
        self.assertEqual(done.seq, 1)
        self.assertEqual([a["status"] for a in run.atom_at(1).actions], ["done"])

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
