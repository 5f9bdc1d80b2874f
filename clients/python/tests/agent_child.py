"""The scripted agent the crash suites kill: atoms of one or two actions
against the fake downstream, each atom a step (run.step) that resumes
after a crash. It prints one line per event on stdout:

    ACK <seq> <head>          the atom committed (acknowledged)
    RECONCILED <key> <found>  an in-doubt action, settled by asking the downstream
    DONE <last_seq>

Environment: CONTINUUMD_SOCKET, DOWNSTREAM_URL, RUN, ATOMS.
"""

from __future__ import annotations

import os
import sys

import harness

import continuum
from continuum import DidNotHappen, Happened


def actions(seq: int) -> "list[tuple[str, dict, bool]]":
    """The actions of the atom at seq: (tool, args, idempotent)."""
    acts = [("deploy.step", {"seq": seq, "region": ["eu", "us", "ap"][seq % 3]}, seq % 3 == 0)]
    if seq % 4 == 0:
        acts.append(("notify.send", {"seq": seq, "to": "ops"}, False))
    return acts


def main() -> int:
    url, target = os.environ["DOWNSTREAM_URL"], int(os.environ["ATOMS"])
    client = continuum.Client.from_env(retry_for=30)
    run = client.run(os.environ["RUN"])

    def reconcile(key: str) -> "Happened | DidNotHappen":
        found, result = harness.lookup_downstream(url, key)
        print(f"RECONCILED {key} {found}", flush=True)
        return Happened(result) if found else DidNotHappen()

    def step(atom: continuum.Atom) -> None:
        for tool, args, idem in actions(atom.seq):
            out = atom.do_json(tool, lambda key, t=tool, a=args, i=idem: harness.call_downstream(url, t, a, key, i),
                               args=args, idempotent=idem, reconcile=reconcile)
            atom.delta.set_json(f"{tool}@{atom.seq}", out)
        atom.delta.append_message("assistant", f"step {atom.seq} done")

    while run.info().last_seq < target:
        with run.atom(takeover=True) as atom:
            step(atom)
        assert atom.committed is not None
        print(f"ACK {atom.committed.seq} {atom.committed.head}", flush=True)
    print(f"DONE {run.info().last_seq}", flush=True)
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
