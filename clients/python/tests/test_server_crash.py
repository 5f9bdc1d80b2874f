"""The server SIGKILLed and restarted under load: Python clients keep
running steps (retrying through the outage); nothing acknowledged is lost,
no key takes effect twice, every interrupted action is settled.
SERVER_KILLS sets the number of kills (default 8)."""

from __future__ import annotations

import os
import random
import sys
import threading
import time
import unittest
from typing import Dict, List, Tuple

import harness

import continuum
from continuum import DidNotHappen, Happened


class ServerCrashTest(unittest.TestCase):
    def test_server_sigkilled_under_load(self) -> None:
        s = harness.seed()
        rng = random.Random(s)
        kills = int(os.environ.get("SERVER_KILLS", "8"))
        clients = 4
        server = harness.Server()
        self.addCleanup(server.close)
        ds = harness.Downstream(latency=0.002)
        self.addCleanup(ds.close)
        lock = threading.Lock()
        acked: Dict[str, Dict[int, str]] = {f"load-{i}": {} for i in range(clients)}
        reconciled: List[str] = []
        errors: List[BaseException] = []
        stop = threading.Event()

        def reconcile(key: str) -> "Happened | DidNotHappen":
            found, result = harness.lookup_downstream(ds.url, key)
            with lock:
                reconciled.append(key)
            return Happened(result) if found else DidNotHappen()

        def worker(run_id: str) -> None:
            try:
                client = server.client(retry_for=30)
                run = client.run(run_id)
                last: List[continuum.Atom] = []

                def step(atom: continuum.Atom) -> None:
                    last.append(atom)
                    args = {"run": run_id, "seq": atom.seq}
                    idem = atom.seq % 2 == 0
                    out = atom.do_json("charge", lambda key: harness.call_downstream(ds.url, "charge", args, key, idem),
                                       args=args, idempotent=idem, reconcile=reconcile)
                    atom.delta.set_json("charge", out)

                while not stop.is_set():
                    # step begins again when the server restarted mid-atom.
                    run.step(step)
                    c = last[-1].committed
                    assert c is not None
                    with lock:
                        acked[run_id][c.seq] = c.head
                client.close()
            except BaseException as e:  # noqa: BLE001 - reported by the test
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(f"load-{i}",), daemon=True) for i in range(clients)]
        for t in threads:
            t.start()
        check = server.client()
        self.addCleanup(check.close)
        for k in range(kills):
            if k % 2 == 0:
                time.sleep(rng.uniform(0.05, 0.3))
                server.kill()
            else:
                # Kill between an effect and its outcome's report.
                hit = threading.Event()

                once = threading.Lock()

                def after(call: dict, hit: threading.Event = hit, once: threading.Lock = once) -> None:
                    if once.acquire(blocking=False):
                        server.kill()
                        hit.set()

                ds.after = after
                self.assertTrue(hit.wait(20), f"seed {s}: no call to kill the server after")
                ds.after = None
            with lock:
                snapshot = {r: dict(a) for r, a in acked.items()}
            server.start()
            for run_id, seqs in snapshot.items():
                run = check.run(run_id)
                last = run.info().last_seq
                for seq, head in seqs.items():
                    self.assertLessEqual(seq, last, f"seed {s} kill {k}: {run_id} acknowledged seq {seq} lost")
                    self.assertEqual(run.atom_at(seq).head, head, f"seed {s} kill {k}: {run_id} head of seq {seq} changed")
        time.sleep(0.3)
        stop.set()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [], f"seed {s}")
        committed = set()
        total = 0
        for run_id in acked:
            run = check.run(run_id)
            last = run.info().last_seq
            total += last
            for seq in range(1, last + 1):
                for a in run.atom_at(seq).actions:
                    committed.add(a["key"])
        with ds.lock:
            effects = dict(ds.effects)
        self.assertEqual({k: n for k, n in effects.items() if n != 1}, {}, f"seed {s}: duplicate effects")
        # An effect of the atom a client was in when it stopped may be
        # uncommitted; every committed action took effect.
        self.assertLessEqual(committed, set(effects), f"seed {s}: committed actions without effect")
        self.assertLessEqual(len(set(effects) - committed), clients, f"seed {s}")
        rep = check.verify(deep=True)
        self.assertTrue(rep["ok"], rep)
        print(f"server kills: {kills}, {clients} clients, {total} atoms committed, "
              f"{len(reconciled)} in-doubt actions reconciled by asking the downstream", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
