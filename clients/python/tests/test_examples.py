"""The example agent (examples/llm_agent.py), an LLM tool-calling loop
against the local stub of an OpenAI-style endpoint. It asks a human before
booking: it waits, durably, for the approval event. It is SIGKILLed while
it waits, started again (it waits on), resumes when the approval is
posted, is SIGKILLed right after its booking took effect, then right after
its mail did, and started again: it finishes with the answer, every effect
taken once, and the model asked once per turn (the interrupted turns'
answers are replayed from the ledger, not sampled again). A denied
approval, and one that timed out while the agent was dead, end the run
without booking."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import unittest
from typing import List

import harness

EXAMPLES = os.path.join(os.path.dirname(harness.HERE), "examples")
sys.path.insert(0, EXAMPLES)

import stub_llm  # noqa: E402


class ExampleAgentTest(unittest.TestCase):
    def agent(self, server: harness.Server, stub: "stub_llm.Stub", run: str, **env: str) -> "subprocess.Popen[str]":
        e = dict(os.environ, CONTINUUMD_SOCKET=server.socket, LLM_URL=stub.url, WORLD_URL=stub.url, **env)
        return subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "llm_agent.py"), run], env=e,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def read_until(self, child: "subprocess.Popen[str]", prefix: str, lines: List[str]) -> str:
        """Reads the agent's lines until one starts with prefix."""
        assert child.stdout is not None
        while True:
            line = child.stdout.readline()
            if not line:
                child.wait()
                self.fail(f"the agent ended (exit {child.returncode}) before {prefix!r}: {lines}\n{child.stderr.read() if child.stderr else ''}")
            lines.append(line)
            if line.startswith(prefix):
                return line.strip()

    def kill(self, child: "subprocess.Popen[str]") -> None:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)

    def test_llm_agent_killed_while_waiting_resumes_on_approval(self) -> None:
        server = harness.Server()
        self.addCleanup(server.close)
        stub = stub_llm.Stub().start()
        self.addCleanup(stub.close)
        client = server.client()
        self.addCleanup(client.close)
        lines: List[str] = []
        # Killed while it waits for the approval.
        child = self.agent(server, stub, "trip-1")
        waiting = self.read_until(child, "WAITING ", lines)
        self.kill(child)
        self.assertEqual(stub.booking_effects, {}, "booked before the approval")
        # Started again, it waits on; the approval is posted; it books and
        # is killed right after the booking took effect.
        child = self.agent(server, stub, "trip-1")
        self.assertEqual(self.read_until(child, "WAITING ", lines), waiting)
        stub.hooks["book"] = lambda child=child: child.send_signal(signal.SIGKILL)
        event = waiting.split()[-1]
        res = client.send_event("trip-1", event, sender="alice", payload=json.dumps({"approved": True}))
        self.assertTrue(res.delivered, res)
        out, err = child.communicate(timeout=120)
        self.assertEqual(child.returncode, -signal.SIGKILL, f"the agent was not killed at book:\n{out}\n{err}")
        # The approver's repeat is a duplicate: nothing more happens.
        self.assertTrue(client.send_event("trip-1", event, sender="alice", payload=json.dumps({"approved": True})).duplicate)
        outputs = []
        for kill_at in ("mail", None):
            child = self.agent(server, stub, "trip-1")
            if kill_at:
                stub.hooks[kill_at] = lambda child=child: child.send_signal(signal.SIGKILL)
            out, err = child.communicate(timeout=120)
            outputs.append(out)
            if kill_at:
                self.assertEqual(child.returncode, -signal.SIGKILL, f"the agent was not killed at {kill_at}:\n{out}\n{err}")
            else:
                self.assertEqual(child.returncode, 0, err)
        answer = [l for l in outputs[-1].splitlines() if l.startswith("ANSWER ")]
        self.assertEqual(len(answer), 1, outputs)
        self.assertIn("JL046", answer[0])
        self.assertEqual(list(stub.booking_effects.values()), [1], "the flight was booked more than once")
        self.assertEqual(list(stub.mail_effects.values()), [1], "the confirmation was mailed more than once")
        pnr = next(iter(stub.bookings.values()))["pnr"]
        self.assertIn(pnr, answer[0])
        # Four turns asked the model (search, book, mail, answer); the
        # interrupted turns' answers came from the ledger, and the turn
        # after the wait asked none.
        self.assertEqual(stub.completions, 4)
        st = client.run("trip-1").state()
        self.assertEqual(st.text("answer"), answer[0][len("ANSWER "):])
        self.assertEqual(st.text("approval"), "approved")
        self.assertEqual(client.ready(), [])
        self.assertTrue(client.verify(deep=True)["ok"])

    def test_llm_agent_denied_or_timed_out_does_not_book(self) -> None:
        server = harness.Server()
        self.addCleanup(server.close)
        stub = stub_llm.Stub().start()
        self.addCleanup(stub.close)
        client = server.client()
        self.addCleanup(client.close)
        lines: List[str] = []
        # Denied while the agent waits.
        child = self.agent(server, stub, "trip-denied")
        event = self.read_until(child, "WAITING ", lines).split()[-1]
        client.send_event("trip-denied", event, sender="bob", payload=json.dumps({"approved": False}))
        out, err = child.communicate(timeout=120)
        self.assertEqual(child.returncode, 0, err)
        self.assertIn("ANSWER Not booked", out)
        self.assertIn("denied by bob", out)
        # Timed out while no agent ran: started again, it ends at once.
        child = self.agent(server, stub, "trip-late", APPROVAL_TIMEOUT="0.3")
        self.read_until(child, "WAITING ", lines)
        self.kill(child)
        time.sleep(0.4)
        child = self.agent(server, stub, "trip-late", APPROVAL_TIMEOUT="0.3")
        out, err = child.communicate(timeout=120)
        self.assertEqual(child.returncode, 0, err)
        self.assertIn("APPROVAL timed_out", out)
        self.assertIn("ANSWER Not booked", out)
        self.assertEqual(stub.booking_effects, {}, "booked without an approval")
        for rid in ("trip-denied", "trip-late"):
            self.assertEqual(client.run(rid).info().status, "cancelled")
        self.assertTrue(client.verify(deep=True)["ok"])

if __name__ == "__main__":
    unittest.main()
