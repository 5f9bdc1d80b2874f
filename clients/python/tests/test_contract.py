"""The contract's semantics over the wire, with the synchronous client,
against the real server."""

from __future__ import annotations

import json
import threading
import time
import unittest
from dataclasses import replace
from typing import Any, Dict, List

import harness  # noqa: F401  (puts src/ on the path)

import continuum
from continuum import DidNotHappen, Happened


class ContractTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = harness.Server()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.close()

    def setUp(self) -> None:
        self.client = self.server.client(retry_for=20)
        self.addCleanup(self.client.close)

    def run_id(self) -> str:
        return self.id().rsplit(".", 1)[-1]

    def test_atom_commits_delta_and_certified_result(self) -> None:
        run = self.client.run(self.run_id())
        keys: List[str] = []

        def charge(key: str) -> Any:
            keys.append(key)
            return {"charge": "ch_1", "key": key}

        with run.atom() as atom:
            self.assertEqual(atom.seq, 1)
            self.assertIsNone(atom.interrupted)
            out = atom.do_json("billing.charge", charge, args={"cents": 500})
            atom.delta.set_objective("bill").set_json("charge", out).append_message("assistant", "charged")
        self.assertEqual(atom.committed.seq, 1)
        self.assertEqual(keys, [f"ck1-{len(run.id)}:{run.id}:1:0"])
        st = run.state()
        self.assertEqual(st.objective, "bill")
        self.assertEqual(st.json("charge"), out)
        self.assertEqual(st.messages[-1].content, "charged")
        info = run.info()
        self.assertEqual((info.last_seq, info.head, info.lease), (1, atom.committed.head, None))
        rec = run.atom_at(1)
        self.assertEqual(rec.actions[0]["status"], "done")
        self.assertEqual(json.loads(rec.actions[0]["result"]), out)
        self.assertEqual(run.state(0).objective, "")

    def test_certified_action_is_never_executed_again(self) -> None:
        run = self.client.run(self.run_id())
        calls: List[str] = []

        def send(key: str) -> bytes:
            calls.append(key)
            return b"sent"

        with run.atom() as atom:
            self.assertEqual(atom.do("mail.send", send, key="welcome-mail"), b"sent")
        # The seq was committed; the same action in the next atom replays.
        with run.atom() as atom:
            self.assertEqual(atom.do("mail.send", send, key="welcome-mail"), b"sent")
        self.assertEqual(calls, ["welcome-mail"])

    def test_failed_block_fails_the_atom_and_keeps_its_certificates(self) -> None:
        run = self.client.run(self.run_id())
        calls: List[str] = []

        def ex(key: str) -> str:
            calls.append(key)
            return "ok"

        with self.assertRaises(ZeroDivisionError):
            with run.atom() as atom:
                atom.do("t", ex)
                1 / 0
        self.assertEqual(run.info().last_seq, 0)
        # The seq is begun again; the certified action returns its result.
        with run.atom() as atom:
            self.assertEqual(atom.seq, 1)
            self.assertEqual(atom.do("t", ex), b"ok")
        self.assertEqual(len(calls), 1)

    def test_execute_error_is_certified_failed_and_reraised(self) -> None:
        run = self.client.run(self.run_id())
        attempts: List[str] = []

        class Throttled(Exception):
            pass

        def flaky(key: str) -> str:
            attempts.append(key)
            if len(attempts) == 1:
                raise Throttled("429 from the downstream")
            return "charged"

        with run.atom() as atom:
            with self.assertRaises(Throttled):
                atom.do("billing.charge", flaky, key="ch-1")
            # A failed action is executed again, under the same key.
            self.assertEqual(atom.do("billing.charge", flaky, key="ch-1"), b"charged")
        self.assertEqual(attempts, ["ch-1", "ch-1"])

    def abandoned_execution(self, run: continuum.Run, tool: str, idempotent: bool = False) -> str:
        """Begins an atom, gets execute for tool, and vanishes: returns the
        key the action was dispatched under."""
        atom = run.begin()
        seen: List[str] = []

        class Vanish(BaseException):
            pass

        def ex(key: str) -> bytes:
            seen.append(key)
            raise Vanish()

        atom._stop()  # no heartbeat: the client is gone
        try:
            atom.do(tool, ex, idempotent=idempotent)
        except Vanish:
            pass
        return seen[0]

    def test_in_doubt_after_takeover_reconciled(self) -> None:
        run = self.client.run(self.run_id())
        key = self.abandoned_execution(run, "pay")
        with self.assertRaises(continuum.RunHeld) as held:
            run.begin()
        self.assertEqual(held.exception.details["seq"], 1)
        with run.atom(takeover=True) as atom:
            self.assertEqual(atom.interrupted.reason, "takeover")
            self.assertEqual([(a.tool, a.status, a.key) for a in atom.interrupted.actions], [("pay", "in_doubt", key)])
            asked: List[str] = []

            def reconcile(k: str) -> Happened:
                asked.append(k)
                return Happened({"paid": True})

            out = atom.do_json("pay", lambda k: self.fail("an in-doubt action must not be executed"), reconcile=reconcile)
            self.assertEqual(out, {"paid": True})
            self.assertEqual(asked, [key])

    def test_in_doubt_that_did_not_happen_is_executed_again(self) -> None:
        run = self.client.run(self.run_id())
        key = self.abandoned_execution(run, "mail.send")
        keys: List[str] = []
        with run.atom(takeover=True) as atom:
            out = atom.do("mail.send", lambda k: keys.append(k) or b"sent", reconcile=lambda k: DidNotHappen())
        self.assertEqual((out, keys), (b"sent", [key]))

    def test_in_doubt_raised_then_resolved_by_hand(self) -> None:
        run = self.client.run(self.run_id())
        key = self.abandoned_execution(run, "mail.send")
        with run.atom(takeover=True) as atom:
            with self.assertRaises(continuum.InDoubt) as cm:
                atom.do("mail.send", lambda k: b"never")
            doubt = cm.exception
            self.assertEqual((doubt.key, doubt.tool, doubt.call), (key, "mail.send", 0))
            self.assertEqual(atom.resolve(doubt, b"found downstream"), b"found downstream")
        self.assertEqual(json.dumps(run.atom_at(1).actions[0]["status"]), '"resolved"')

    def test_idempotent_in_doubt_after_takeover(self) -> None:
        # The client the attempt was taken from may still be inside the
        # call, and the server cannot bound it: even an idempotent action is
        # reported in doubt, never executed at once; once reconciled as not
        # done it is executed again with its key.
        run = self.client.run(self.run_id())
        key = self.abandoned_execution(run, "bucket.create", idempotent=True)
        keys: List[str] = []
        with self.assertRaises(continuum.InDoubt) as cm:
            with run.atom(takeover=True) as atom:
                atom.do("bucket.create", lambda k: keys.append(k) or b"never", idempotent=True)
        self.assertEqual(cm.exception.key, key)
        self.assertEqual(keys, [])
        with run.atom(takeover=True) as atom:
            atom.do("bucket.create", lambda k: keys.append(k) or b"made", idempotent=True, reconcile=lambda k: DidNotHappen())
        self.assertEqual(keys, [key])

    def test_lease_expiry_frees_the_run(self) -> None:
        run = self.client.run(self.run_id())
        atom = run.begin(lease=0.3)
        atom._stop()
        deadline = time.monotonic() + 10
        while run.info().lease is not None:
            self.assertLess(time.monotonic(), deadline, "the lease did not expire")
            time.sleep(0.05)
        with self.assertRaises(continuum.AttemptLost) as cm:
            atom.commit()
        self.assertEqual(cm.exception.code, "lease_lost")
        with run.atom() as again:
            self.assertEqual(again.seq, 1)
            self.assertEqual(again.interrupted.reason, "lease_expired")

    def test_heartbeats_keep_a_slow_execution_leased(self) -> None:
        run = self.client.run(self.run_id())
        with run.atom(lease=0.3) as atom:
            out = atom.do("slow", lambda k: time.sleep(1.0) or b"done")
        self.assertEqual(out, b"done")
        self.assertEqual(run.info().last_seq, 1)

    def test_invalid_delta_keeps_the_atom_open(self) -> None:
        run = self.client.run(self.run_id())
        atom = run.begin()
        with self.assertRaises(continuum.InvalidDelta) as cm:
            atom.commit(continuum.Delta().set_subgoal_status("nope", "done"))
        self.assertEqual(cm.exception.field, "delta")
        self.assertEqual(atom.commit(continuum.Delta().add_subgoal("s1", "x")).seq, 1)

    def test_tool_decorator(self) -> None:
        run = self.client.run(self.run_id())
        keys: List[str] = []

        @continuum.tool("flights.book")
        def book(origin: str, dest: str, seats: int = 1) -> Dict[str, Any]:
            keys.append(continuum.idempotency_key())
            return {"pnr": "X" + str(len(keys)), "route": f"{origin}-{dest}", "seats": seats}

        with self.assertRaises(continuum.NoAtom):
            book("A", "B")
        with self.assertRaises(continuum.NoAtom):
            continuum.idempotency_key()
        for _ in range(2):
            with self.assertRaises(KeyError):
                with run.atom() as atom:
                    r = book("CDG", "NRT")
                    self.assertEqual(r, {"pnr": "X1", "route": "CDG-NRT", "seats": 1})
                    raise KeyError("fail the atom after the booking")
        self.assertEqual(len(keys), 1)
        rec_args = None
        with run.atom():
            book("CDG", "NRT")
        rec_args = run.atom_at(1).actions[0]["args"]
        self.assertEqual(rec_args, {"origin": "CDG", "dest": "NRT", "seats": 1})
        self.assertEqual(len(keys), 1)

    def test_redacted_args_never_reach_the_store(self) -> None:
        run = self.client.run(self.run_id())
        with run.atom() as atom:
            atom.do("api.call", lambda k: b'{"ok":true,"token":"sk-live-123"}',
                    args={"q": 1, "api_key": "sk-live-123"}, redact=["/api_key"], redact_result=["/token"])
        rec = run.atom_at(1)
        self.assertNotIn("sk-live-123", json.dumps(rec.actions))
        self.assertEqual(json.loads(rec.actions[0]["result"])["token"], "[redacted]")

    def test_commit_answer_lost_across_a_restart(self) -> None:
        run = self.client.run(self.run_id())
        atom = run.begin()
        d = (continuum.Delta().set("k", b"\x00\xff").append_message("assistant", "x").add_subgoal("s1", "")
             .set("", "empty key").add_pending("p", "t", {"b": [1, 2.5], "a": None}).set_objective("")
             .append_message("assistant", tool_calls=[{"id": "c1", "name": "search", "arguments": {"q": "x"}}])
             .append_message("tool", "failed", "search", "c1", is_error=True)
             .append_message("user", parts=[{"kind": "text", "text": "see"}, {"kind": "tool_result", "call_id": "c1", "is_error": False, "text": "ok"}]))
        first = atom.commit(d)
        msgs = run.state().messages
        self.assertEqual(msgs[1].tool_calls, ({"id": "c1", "name": "search", "arguments": {"q": "x"}},))
        self.assertTrue(msgs[2].is_error)
        self.assertEqual(msgs[3].parts[1]["kind"], "tool_result")
        self.server.restart(kill=True)
        # The server knows no attempt now; the commit is found in the log.
        again = atom._drive(continuum._core.commit_flow(atom._path, run.id, atom.seq, d.ops))
        self.assertEqual(again, first)
        other = continuum.Delta().set("k", b"other")
        with self.assertRaises(continuum.AttemptLost):
            atom._drive(continuum._core.commit_flow(atom._path, run.id, atom.seq, other.ops))

    def test_step_survives_a_server_kill_between_effect_and_outcome(self) -> None:
        run = self.client.run(self.run_id())
        effects: List[str] = []

        def ex(key: str) -> bytes:
            effects.append(key)
            if len(effects) == 1:
                self.server.kill()
                threading.Timer(0.2, self.server.start).start()
            return b"effect"

        def step(atom: continuum.Atom) -> bytes:
            out = atom.do("charge", ex)
            atom.delta.set("out", out)
            return out

        self.assertEqual(run.step(step), b"effect")
        # The execution happened once: the client reported it again, and
        # the restarted server, which had it in doubt, was told its result.
        self.assertEqual(len(effects), 1)
        self.assertEqual(run.state().memory["out"], b"effect")
        self.assertEqual(run.atom_at(1).actions[0]["status"], "resolved")

    def test_end_run(self) -> None:
        run = self.client.run(self.run_id())
        with run.atom() as atom:
            atom.delta.set("k", "v")
        held = run.begin()
        with self.assertRaises(continuum.RunHeld):
            run.end("completed")
        held.fail("not this time")
        info = run.end("completed", b'{"deployed":true}')
        self.assertEqual((info.status, info.result, info.last_seq), ("completed", b'{"deployed":true}', 1))
        self.assertIsNotNone(info.ended)
        self.assertEqual(run.end("completed", b'{"deployed":true}').head, info.head)  # a repeat
        with self.assertRaises(continuum.RunEnded):
            run.end("failed")
        with self.assertRaises(continuum.RunEnded):
            with run.atom():
                pass
        self.assertEqual(run.info().status, "completed")

    def test_fork_starts_from_the_source_state(self) -> None:
        src = self.client.run(self.run_id())
        for v in ("1", "2", "3"):
            with src.atom() as atom:
                atom.delta.set("k", v).append_message("assistant", "at " + v)
        fork = self.client.fork(src.id, 2, src.id + "-f")
        self.assertEqual((fork.id, fork.opened.parent, fork.opened.forked_at, fork.opened.last_seq), (src.id + "-f", src.id, 2, 2))
        # Its states up to the fork point are the source's.
        for seq in (0, 1, 2):
            self.assertEqual(replace(fork.state(seq), run=src.id), src.state(seq))
        with self.assertRaises(continuum.NotFound) as cm:
            fork.state(3)
        self.assertEqual(cm.exception.code, "atom_not_found")
        # Its own atoms begin after it, and leave the source alone.
        with fork.atom() as atom:
            self.assertEqual(atom.seq, 3)
            atom.delta.set("k", "f3")
        self.assertEqual((fork.state().text("k"), src.state().text("k")), ("f3", "3"))
        # A repeat (an answer lost) gives the fork back.
        again = self.client.fork(src.id, 2, fork.id)
        self.assertEqual((again.opened.created, again.opened.last_seq), (fork.opened.created, 3))
        # A fork of the fork, at its own atom and below its fork point.
        ff = self.client.fork(fork.id, 3, src.id + "-ff")
        self.assertEqual((ff.opened.parent, ff.opened.forked_at), (fork.id, 3))
        self.assertEqual(replace(ff.state(3), run=fork.id), fork.state(3))
        self.assertEqual(replace(ff.state(1), run=src.id), src.state(1))
        below = self.client.fork(fork.id, 1, src.id + "-below")
        self.assertEqual((below.opened.parent, below.opened.forked_at), (src.id, 1))
        self.assertEqual(ff.info().parent, fork.id)

    def test_fork_errors(self) -> None:
        src = self.client.run(self.run_id())
        with src.atom() as atom:
            atom.delta.set("k", "v")
        other = self.client.run(self.run_id() + "-other")
        with self.assertRaises(continuum.RunNotFound):
            self.client.fork(self.run_id() + "-nope", 0, self.run_id() + "-x")
        with self.assertRaises(continuum.NotFound) as beyond:
            self.client.fork(src.id, 2, self.run_id() + "-x")
        self.assertEqual((beyond.exception.code, beyond.exception.field, beyond.exception.details["last_seq"]), ("atom_not_found", "at", 1))
        with self.assertRaises(continuum.RunExists) as exists:
            self.client.fork(src.id, 1, other.id)
        self.assertEqual((exists.exception.field, exists.exception.details["parent"]), ("id", ""))
        self.client.fork(src.id, 0, self.run_id() + "-f")
        with self.assertRaises(continuum.RunExists):
            self.client.fork(src.id, 1, self.run_id() + "-f")  # the same id, another fork point
        with self.assertRaises(continuum.BadRequest) as neg:
            self.client.fork(src.id, -1, self.run_id() + "-x")
        self.assertEqual(neg.exception.field, "at")
        with self.assertRaises(continuum.BadRequest) as bad_id:
            self.client.fork(src.id, 0, "")
        self.assertEqual((bad_id.exception.code, bad_id.exception.field), ("invalid_run_id", "id"))
        self.assertNotIn(self.run_id() + "-x", [r.id for r in self.client.runs()])

    def test_fork_repeats_certified_actions_without_executing(self) -> None:
        # I10 over the wire: the fork's repeat of the source's tool call at
        # the same position is answered done by the server, with the
        # source's certified result; a differing call gets a new key.
        src = self.client.run(self.run_id())
        executed: List[str] = []

        def charge(key: str) -> Any:
            executed.append(key)
            return {"charge": "ch_1", "key": key}

        def mail(key: str) -> bytes:
            executed.append(key)
            return b"sent " + key.encode()

        with src.atom() as atom:
            receipt = atom.do_json("billing.charge", charge, args={"cents": 500, "customer": "c1"})
            atom.do("mail.send", mail, args={"to": "ops"})
            atom.delta.set_json("receipt", receipt)
        src_keys = list(executed)
        fork = self.client.fork(src.id, 0, self.run_id() + "-f")
        with fork.atom() as atom:
            again = atom.do_json("billing.charge", lambda k: self.fail("a certified action must not be executed"),
                                 args={"customer": "c1", "cents": 500})
            self.assertEqual(again, receipt)
            out = atom.do("mail.send", mail, args={"to": "dev"})
        fork_key = f"ck1-{len(fork.id)}:{fork.id}:1:1"
        self.assertEqual(executed, src_keys + [fork_key])
        self.assertNotIn(fork_key, src_keys)
        self.assertEqual(out, b"sent " + fork_key.encode())
        rec = fork.atom_at(1)
        self.assertEqual([a["key"] for a in rec.actions], [src_keys[0], fork_key])

    def test_verify_and_runs(self) -> None:
        run = self.client.run(self.run_id())
        with run.atom() as atom:
            atom.delta.set("k", "v")
        rep = self.client.verify(deep=True)
        self.assertTrue(rep["ok"], rep)
        self.assertIn(run.id, [r.id for r in self.client.runs()])
        self.assertGreaterEqual(self.client.stats()["server"]["attempts_committed"], 1)

    def test_run_ids_are_escaped(self) -> None:
        for rid in ("a/b", "spaces and ünïcode", "q?x=1#f"):
            run = self.client.run(rid)
            with run.atom() as atom:
                atom.delta.set("id", rid)
            self.assertEqual(run.state().text("id"), rid)
            self.assertEqual(run.info().id, rid)


if __name__ == "__main__":
    unittest.main()
