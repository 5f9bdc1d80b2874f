"""The client's pieces without a server: the delta builder, bytes on the
wire, error classes, the call flow, the tool decorator's arguments."""

from __future__ import annotations

import unittest
from typing import Any, Dict, List

import harness  # noqa: F401

import continuum
from continuum import _core, _wire
from continuum.errors import error_from_answer


class WireTest(unittest.TestCase):
    def test_delta_ops(self) -> None:
        d = (continuum.Delta().set_objective("o").add_subgoal("s", "t").set_subgoal_status("s", "done")
             .set("k", b"\x00\xff").set("t", "text").set_json("j", {"a": [1]}).delete("x").append_scratch("n")
             .clear_scratch().append_message("user", "hi").add_pending("c", "tool", {"q": 1}, "key")
             .tool_output("c", "tool", "out").remove_pending("z").drop_messages(1))
        ops = d.ops
        self.assertEqual(len(d), 14)
        self.assertEqual(ops[3], {"op": "set", "key": "k", "value_base64": "AP8="})
        self.assertEqual(ops[4], {"op": "set", "key": "t", "value": "text"})
        self.assertEqual(ops[5], {"op": "set", "key": "j", "value": '{"a":[1]}'})
        self.assertEqual(ops[9], {"op": "append_message", "role": "user", "content": "hi"})
        self.assertEqual(ops[10], {"op": "add_pending", "call_id": "c", "tool": "tool", "args": {"q": 1}, "key": "key"})
        for bad in (lambda: continuum.Delta().set_subgoal_status("s", "finished"),
                    lambda: continuum.Delta().append_message("robot", "x"),
                    lambda: continuum.Delta().add_subgoal("", "x"),
                    lambda: continuum.Delta().drop_messages(-1)):
            with self.assertRaises(ValueError):
                bad()

    def test_bytes_on_the_wire(self) -> None:
        o: Dict[str, Any] = {}
        _wire.put_bytes(o, "result", b"\xff")
        self.assertEqual(o, {"result_base64": "/w=="})
        self.assertEqual(_wire.get_bytes(o, "result"), b"\xff")
        o = {}
        _wire.put_bytes(o, "result", "été")
        self.assertEqual(_wire.get_bytes(o, "result"), "été".encode())
        self.assertIsNone(_wire.get_bytes({}, "result"))
        self.assertEqual(_wire.seg("a/b c"), "a%2Fb%20c")

    def test_same_delta_compares_values_not_spelling(self) -> None:
        sent = continuum.Delta().set("k", "v").append_message("tool", "x", tool="t", call_id="c").ops
        stored = [{"op": "set", "key": "k", "value_base64": "dg=="},
                  {"op": "append_message", "role": "tool", "content": "x", "tool": "t", "call_id": "c"}]
        self.assertTrue(_wire.same_delta(sent, stored))
        self.assertFalse(_wire.same_delta(sent, stored[:1]))
        # Empty texts: the server's form leaves them out.
        sent = continuum.Delta().add_subgoal("s", "").set("", "v").ops
        self.assertTrue(_wire.same_delta(sent, [{"op": "add_subgoal", "id": "s"}, {"op": "set", "value": "v"}]))

    def test_request_ids_differ_across_seeds_and_forks(self) -> None:
        import os
        import random

        random.seed(42)
        a = _wire.request_id()
        random.seed(42)
        b = _wire.request_id()
        self.assertNotEqual(a, b, "an agent's random.seed must not repeat the client's ids")
        self.assertRegex(a, "^[0-9a-f]{32}$")
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(w, _wire.request_id().encode())
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        with os.fdopen(r) as f:
            child = f.read()
        self.assertRegex(child, "^[0-9a-f]{32}$")
        self.assertNotEqual(child, _wire.request_id(), "a forked child draws the ids its parent draws next")

    def test_errors_by_code(self) -> None:
        def err(status: int, code: str) -> continuum.APIError:
            return error_from_answer(status, {"error": {"code": code, "message": "m", "field": "f", "details": {"seq": 1}}})

        self.assertIsInstance(err(409, "run_held"), continuum.RunHeld)
        self.assertIsInstance(err(409, "run_held"), continuum.Conflict)
        self.assertIsInstance(err(409, "run_ended"), continuum.RunEnded)
        self.assertIsInstance(err(409, "lease_lost"), continuum.AttemptLost)
        self.assertIsInstance(err(404, "attempt_not_found"), continuum.AttemptLost)
        self.assertIsInstance(err(404, "run_not_found"), continuum.RunNotFound)
        self.assertIsInstance(err(422, "invalid_delta"), continuum.InvalidDelta)
        self.assertIsInstance(err(413, "too_large"), continuum.TooLarge)
        self.assertIsInstance(err(503, "shutting_down"), continuum.ShuttingDown)
        self.assertIsInstance(err(500, "storage"), continuum.ServerError)
        e = err(400, "bad_request")
        self.assertIsInstance(e, continuum.BadRequest)
        self.assertEqual((e.status, e.code, e.field, e.details), (400, "bad_request", "f", {"seq": 1}))
        self.assertIsInstance(error_from_answer(502, b"gateway"), continuum.ServerError)


def drive(flow: Any, answers: List[Dict[str, Any]], execute: Any = None, reconcile: Any = None) -> Any:
    """Runs a flow against canned answers; returns (result, effects)."""
    effects: List[Any] = []
    value: Any = None
    while True:
        try:
            eff = flow.send(value)
        except StopIteration as stop:
            return stop.value, effects
        effects.append(eff)
        if isinstance(eff, _core.Request):
            value = answers.pop(0)
        elif isinstance(eff, _core.Execute):
            try:
                value = ("ok", execute(eff.key))
            except Exception as e:
                value = ("err", e)
        else:
            value = reconcile(eff.key)


class CallFlowTest(unittest.TestCase):
    def test_execute_then_done(self) -> None:
        known: Dict[str, bytes] = {}
        flow = _core.call_flow("/a", 0, "t", {"status": "execute", "key": "k"}, known)
        out, effects = drive(flow, [{"status": "done", "key": "k", "result": "r"}], execute=lambda k: b"r")
        self.assertEqual(out, b"r")
        self.assertEqual(effects[1], _core.Request("POST", "/a/calls/0/outcome", {"result": "r"}, repeat_pending=True, deferrable=True))
        self.assertEqual(known, {})

    def test_execute_error_is_reported_and_reraised(self) -> None:
        flow = _core.call_flow("/a", 2, "t", {"status": "execute", "key": "k"}, {})

        def boom(k: str) -> bytes:
            raise KeyError("gone")

        with self.assertRaises(KeyError):
            drive(flow, [{"status": "failed", "key": "k", "error": "KeyError: 'gone'"}], execute=boom)

    def test_known_result_settles_in_doubt_and_execute(self) -> None:
        known = {"k": b"earlier"}
        flow = _core.call_flow("/a", 0, "t", {"status": "in_doubt", "key": "k"}, known)
        out, effects = drive(flow, [{"status": "done", "key": "k", "result": "earlier", "resolved": True}])
        self.assertEqual(out, b"earlier")
        self.assertEqual(effects[0].path, "/a/calls/0/resolve")
        known = {"k": b"earlier"}
        flow = _core.call_flow("/a", 0, "t", {"status": "execute", "key": "k"}, known)
        out, effects = drive(flow, [{"status": "done", "key": "k", "result": "earlier"}],
                             execute=lambda k: self.fail("executed twice"))
        self.assertEqual(out, b"earlier")

    def test_reconcile(self) -> None:
        flow = _core.call_flow("/a", 0, "t", {"status": "in_doubt", "key": "k"}, {})
        out, effects = drive(flow, [{"status": "execute", "key": "k"}, {"status": "done", "key": "k", "result": "again"}],
                             execute=lambda k: b"again", reconcile=lambda k: continuum.DidNotHappen("no trace"))
        self.assertEqual(out, b"again")
        self.assertEqual(effects[1].body, {"failed": "no trace", "retry": True})
        with self.assertRaises(TypeError):
            _core.resolution("yes")  # type: ignore[arg-type]

    def test_failed_without_an_exception_of_ours(self) -> None:
        flow = _core.call_flow("/a", 1, "t", {"status": "failed", "key": "k", "error": "refused"}, {})
        with self.assertRaises(continuum.ActionFailed) as cm:
            drive(flow, [])
        self.assertEqual((cm.exception.call, cm.exception.error), (1, "refused"))


class ToolArgsTest(unittest.TestCase):
    def test_bound_arguments_are_the_args(self) -> None:
        seen: List[Any] = []

        class FakeAtom(continuum.Atom):
            def __init__(self) -> None:  # no server
                pass

            def do_json(self, tool: str, execute: Any, **kw: Any) -> Any:
                seen.append((tool, kw["args"], kw["idempotent"]))
                return execute("the-key")

        @continuum.tool("x.y", idempotent=True)
        def f(a: int, b: str = "d") -> str:
            return f"{a}{b}{continuum.idempotency_key()}"

        token = continuum._tool.current.set(FakeAtom())
        try:
            self.assertEqual(f(1), "1dthe-key")
            with self.assertRaises(TypeError):
                f(object())
            with self.assertRaises(TypeError):
                f(1, c=2)  # type: ignore[call-arg]
        finally:
            continuum._tool.current.reset(token)
        self.assertEqual(seen, [("x.y", {"a": 1, "b": "d"}, True)])


if __name__ == "__main__":
    unittest.main()
