"""The example agent (examples/llm_agent.py), an LLM tool-calling loop
against the local stub of an OpenAI-style endpoint, SIGKILLed in the middle
of a turn (right after its booking took effect, then right after its mail
did) and started again: it finishes with the answer, every effect taken
once, and the model asked once per turn (the interrupted turn's answer is
replayed from the ledger, not sampled again)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import unittest

import harness

EXAMPLES = os.path.join(os.path.dirname(harness.HERE), "examples")
sys.path.insert(0, EXAMPLES)

import stub_llm  # noqa: E402


class ExampleAgentTest(unittest.TestCase):
    def test_llm_agent_killed_mid_turn_resumes(self) -> None:
        server = harness.Server()
        self.addCleanup(server.close)
        stub = stub_llm.Stub().start()
        self.addCleanup(stub.close)
        env = dict(os.environ, CONTINUUMD_SOCKET=server.socket, LLM_URL=stub.url, WORLD_URL=stub.url)
        cmd = [sys.executable, os.path.join(EXAMPLES, "llm_agent.py"), "trip-1"]
        outputs = []
        for kill_at in ("book", "mail", None):
            child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
        # Four turns asked the model (search, book, mail, answer); the two
        # interrupted turns' answers came from the ledger.
        self.assertEqual(stub.completions, 4)
        client = server.client()
        self.addCleanup(client.close)
        st = client.run("trip-1").state()
        self.assertEqual(st.text("answer"), answer[0][len("ANSWER "):])
        self.assertTrue(client.verify(deep=True)["ok"])


if __name__ == "__main__":
    unittest.main()
