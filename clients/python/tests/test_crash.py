"""A Python agent SIGKILLed at seeded points while a fake downstream counts
effects per idempotency key: 0 duplicate effects, 0 lost acknowledged
atoms, every in-doubt action reconciled. CRASH_KILLS sets the number of
kills (default 12); CONTINUUM_SEED repeats a run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import unittest
from typing import Dict, List, Optional, Tuple

import harness

HERE = os.path.dirname(os.path.abspath(__file__))


class Child:
    """The agent process, its stdout read line by line."""

    def __init__(self, env: Dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "agent_child.py")], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: List[str] = []
        self.acked = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.acked:
                self.lines.append(line.strip())
                self.acked.notify_all()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.reader.join(5)

    def close(self) -> str:
        """Kills the agent if it runs, and returns its stderr."""
        self.kill()
        err = self.proc.stderr.read() if self.proc.stderr else ""
        for f in (self.proc.stdout, self.proc.stderr):
            if f:
                f.close()
        return err

    def acks(self) -> List[Tuple[int, str]]:
        with self.acked:
            return [(int(l.split()[1]), l.split()[2]) for l in self.lines if l.startswith("ACK ")]


class ClientCrashTest(unittest.TestCase):
    def test_agent_sigkilled_at_seeded_points(self) -> None:
        s = harness.seed()
        rng = random.Random(s)
        kills = int(os.environ.get("CRASH_KILLS", "12"))
        target = 10 * kills + 10  # enough work that every kill finds the agent working
        server = harness.Server(lease="5s")
        self.addCleanup(server.close)
        ds = harness.Downstream(latency=0.005)
        self.addCleanup(ds.close)
        env = dict(os.environ, CONTINUUMD_SOCKET=server.socket, DOWNSTREAM_URL=ds.url, RUN=f"crash-{s}", ATOMS=str(target),
                   PYTHONPATH=os.pathsep.join([HERE, harness.SRC]))
        client = server.client()
        self.addCleanup(client.close)
        acked: Dict[int, str] = {}
        reconciled = 0
        modes: Dict[str, int] = {}

        for k in range(kills):
            mode = rng.choice(["delay", "before_effect", "after_effect", "after_ack"])
            modes[mode] = modes.get(mode, 0) + 1
            child = Child(env)
            killed = threading.Event()
            nth = rng.randint(1, 3)
            seen = [0]

            def hook(call: dict, before: bool, child: Child = child, killed: threading.Event = killed,
                     nth: int = nth, seen: List[int] = seen, mode: str = mode) -> Optional[bool]:
                if killed.is_set() or mode != ("before_effect" if before else "after_effect"):
                    return None
                seen[0] += 1
                if seen[0] < nth:
                    return None
                killed.set()  # before the kill: the main loop must not see the exit first
                child.kill()  # SIGKILL while the downstream holds the call
                return False if before else None

            ds.before = lambda call, hook=hook: hook(call, True)
            ds.after = lambda call, hook=hook: hook(call, False)
            if mode == "delay":
                time.sleep(rng.uniform(0.02, 0.3))
                child.kill()
            elif mode == "after_ack":  # right after an atom was acknowledged
                want = nth
                deadline = time.monotonic() + 20
                with child.acked:
                    while len([l for l in child.lines if l.startswith("ACK ")]) < want and child.proc.poll() is None:
                        child.acked.wait(0.1)
                        if time.monotonic() > deadline:
                            break
                child.kill()
            else:
                deadline = time.monotonic() + 20
                while not killed.wait(0.05) and child.proc.poll() is None:
                    if time.monotonic() > deadline:
                        self.fail(f"seed {s} kill {k} ({mode}): the agent made no call to kill it in:\n{child.close()}")
                if not killed.is_set():
                    self.fail(f"seed {s} kill {k} ({mode}): the agent exited {child.proc.returncode} before its kill:\n{child.close()}")
            child.close()
            ds.before = ds.after = None
            self.check(client, s, k, mode, child, acked, ds)
            reconciled += sum(1 for l in child.lines if l.startswith("RECONCILED "))

        # Then run to the end without kills.
        child = Child(env)
        child.proc.wait(120)
        child.reader.join(5)
        stderr = child.close()
        self.assertEqual(child.proc.returncode, 0, f"the agent failed:\n{stderr}")
        self.assertIn(f"DONE {target}", child.lines)
        self.check(client, s, kills, "final", child, acked, ds)
        reconciled += sum(1 for l in child.lines if l.startswith("RECONCILED "))

        run = client.run(f"crash-{s}")
        keys = set()
        for seq in range(1, target + 1):
            for a in run.atom_at(seq).actions:
                keys.add(a["key"])
        with ds.lock:
            effects = dict(ds.effects)
        dup = {k: n for k, n in effects.items() if n != 1}
        self.assertEqual(dup, {}, f"seed {s}: keys that took effect more than once")
        self.assertEqual(set(effects), keys, f"seed {s}: effects of no committed action, or committed actions with no effect")
        rep = client.verify(deep=True)
        self.assertTrue(rep["ok"], rep)
        print(f"client kills: {kills} {modes}, {target} atoms, {len(keys)} actions each taking effect once, "
              f"{reconciled} in-doubt actions reconciled", file=sys.stderr)

    def check(self, client: "object", s: int, k: int, mode: str, child: Child, acked: Dict[int, str], ds: harness.Downstream) -> None:
        run = client.run(f"crash-{s}")  # type: ignore[attr-defined]
        for seq, head in child.acks():
            acked[seq] = head
        last = run.info().last_seq
        for seq, head in acked.items():
            self.assertLessEqual(seq, last, f"seed {s} kill {k} ({mode}): acknowledged seq {seq} lost")
            self.assertEqual(run.atom_at(seq).head, head, f"seed {s} kill {k} ({mode}): the head of acknowledged seq {seq} changed")
        with ds.lock:
            dup = {key: n for key, n in ds.effects.items() if n > 1}
        self.assertEqual(dup, {}, f"seed {s} kill {k} ({mode}): duplicate effects")


if __name__ == "__main__":
    unittest.main()
