"""Rollback with compensations over the wire against the real server:
each compensation runs in the client exactly once, newest first, across
SIGKILLs of the server at seeded points."""

from __future__ import annotations

import random
import unittest
from typing import Any, Dict, Mapping

import harness  # noqa: F401  (puts src/ on the path)

import continuum


class RollbackTest(unittest.TestCase):
    def test_rollback_across_server_kills(self) -> None:  # noqa: C901
        rng = random.Random(harness.seed())
        server, client = harness.served(self)
        run = client.run("rb")
        with run.atom() as atom:
            atom.delta.set("x", "1")
        for i in range(3):
            with run.atom() as atom:
                atom.do("pay", lambda k: b"paid", args={"i": i}, compensate={"tool": "refund", "args": {"i": i}, "idempotent": i == 1})
                atom.delta.set(f"p{i}", "paid")
        with run.atom() as atom:
            atom.do("notify", lambda k: b"sent", args={})
        with self.assertRaises(continuum.Conflict) as cm:
            run.rollback(1, lambda s: b"")
        self.assertEqual(cm.exception.code, "not_undone")

        effects: Dict[str, int] = {}
        order = []
        kills = 0

        def refund(step: Mapping[str, Any]) -> bytes:
            nonlocal kills
            if rng.random() < 0.3:
                kills += 1
                server.kill()  # before the effect: its outcome is never reported
                server.start()
                raise continuum.Unavailable("killed")
            if not (step["idempotent"] and effects.get(step["key"])):  # an idempotent downstream honours the key
                effects[step["key"]] = effects.get(step["key"], 0) + 1
                order.append(step["args"]["i"])
            if rng.random() < 0.2:
                kills += 1
                server.kill()  # after the effect, before its outcome: reconciled as happened
                server.start()
                raise continuum.Unavailable("killed")
            return b"refunded"

        def reconcile(step: Mapping[str, Any]) -> "continuum.Happened | continuum.DidNotHappen":
            return continuum.Happened(b"refunded") if effects.get(step["key"]) else continuum.DidNotHappen()

        done = None
        for _ in range(50):
            try:
                done = run.rollback(1, refund, allow_not_undone=True, reconcile=reconcile)
                break
            except (continuum.Unavailable, continuum.ActionFailed, continuum.APIError):
                self.assertIsNotNone(run.pending_rollback())
        assert done is not None
        self.assertEqual(sorted(effects.values()), [1, 1, 1], effects)
        self.assertEqual(order, [2, 1, 0])
        self.assertEqual(len(done["not_undone"]), 1)
        st = run.state()
        self.assertEqual((st.seq, st.text("x"), st.text("p0")), (done["seq"], "1", None))
        self.assertIsNone(run.pending_rollback())
        print(f"{kills} kills")


if __name__ == "__main__":
    unittest.main()
